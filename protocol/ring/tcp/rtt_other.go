//go:build !linux

package tcp

import (
	"net"
	"time"
)

// kernelRTT is not available here: the dial's own timing is used.
func kernelRTT(net.Conn) (time.Duration, bool) { return 0, false }
