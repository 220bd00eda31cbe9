//go:build unix

package transfer

import "syscall"

const noFollowFlag = syscall.O_NOFOLLOW
