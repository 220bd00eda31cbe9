package delta

import (
	"context"
	"crypto/sha3"
	"errors"
	"hash"
	"io"
	"sync"
	"sync/atomic"
)

// The reading pipeline. The feeder goroutine reads the file in chunks, holds
// back the last TrailerSize bytes (the trailer, known only at EOF), hands
// every other byte to a hashing goroutine (SHA3-256 of the payload, for the
// checksum) and to the parser, and then hashes the chunk itself (SHA3-256 of
// header ‖ payload, for the signature). Two digests, two goroutines with a
// core's worth of work each, and decompression beside them; the file is read
// exactly once. Chunks are pooled: memory is chunkSize × poolSize
// whatever the file's size.

const (
	chunkSize = 128 << 10
	poolSize  = 16
)

type chunk struct {
	data []byte // valid bytes; a prefix of buf
	buf  []byte
	off  int64 // file offset of data[0]
	refs atomic.Int32
	pool chan []byte
}

func (c *chunk) release() {
	if c.refs.Add(-1) == 0 {
		c.pool <- c.buf
	}
}

type pump struct {
	src       io.Reader
	pool      chan []byte    // buffers returned by consumers
	allocated int            // buffers made so far, at most poolSize
	out       [3]chan *chunk // signature digest, checksum digest, parser
	done      chan struct{}  // closed by the parser when it stops reading

	// Set by the feeder before it closes out; read after.
	err        error
	size       int64
	trailer    [TrailerSize]byte
	trailerLen int

	sig, sum hash.Hash
	wg       sync.WaitGroup
}

func startPump(ctx context.Context, src io.Reader) *pump {
	p := &pump{
		src:  src,
		pool: make(chan []byte, poolSize),
		done: make(chan struct{}),
		sig:  sha3.New256(),
		sum:  sha3.New256(),
	}
	for i := range p.out {
		p.out[i] = make(chan *chunk, poolSize)
	}
	p.wg.Add(2)
	go p.feed(ctx)
	go p.hash(p.out[0], p.sum, HeaderSize)
	return p
}

// hash writes every byte at file offset ≥ from into h.
func (p *pump) hash(in <-chan *chunk, h hash.Hash, from int64) {
	defer p.wg.Done()
	for c := range in {
		d := c.data
		if skip := from - c.off; skip > 0 {
			d = d[min(int64(len(d)), skip):]
		}
		h.Write(d)
		c.release()
	}
}

func (p *pump) feed(ctx context.Context) {
	defer p.wg.Done()
	defer func() {
		for _, ch := range p.out {
			close(ch)
		}
	}()
	var carry []byte // the last TrailerSize bytes seen so far
	var off int64
	for {
		buf, err := p.nextBuf(ctx, off)
		if err != nil {
			if err != errStopped {
				p.err = err
			}
			return
		}
		// One Read, not ReadFull: bytes that have arrived are parsed and
		// hashed now, even if the source then stalls.
		n := copy(buf, carry)
		k, err := p.src.Read(buf[n:])
		for k == 0 && err == nil {
			k, err = p.src.Read(buf[n:])
		}
		n += k
		p.size += int64(k)
		eof := err == io.EOF
		if err != nil && !eof {
			p.err = err
			return
		}
		keep := min(n, TrailerSize)
		if eof {
			p.trailerLen = copy(p.trailer[:], buf[n-keep:n])
		} else {
			carry = append(carry[:0], buf[n-keep:n]...)
		}
		if n-keep > 0 {
			c := &chunk{data: buf[:n-keep], buf: buf, off: off, pool: p.pool}
			off += int64(n - keep)
			c.refs.Store(3)
			p.out[0] <- c // never blocks: a channel holds as many chunks as the pool
			p.out[1] <- c
			// The feeder computes the signature digest itself: one goroutine
			// per core's worth of work, no hand-off for this digest.
			p.sig.Write(c.data)
			c.release()
		} else {
			p.pool <- buf
		}
		if eof {
			return
		}
	}
}

var errStopped = errors.New("delta: parser stopped")

// nextBuf returns a buffer for the next chunk. Buffers grow with the file's
// progress, so a tiny file costs a tiny buffer and a large one moves in
// chunkSize pieces; at most poolSize buffers are in flight.
func (p *pump) nextBuf(ctx context.Context, off int64) ([]byte, error) {
	want := 4 << 10
	for want < chunkSize && int64(want) < off {
		want *= 2
	}
	for {
		var buf []byte
		select {
		case buf = <-p.pool:
		default:
			if p.allocated < poolSize {
				p.allocated++
				return chunkBuffers.get(want), nil
			}
			select {
			case buf = <-p.pool:
			case <-p.done:
				return nil, errStopped
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if len(buf) >= want {
			return buf, nil
		}
		chunkBuffers.put(buf) // outgrown
		p.allocated--
	}
}

// abandon tells the feeder the parser is done without waiting for it: a
// feeder blocked in a Read that never returns (a stalled peer) must not hold
// up the caller. It exits when that Read returns. The pump's results must
// not be read after abandon.
func (p *pump) abandon() { close(p.done) }

// stop tells the feeder the parser is done, waits for all goroutines and
// recycles the buffers.
func (p *pump) stop() {
	close(p.done)
	p.wg.Wait()
	for {
		select {
		case b := <-p.pool:
			chunkBuffers.put(b)
		default:
			return
		}
	}
}

// bufferPool recycles chunk buffers across files, by size class: 4 KiB
// doubling up to chunkSize.
type bufferPool struct{ classes [8]sync.Pool }

var chunkBuffers bufferPool

func sizeClass(n int) int {
	c := 0
	for 4<<10<<c < n {
		c++
	}
	return c
}

func (b *bufferPool) get(n int) []byte {
	if c := sizeClass(n); c < len(b.classes) {
		if v, ok := b.classes[c].Get().(*[]byte); ok {
			return *v
		}
	}
	return make([]byte, n)
}

func (b *bufferPool) put(buf []byte) {
	if c := sizeClass(len(buf)); c < len(b.classes) && 4<<10<<c == len(buf) {
		b.classes[c].Put(&buf)
	}
}

// chunkReader is the parser's io.Reader over the pump's chunks.
type chunkReader struct {
	ctx  context.Context
	p    *pump
	cur  *chunk
	rest []byte
	off  int64 // file offset of the next byte
	tap  hash.Hash64
	// drained is set once the feeder has closed the stream: it has read
	// its last byte and is about to exit.
	drained bool
}

func (r *chunkReader) Read(b []byte) (int, error) {
	for len(r.rest) == 0 {
		if r.cur != nil {
			r.cur.release()
			r.cur = nil
		}
		select {
		case c, ok := <-r.p.out[1]:
			if !ok {
				r.drained = true
				if r.p.err != nil {
					return 0, r.p.err
				}
				return 0, io.EOF
			}
			r.cur, r.rest = c, c.data
		case <-r.ctx.Done():
			return 0, r.ctx.Err()
		}
	}
	n := copy(b, r.rest)
	if r.tap != nil {
		r.tap.Write(r.rest[:n])
	}
	r.rest = r.rest[n:]
	r.off += int64(n)
	return n, nil
}

func (r *chunkReader) close() {
	if r.cur != nil {
		r.cur.release()
		r.cur = nil
	}
}
