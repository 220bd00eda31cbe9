//go:build !unix

package llama

import (
	"errors"
	"os"
)

// mapping is a memory map of a file; there are none on this platform, and
// 16-bit weights are read into the Go heap instead.
type mapping struct {
	data []byte
}

func mapFile(f *os.File, size int64) (*mapping, error) {
	return nil, errors.New("memory maps are not supported on this platform")
}
