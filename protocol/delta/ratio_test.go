package delta

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"testing"
)

// lenless hides bytes.Reader's Len: a stream of unknown length.
type lenless struct{ r io.Reader }

func (l lenless) Read(p []byte) (int, error) { return l.r.Read(p) }

// TestRatioBound: Limits.MaxRatio refuses a file whose entries declare
// more decoded bytes than MaxRatio times its size, in every reader. Open,
// Inspect and the one-pass readers of a bytes.Reader know the size first
// and refuse at the declaring entry, before its frame is read; the
// one-pass readers of a stream refuse at the end, Skim without decoding
// anything.
func TestRatioBound(t *testing.T) {
	ctx := context.Background()
	file := bomb(t, 60<<20)
	var total uint64
	if info, err := Skim(ctx, bytes.NewReader(file), Limits{}); err != nil {
		t.Fatal(err)
	} else {
		for _, e := range info.Entries {
			total += e.NumBytes()
		}
	}
	size := uint64(len(file))
	t.Logf("%d-byte file declaring %d bytes: %d per byte", size, total, total/size)
	below := total / size // refused: total > below × size (the bomb is not a multiple)
	if total%size == 0 {
		t.Fatal("pick a bomb whose declared total is not a multiple of its size")
	}
	onePass := map[string]func(io.Reader, Limits) error{
		"Read":   func(r io.Reader, l Limits) error { _, err := Read(ctx, r, l); return err },
		"Verify": func(r io.Reader, l Limits) error { _, err := Verify(ctx, r, l); return err },
		"Stream": func(r io.Reader, l Limits) error {
			_, err := Stream(ctx, r, l, func(*Unverified) error { return nil })
			return err
		},
		"StreamData": func(r io.Reader, l Limits) error {
			_, err := StreamData(ctx, r, l, func(*Entry, io.Reader) error { return nil })
			return err
		},
		"Skim": func(r io.Reader, l Limits) error { _, err := Skim(ctx, r, l); return err },
	}
	type reader struct {
		read  func(Limits) error
		early bool // refuses at the declaring entry
	}
	readers := map[string]reader{
		"Open": {func(l Limits) error {
			_, err := Open(ctx, bytes.NewReader(file), int64(len(file)), l)
			return err
		}, true},
		"Inspect": {func(l Limits) error {
			_, err := Inspect(ctx, bytes.NewReader(file), int64(len(file)), l)
			return err
		}, true},
	}
	for name, read := range onePass {
		readers[name] = reader{func(l Limits) error { return read(bytes.NewReader(file), l) }, true}
		readers[name+" of a stream"] = reader{func(l Limits) error { return read(lenless{bytes.NewReader(file)}, l) }, false}
	}
	for name, r := range readers {
		for _, ratio := range []uint64{0, below + 1, 1 << 40} {
			if err := r.read(Limits{MaxRatio: ratio}); err != nil {
				t.Errorf("%s with MaxRatio %d: %v", name, ratio, err)
			}
		}
		for _, ratio := range []uint64{1, 64, below} {
			err := r.read(Limits{MaxRatio: ratio})
			var fe *Error
			if !errors.Is(err, ErrRatio) || !errors.Is(err, ErrLimit) || !errors.As(err, &fe) {
				t.Errorf("%s with MaxRatio %d: %v, want ErrRatio", name, ratio, err)
				continue
			}
			if r.early != (fe.Entry >= 0) || r.early && fe.Name != "w" {
				t.Errorf("%s with MaxRatio %d: refused at entry %d %q", name, ratio, fe.Entry, fe.Name)
			}
		}
	}

	// Refused before decoding: a 60 MiB tensor cannot be decoded, let
	// alone held, in 4 MiB.
	for name, read := range map[string]func() error{
		"Skim of a stream": func() error { _, err := Skim(ctx, lenless{bytes.NewReader(file)}, Limits{MaxRatio: 64}); return err },
		"Read":             func() error { _, err := Read(ctx, bytes.NewReader(file), Limits{MaxRatio: 64}); return err },
	} {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		err := read()
		runtime.ReadMemStats(&m1)
		if !errors.Is(err, ErrRatio) {
			t.Fatalf("%s: %v", name, err)
		}
		if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 4<<20 {
			t.Errorf("%s allocated %d bytes to refuse a %d-byte file", name, alloc, len(file))
		}
	}

	// Real tensors are far from any such bound.
	for _, c := range []Compression{None, LZ4, Zstd} {
		real := encode(t, sampleTensors(3), WriteOptions{Compression: c})
		if _, err := Verify(ctx, bytes.NewReader(real), Limits{MaxRatio: 2}); err != nil {
			t.Errorf("%s sample tensors with MaxRatio 2: %v", c, err)
		}
	}
}
