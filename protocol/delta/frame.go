package delta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// frameReader passes exactly one compressed frame from src through to a
// decoder. It parses the frame's structure (LZ4 frame format, or RFC 8878
// Zstandard) as the bytes go by, so it returns io.EOF at the frame's last byte
// and never lets a decoder read into the next entry. It also enforces what the
// decoders cannot know: the content size must equal the shape, the window and
// the frame's length are bounded by the shape, and dictionaries, skippable
// frames and reserved bits are refused.
type frameReader struct {
	src  io.Reader
	kind Compression
	want uint64 // decoded bytes the shape needs
	max  uint64 // frame bytes allowed
	// maxWindow caps a Zstandard window (a single-segment frame's window is
	// its content size): the decoder keeps that much history. 0: no cap.
	maxWindow uint64
	n         uint64 // frame bytes handed out so far

	buf    [32]byte
	pend   []byte // structural bytes read from src, not yet handed out
	remain uint64 // opaque bytes (block contents) to pass through
	state  int
	err    error // sticky

	// From the frame header.
	blockChecksum   bool
	contentChecksum bool
	blockMax        uint64
}

const (
	stHeader = iota
	stBlock
	stChecksum
	stDone
)

const (
	lz4Magic      = 0x184D2204
	lz4LegacyMag  = 0x184C2102
	zstdMagic     = 0xFD2FB528
	skippableMask = 0xFFFFFFF0
	skippableBase = 0x184D2A50
	zstdBlockMax  = 128 << 10
	zstdMinWindow = 8 << 20 // window every tensor may use, whatever its size
)

// frameLimit bounds the stored size of a frame that decodes to n bytes: a
// compressor stores an incompressible block raw, so a few bytes per block
// plus the header is the real overhead; anything far past it is hostile.
func frameLimit(n uint64) uint64 { return n + n/64 + 4096 }

func (f *frameReader) reset(src io.Reader, kind Compression, want, maxWindow uint64) {
	*f = frameReader{src: src, kind: kind, want: want, max: frameLimit(want), maxWindow: maxWindow}
}

// finished reports whether the whole frame has been handed out.
func (f *frameReader) finished() bool {
	return f.state == stDone && len(f.pend) == 0 && f.remain == 0
}

func (f *frameReader) Read(p []byte) (int, error) {
	for {
		if len(f.pend) > 0 {
			n := copy(p, f.pend)
			f.pend = f.pend[n:]
			return n, nil
		}
		if f.err != nil {
			return 0, f.err
		}
		if f.remain > 0 {
			if uint64(len(p)) > f.remain {
				p = p[:f.remain]
			}
			n, err := f.src.Read(p)
			f.remain -= uint64(n)
			if err == io.EOF && f.remain > 0 {
				f.err = ErrTruncated
			} else if err != nil && err != io.EOF {
				f.err = err
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		if f.state == stDone {
			return 0, io.EOF
		}
		if err := f.advance(); err != nil {
			f.err = err
		}
	}
}

// take reads k structural bytes into pend.
func (f *frameReader) take(k int) ([]byte, error) {
	if err := f.count(uint64(k)); err != nil {
		return nil, err
	}
	start := len(f.pend)
	b := f.buf[start : start+k]
	if _, err := io.ReadFull(f.src, b); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, ErrTruncated
		}
		return nil, err
	}
	f.pend = f.buf[:start+k]
	return b, nil
}

// count adds k bytes to the frame's length and refuses frames that grow past
// what the shape can justify.
func (f *frameReader) count(k uint64) error {
	f.n += k
	if f.n > f.max {
		return fmt.Errorf("%w: frame longer than %d bytes for %d decoded bytes", ErrFrame, f.max, f.want)
	}
	return nil
}

func (f *frameReader) passThrough(k uint64) error {
	if err := f.count(k); err != nil {
		return err
	}
	f.remain = k
	return nil
}

func (f *frameReader) advance() error {
	f.pend = f.buf[:0]
	if f.kind == LZ4 {
		return f.advanceLZ4()
	}
	return f.advanceZstd()
}

func frameMagicError(m uint32, want string) error {
	switch {
	case m&skippableMask == skippableBase:
		return fmt.Errorf("%w: skippable frame where one %s frame must be", ErrFrame, want)
	case m == lz4LegacyMag:
		return fmt.Errorf("%w: legacy LZ4 frame where one %s frame must be", ErrFrame, want)
	}
	return fmt.Errorf("%w: magic %#08x is not a %s frame", ErrFrame, m, want)
}

func (f *frameReader) advanceLZ4() error {
	switch f.state {
	case stHeader:
		b, err := f.take(6)
		if err != nil {
			return err
		}
		if m := binary.LittleEndian.Uint32(b); m != lz4Magic {
			return frameMagicError(m, "LZ4")
		}
		flg, bd := b[4], b[5]
		if flg>>6 != 1 {
			return fmt.Errorf("%w: LZ4 frame version %d", ErrFrame, flg>>6)
		}
		if flg&0x02 != 0 || bd&0x8F != 0 {
			return fmt.Errorf("%w: LZ4 frame reserved bits set", ErrFrame)
		}
		if flg&0x01 != 0 {
			return fmt.Errorf("%w: LZ4 frame needs a dictionary", ErrFrame)
		}
		id := bd >> 4 & 7
		if id < 4 {
			return fmt.Errorf("%w: LZ4 block size id %d", ErrFrame, id)
		}
		f.blockMax = 1 << (8 + 2*uint(id))
		f.blockChecksum = flg&0x10 != 0
		f.contentChecksum = flg&0x04 != 0
		hasSize := flg&0x08 != 0
		rest := 1
		if hasSize {
			rest += 8
		}
		b, err = f.take(rest)
		if err != nil {
			return err
		}
		if hasSize {
			if size := binary.LittleEndian.Uint64(b); size != f.want {
				return fmt.Errorf("%w: LZ4 frame declares %d bytes, shape needs %d", ErrSize, size, f.want)
			}
		}
		f.state = stBlock
	case stBlock:
		b, err := f.take(4)
		if err != nil {
			return err
		}
		v := binary.LittleEndian.Uint32(b)
		if v == 0 { // end mark
			f.state = stDone
			if f.contentChecksum {
				_, err = f.take(4)
			}
			return err
		}
		size := uint64(v & 0x7FFFFFFF)
		if size > f.blockMax {
			return fmt.Errorf("%w: LZ4 block of %d bytes exceeds the frame's %d-byte blocks", ErrFrame, size, f.blockMax)
		}
		if f.blockChecksum {
			size += 4
		}
		return f.passThrough(size)
	}
	return nil
}

func (f *frameReader) advanceZstd() error {
	switch f.state {
	case stHeader:
		b, err := f.take(5)
		if err != nil {
			return err
		}
		if m := binary.LittleEndian.Uint32(b); m != zstdMagic {
			return frameMagicError(m, "Zstandard")
		}
		fhd := b[4]
		fcsFlag, single := fhd>>6, fhd>>5&1 == 1
		if fhd&0x08 != 0 {
			return fmt.Errorf("%w: Zstandard frame reserved bit set", ErrFrame)
		}
		f.contentChecksum = fhd&0x04 != 0
		dictLen := [4]int{0, 1, 2, 4}[fhd&3]
		fcsLen := [4]int{0, 2, 4, 8}[fcsFlag]
		if single && fcsFlag == 0 {
			fcsLen = 1
		}
		wdLen := 1
		if single {
			wdLen = 0
		}
		b, err = f.take(wdLen + dictLen + fcsLen)
		if err != nil {
			return err
		}
		var window uint64
		if !single {
			exp, mant := uint64(b[0]>>3), uint64(b[0]&7)
			base := uint64(1) << (10 + exp)
			window = base + base/8*mant
		}
		var dict uint64
		for i := dictLen - 1; i >= 0; i-- {
			dict = dict<<8 | uint64(b[wdLen+i])
		}
		if dict != 0 {
			return fmt.Errorf("%w: Zstandard frame needs dictionary %d", ErrFrame, dict)
		}
		if fcsLen > 0 {
			var fcs uint64
			for i := fcsLen - 1; i >= 0; i-- {
				fcs = fcs<<8 | uint64(b[wdLen+dictLen+i])
			}
			if fcsLen == 2 {
				fcs += 256
			}
			if fcs != f.want {
				return fmt.Errorf("%w: Zstandard frame declares %d bytes, shape needs %d", ErrSize, fcs, f.want)
			}
			if single {
				window = fcs
			}
		}
		if maxWin := max(2*f.want, zstdMinWindow); window > maxWin {
			return fmt.Errorf("%w: Zstandard window of %d bytes for %d decoded bytes", ErrFrame, window, f.want)
		}
		if f.maxWindow > 0 && window > f.maxWindow {
			return fmt.Errorf("%w: Zstandard window of %d bytes exceeds the limit of %d (the decoder would keep that much history)", ErrLimit, window, f.maxWindow)
		}
		f.blockMax = zstdBlockMax
		f.state = stBlock
	case stBlock:
		b, err := f.take(3)
		if err != nil {
			return err
		}
		h := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		last, typ, size := h&1 == 1, h>>1&3, uint64(h>>3)
		if typ == 3 {
			return fmt.Errorf("%w: Zstandard reserved block type", ErrFrame)
		}
		if size > f.blockMax {
			return fmt.Errorf("%w: Zstandard block of %d bytes exceeds %d", ErrFrame, size, f.blockMax)
		}
		if typ == 1 { // RLE: one byte repeated size times
			size = 1
		}
		if last {
			f.state = stChecksum
		}
		return f.passThrough(size)
	case stChecksum:
		f.state = stDone
		if f.contentChecksum {
			_, err := f.take(4)
			return err
		}
	}
	return nil
}

// errFrameStopped is returned when a decoder ends before the frame does.
var errFrameStopped = errors.New("decoder stopped before the end of the frame")
