//go:build unix

package llama

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// mapping is a read-only shared memory map of a whole file. It is unmapped
// when the last Mat referring to it (and the mapping itself) is garbage:
// every Mat whose values lie in it holds a pointer to it.
type mapping struct {
	data []byte
}

// mapFile maps the first size bytes of f read-only. The map outlives f
// being closed.
func mapFile(f *os.File, size int64) (*mapping, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, fmt.Errorf("cannot map %d bytes", size)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	m := &mapping{data: b}
	runtime.AddCleanup(m, func(b []byte) { unix.Munmap(b) }, b)
	return m, nil
}
