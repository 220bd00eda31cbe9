package worker

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// probeServer answers bandwidth probes: every connection receives n bytes,
// then is closed. At most probeConns are served at once; more are closed.
type probeServer struct {
	ln   net.Listener
	n    int
	sem  chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

const probeConns = 8

func listenProbe(addr string, n int) (*probeServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &probeServer{ln: ln, n: n, sem: make(chan struct{}, probeConns)}
	p.wg.Go(p.serve)
	return p, nil
}

func (p *probeServer) Addr() string { return p.ln.Addr().String() }

func (p *probeServer) serve() {
	buf := make([]byte, 64<<10)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		select {
		case p.sem <- struct{}{}:
		default:
			c.Close()
			continue
		}
		p.wg.Go(func() {
			defer func() { <-p.sem }()
			defer c.Close()
			c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			for left := p.n; left > 0; {
				k, err := c.Write(buf[:min(left, len(buf))])
				if err != nil {
					return
				}
				left -= k
			}
		})
	}
}

func (p *probeServer) Close() error {
	p.once.Do(func() { p.ln.Close() })
	p.wg.Wait()
	return nil
}

// probe measures the rate at which addr sends its probe bytes, in kbit/s
// (10^3 bits per second); 0 when it cannot be reached within timeout.
func probe(ctx context.Context, addr string, timeout time.Duration) uint64 {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetReadDeadline(dl)
	}
	start := time.Now()
	n, err := io.Copy(io.Discard, c)
	secs := time.Since(start).Seconds()
	if err != nil || n == 0 {
		return 0
	}
	return uint64(float64(n) * 8 / 1e3 / max(secs, 1e-6))
}
