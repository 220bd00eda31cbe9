//go:build unix

package store

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const noFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// syncFS flushes the whole file system that holds r (syncfs(2)): one call
// instead of an fsync per block.
func syncFS(r *os.Root) error {
	d, err := r.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}
