package tcp

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// kernelRTT is the kernel's round-trip estimate of a connected TCP socket
// (TCP_INFO's tcpi_rtt, from the handshake's SYN/SYN-ACK on a new
// connection): unlike a clock read around the dial, it does not include
// the time this process waited to be scheduled. ok is false when the
// connection is not a TCP socket or the kernel does not say.
func kernelRTT(c net.Conn) (time.Duration, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil || info == nil || info.Rtt == 0 {
		return 0, false
	}
	return time.Duration(info.Rtt) * time.Microsecond, true
}
