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

func tryLockExclusive(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}

// lockShared takes (or turns an exclusive lock back into) a shared lock,
// waiting while another process holds it exclusively (its GC).
func lockShared(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH)
		if err != unix.EINTR {
			return err
		}
	}
}
