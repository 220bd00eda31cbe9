package tcp

import (
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// AutoStreams is the number of streams a link with round trip rtt and
// rate bytes per second gets when Options.Streams is 0: enough that the
// bytes in flight cover the bandwidth-delay product with each stream's
// window at window bytes, plus one while more than one is needed (a loss
// halves one stream's congestion window, not the link's), between 1 and
// MaxAutoStreams.
//
// Measured on the 1 Gbit/s + 20 ms one-way bed (docs/ring.md): one stream
// carried 0.55 × the line, four 0.86 ×; without delay one stream is at
// 0.96 × the raw TCP ring and more only cost CPU. With Linux's default
// 4 MiB tcp_wmem (2 MiB of window a stream) this gives 4 streams at 40 ms
// and 1 below 17 ms.
func AutoStreams(rtt time.Duration, rate float64, window int) int {
	if window <= 0 || rtt <= 0 || !(rate > 0) {
		return 1
	}
	bdp := rate * rtt.Seconds()
	n := int(math.Ceil(bdp / float64(window)))
	if n > 1 {
		n++
	}
	return max(1, min(n, MaxAutoStreams))
}

// streamWindow is the data one stream keeps in flight: half its send
// buffer (the rest holds the kernel's per-packet overhead), the configured
// one or Linux's autotuning ceiling (tcp_wmem's third field).
func streamWindow(sndbuf int) int {
	if sndbuf > 0 {
		return sndbuf / 2
	}
	return wmemMax("/proc/sys/net/ipv4/tcp_wmem") / 2
}

// wmemMax reads the third field of a tcp_wmem file (4 MiB, Linux's
// default, when it cannot).
func wmemMax(path string) int {
	const fallback = 4 << 20
	b, err := os.ReadFile(path)
	if err != nil {
		return fallback
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return fallback
	}
	v, err := strconv.Atoi(f[2])
	if err != nil || v <= 0 {
		return fallback
	}
	return v
}

// Streams is the number of streams of the last link this transport dialed
// (0 before the first).
func (t *Transport) Streams() int { return int(t.last.Load()) }

// LinkStreams is AutoStreams for a link whose first connection c was just
// dialed (taking dialTime) with send buffer sndbuf (0: the OS default):
// the round trip is the kernel's estimate, or dialTime where there is none.
// For other transports over the same links (the raw TCP ring of
// protocol/ring/ringbench) that must choose as this one does.
func LinkStreams(c net.Conn, dialTime time.Duration, rate float64, sndbuf int) int {
	rtt, ok := kernelRTT(c)
	if !ok {
		rtt = dialTime
	}
	return AutoStreams(rtt, rate, streamWindow(sndbuf))
}
