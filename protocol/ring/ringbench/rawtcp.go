package ringbench

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/protocol/ring/tcp"
)

// The raw TCP ring is the ceiling our ring is measured against: the same
// nodes (loopback or namespaces, same shaping), the same streams and socket
// buffers, and each rank sends exactly what a ring all-reduce sends,
// 2(N−1)/N of the vector, to its successor while it receives as much from
// its predecessor — with no hashing, signing, TLS, reduction or framing.
// Its busbw (bytes each rank sends per second) bounds ours from above.
// Plain TCP, also between namespaces: it carries nothing but zeros.

// rawChunk is the size of one write and one read.
const rawChunk = 1 << 20

// rawNode is Node for the raw TCP ring.
func rawNode(ctx context.Context, cfg Config, rank int, host string, stdin io.Reader, stdout io.Writer) error {
	lc := net.ListenConfig{Control: tcp.SocketBuffers(cfg.SocketBuffer, cfg.SocketBuffer)}
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return err
	}
	defer ln.Close()
	enc := json.NewEncoder(stdout)
	o, err := introduce(cfg, rank, hello{Addr: ln.Addr().String(), Pub: "-"}, enc, stdin)
	if err != nil {
		return err
	}
	succ := o.Addrs[(rank+1)%cfg.Nodes]
	out, inc, err := rawConnect(ctx, ln, succ, cfg.Streams, cfg.SocketBuffer, cfg.Timeout)
	if err != nil {
		return err
	}
	streams := len(inc)
	if cfg.RawTLS {
		if err := rawTLS(ctx, out, inc); err != nil {
			return err
		}
	}
	defer func() {
		for _, c := range append(out, inc...) {
			c.Close()
		}
	}()
	n := cfg.Nodes
	send := make([]byte, rawChunk)
	recv := make([][]byte, streams)
	for i := range recv {
		recv[i] = make([]byte, rawChunk)
	}
	var tok [1]byte
	for _, size := range cfg.Sizes {
		// What each rank of a ring all-reduce sends: 2(N−1)/N of the vector
		// (to within a few elements: chunk sizes differ by at most one).
		total := size * 2 * int64(n-1) / int64(n)
		var got int64
		rep := timeCalls(cfg, size, func() error {
			// Barrier: 2(N−1) one-byte hops, like a one-element all-reduce.
			for range 2 * (n - 1) {
				if _, err := out[0].Write(tok[:]); err != nil {
					return err
				}
				if _, err := io.ReadFull(inc[0], tok[:]); err != nil {
					return err
				}
			}
			return nil
		}, func() (err error) {
			got, err = rawTransfer(out, inc, send, recv, total)
			return err
		}, func() bool { return got == total })
		rep.Streams = len(out)
		if err := enc.Encode(rep); err != nil {
			return err
		}
		if rep.Err != "" {
			return errors.New(rep.Err)
		}
	}
	return nil
}

// rawTLS puts TLS 1.3 on every stream, with a throwaway certificate and no
// peer verification: the same record layer and AES-GCM as the ring's links,
// to tell TLS's share of the cost from the ring's. Diagnostic only (the
// streams carry zeros).
func rawTLS(ctx context.Context, out, in []net.Conn) error {
	key, err := nodekey.Generate(nil)
	if err != nil {
		return err
	}
	cert, err := tcp.Certificate(key)
	if err != nil {
		return err
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}
	var wg sync.WaitGroup
	errs := make([]error, len(out)+len(in))
	for i := range out {
		c := tls.Client(out[i], conf)
		out[i] = c
		wg.Go(func() { errs[i] = c.HandshakeContext(ctx) })
	}
	for i := range in {
		c := tls.Server(in[i], conf)
		in[i] = c
		wg.Go(func() { errs[len(out)+i] = c.HandshakeContext(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rawConnect dials streams connections to the successor (0: as many as
// the ring's transport would choose for the link, tcp.LinkStreams) and
// accepts what the predecessor announces, ordered by the stream index and
// count each dialer sends.
func rawConnect(ctx context.Context, ln net.Listener, succ string, streams, sockbuf int, timeout time.Duration) (out, in []net.Conn, err error) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	accepted := make(chan error, 1)
	go func() {
		for k := 0; k == 0 || k < len(in); k++ {
			c, err := ln.Accept()
			if err != nil {
				accepted <- err
				return
			}
			var h [4]byte // stream index, stream count
			c.SetReadDeadline(time.Now().Add(timeout))
			if _, err := io.ReadFull(c, h[:]); err != nil {
				accepted <- err
				return
			}
			c.SetReadDeadline(time.Time{})
			i, n := int(binary.LittleEndian.Uint16(h[:])), int(binary.LittleEndian.Uint16(h[2:]))
			if in == nil && n >= 1 && n <= 64 {
				in = make([]net.Conn, n)
			}
			if n != len(in) || i >= n || in[i] != nil {
				accepted <- fmt.Errorf("ringbench: bad stream %d of %d", i, n)
				return
			}
			in[i] = c
		}
		accepted <- nil
	}()
	d := net.Dialer{Control: tcp.SocketBuffers(sockbuf, sockbuf)}
	for i := 0; i == 0 || i < streams; i++ {
		var c net.Conn
		var start time.Time
		for delay := 5 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
			start = time.Now()
			if c, err = d.DialContext(ctx, "tcp", succ); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(delay)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("ringbench: raw tcp: dial %s: %w", succ, err)
		}
		if streams == 0 {
			streams = tcp.LinkStreams(c, time.Since(start), 125e6, sockbuf)
		}
		var h [4]byte
		binary.LittleEndian.PutUint16(h[:], uint16(i))
		binary.LittleEndian.PutUint16(h[2:], uint16(streams))
		if _, err := c.Write(h[:]); err != nil {
			return nil, nil, err
		}
		out = append(out, c)
	}
	select {
	case err = <-accepted:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ringbench: raw tcp: accept: %w", err)
	}
	return out, in, nil
}

// rawTransfer sends total bytes spread over out and receives total bytes
// spread the same way over in, all streams at once. It returns the bytes
// received.
func rawTransfer(out, in []net.Conn, send []byte, recv [][]byte, total int64) (int64, error) {
	s := int64(len(out))
	share := func(i int) int64 { return total/s + b2i(int64(i) < total%s) }
	var wg sync.WaitGroup
	errs := make([]error, 2*len(out))
	got := make([]int64, len(in))
	for i := range out {
		wg.Go(func() {
			for left := share(i); left > 0; {
				k := min(left, int64(len(send)))
				if _, err := out[i].Write(send[:k]); err != nil {
					errs[i] = err
					return
				}
				left -= k
			}
		})
		wg.Go(func() {
			for left := share(i); left > 0; {
				k := min(left, int64(len(recv[i])))
				m, err := io.ReadFull(in[i], recv[i][:k])
				got[i] += int64(m)
				if err != nil {
					errs[len(out)+i] = err
					return
				}
				left -= k
			}
		})
	}
	wg.Wait()
	var sum int64
	for _, g := range got {
		sum += g
	}
	return sum, errors.Join(errs...)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
