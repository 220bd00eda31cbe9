package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
)

func TestStreamDataMatchesRead(t *testing.T) {
	ts := sampleTensors(9)
	for _, c := range []Compression{None, LZ4, Zstd} {
		file := encode(t, ts, WriteOptions{Compression: c, Metadata: NewMetadata(MetadataFields{Job: "j"})})
		d, err := Read(context.Background(), bytes.NewReader(file), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		info, err := StreamData(context.Background(), bytes.NewReader(file), Limits{}, func(e *Entry, r io.Reader) error {
			// Read in odd pieces to cross frame and chunk boundaries.
			var b bytes.Buffer
			buf := make([]byte, 777)
			for {
				n, err := r.Read(buf)
				b.Write(buf[:n])
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
			}
			got = append(got, b.Bytes())
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if len(got) != len(d.Tensors) || info.Metadata == nil {
			t.Fatalf("%s: %d tensors, want %d", c, len(got), len(d.Tensors))
		}
		for i := range got {
			if !bytes.Equal(got[i], d.Tensors[i].Data) {
				t.Fatalf("%s: tensor %q differs", c, d.Tensors[i].Name)
			}
		}
		// Reading nothing is fine: the rest is decoded to verify.
		if _, err := StreamData(context.Background(), bytes.NewReader(file), Limits{}, func(*Entry, io.Reader) error { return nil }); err != nil {
			t.Fatalf("%s, reading nothing: %v", c, err)
		}
		// A callback's own error comes back as is.
		mine := errors.New("mine")
		if _, err := StreamData(context.Background(), bytes.NewReader(file), Limits{}, func(*Entry, io.Reader) error { return mine }); err != mine {
			t.Fatalf("%s: callback error came back as %v", c, err)
		}
	}
}

// A frame that decodes short is the file's fault, even when the callback
// passes the read error on (as io.Copy does).
func TestStreamDataReportsFormatErrors(t *testing.T) {
	lz := func(b []byte) []byte { c := compressor{}; f, _ := c.compress(Zstd, b); return f }
	frame := lz(bytes.Repeat([]byte{1, 2, 3, 4}, 1000))
	short := build(Zstd, 0, entry("a", Int8, []uint64{4000}, frame[:len(frame)-20]))
	_, err := StreamData(context.Background(), bytes.NewReader(short), Limits{}, func(_ *Entry, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrFrame) && !errors.Is(err, ErrSize) {
		t.Fatalf("got %v, want a format error", err)
	}
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("got %T %v, want a *delta.Error", err, err)
	}
}

// zstdZeros hand-writes a Zstandard frame of n zero bytes as RLE blocks:
// four bytes per 128 KiB, the compression bomb's building block. With
// single set the frame is single-segment (window = n).
func zstdZeros(n uint64, single bool) []byte {
	b := binary.LittleEndian.AppendUint32(nil, zstdMagic)
	if single {
		b = append(b, 3<<6|1<<5) // 8-byte content size, single segment
	} else {
		b = append(b, 3<<6, (23-10)<<3) // 8-byte content size, 8 MiB window
	}
	b = binary.LittleEndian.AppendUint64(b, n)
	for n > 0 {
		k := min(n, zstdBlockMax)
		n -= k
		h := uint32(1)<<1 | uint32(k)<<3 // RLE
		if n == 0 {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return b
}

// StreamData's memory does not grow with the tensors: 2 GiB of zeros in
// two 8 MiB-window frames and a single-segment frame of 8 MiB stream with a
// few MiB allocated; a single-segment frame of 1 GiB (whose window is the
// whole tensor) is refused by MaxWindowBytes before it is decoded.
func TestStreamDataMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 2 GiB")
	}
	payload := append(entry("a", Int8, []uint64{1 << 30}, zstdZeros(1<<30, false)), entry("b", Int8, []uint64{1 << 30}, zstdZeros(1<<30, false))...)
	payload = append(payload, entry("c", Int8, []uint64{8 << 20}, zstdZeros(8<<20, true))...)
	file := build(Zstd, 0, payload)
	t.Logf("file of %d bytes declares 2 GiB", len(file))
	var ms1, ms2 runtimeMem
	ms1.read()
	var n int64
	copyAll := func(_ *Entry, r io.Reader) error {
		k, err := io.Copy(io.Discard, r)
		n += k
		return err
	}
	_, err := StreamData(context.Background(), bytes.NewReader(file), Limits{}, copyAll)
	ms2.read()
	if err != nil || n != 2<<30+8<<20 {
		t.Fatalf("streamed %d bytes: %v", n, err)
	}
	if grew := ms2.total - ms1.total; grew > 64<<20 {
		t.Fatalf("allocated %d MiB to stream 2 GiB", grew>>20)
	}

	wide := build(Zstd, 0, entry("w", Int8, []uint64{1 << 30}, zstdZeros(1<<30, true)))
	ms1.read()
	_, err = StreamData(context.Background(), bytes.NewReader(wide), Limits{}, copyAll)
	ms2.read()
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("1 GiB window: got %v, want ErrLimit", err)
	}
	if grew := ms2.total - ms1.total; grew > 16<<20 {
		t.Fatalf("allocated %d MiB refusing a 1 GiB window", grew>>20)
	}
	if _, err := Verify(context.Background(), bytes.NewReader(wide), Limits{MaxWindowBytes: 8 << 20}); !errors.Is(err, ErrLimit) {
		t.Fatalf("Verify, 1 GiB window: got %v, want ErrLimit", err)
	}
}

func TestSkim(t *testing.T) {
	for _, c := range []Compression{None, LZ4, Zstd} {
		file := encode(t, sampleTensors(11), WriteOptions{Compression: c, Metadata: NewMetadata(MetadataFields{Job: "j"})})
		want, err := Verify(context.Background(), bytes.NewReader(file), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Skim(context.Background(), bytes.NewReader(file), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if len(got.Entries) != len(want.Entries) || got.Metadata == nil || got.Signature != want.Signature {
			t.Fatalf("%s: Skim's info differs from Verify's", c)
		}
		for i := range got.Entries {
			g, w := got.Entries[i], want.Entries[i]
			if g.Name != w.Name || g.StoredBytes != w.StoredBytes || g.DataOffset != w.DataOffset {
				t.Fatalf("%s: entry %d: %+v, want %+v", c, i, g, w)
			}
		}
	}
	// What Skim refuses without decoding: a forged key, a bad signature,
	// declarations over the limits (a terabyte in 40 KB).
	lots := build(Zstd, 0, append(entry("a", Int8, []uint64{1 << 30}, zstdZeros(1<<30, false)), entry("b", Int8, []uint64{1 << 40}, zstdZeros(1<<30, false))...))
	for name, c := range map[string]struct {
		file []byte
		want error
	}{
		"forged":     {forgedFile(), ErrKey},
		"over total": {lots, ErrLimit},
		"signature": {func() []byte {
			f := encode(t, sampleTensors(1), WriteOptions{Compression: LZ4})
			f[len(f)-50] ^= 1
			return f
		}(), ErrSignature},
	} {
		start := time.Now()
		if _, err := Skim(context.Background(), bytes.NewReader(c.file), Limits{MaxTotalBytes: 2 << 30}); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: Skim took %v", name, d)
		}
	}
	// What only decoding finds: an LZ4 frame (no content size) decoding short.
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	w.Write(make([]byte, 9))
	w.Close()
	short := build(LZ4, 0, entry("a", Int8, []uint64{10}, buf.Bytes()))
	if _, err := Skim(context.Background(), bytes.NewReader(short), Limits{}); err != nil {
		t.Fatalf("Skim decoded: %v", err)
	}
	if _, err := Verify(context.Background(), bytes.NewReader(short), Limits{}); !errors.Is(err, ErrSize) {
		t.Fatalf("Verify: %v", err)
	}
}
