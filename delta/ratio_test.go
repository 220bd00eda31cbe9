package delta

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"testing"
)

// TestRatioBound: Limits.MaxRatio refuses a file whose entries declare
// more decoded bytes than MaxRatio times its size, in every reader. Open
// and Inspect know the size first and refuse at the declaring entry,
// before its frame is read; the one-pass readers refuse at the end, Skim
// without decoding anything.
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
	readers := map[string]func(Limits) (*Info, error){
		"Read": func(l Limits) (*Info, error) {
			d, err := Read(ctx, bytes.NewReader(file), l)
			if d != nil {
				return d.Info, err
			}
			return nil, err
		},
		"Verify": func(l Limits) (*Info, error) { return Verify(ctx, bytes.NewReader(file), l) },
		"Stream": func(l Limits) (*Info, error) {
			return Stream(ctx, bytes.NewReader(file), l, func(*Unverified) error { return nil })
		},
		"StreamData": func(l Limits) (*Info, error) {
			return StreamData(ctx, bytes.NewReader(file), l, func(_ *Entry, r io.Reader) error { return nil })
		},
		"Skim": func(l Limits) (*Info, error) { return Skim(ctx, bytes.NewReader(file), l) },
		"Open": func(l Limits) (*Info, error) {
			f, err := Open(ctx, bytes.NewReader(file), int64(len(file)), l)
			if f != nil {
				return f.Info(), err
			}
			return nil, err
		},
		"Inspect": func(l Limits) (*Info, error) {
			f, err := Inspect(ctx, bytes.NewReader(file), int64(len(file)), l)
			if f != nil {
				return f.Info(), err
			}
			return nil, err
		},
	}
	for name, read := range readers {
		for _, ratio := range []uint64{0, below + 1, 1 << 40} {
			if _, err := read(Limits{MaxRatio: ratio}); err != nil {
				t.Errorf("%s with MaxRatio %d: %v", name, ratio, err)
			}
		}
		for _, ratio := range []uint64{1, 64, below} {
			_, err := read(Limits{MaxRatio: ratio})
			var fe *Error
			if !errors.Is(err, ErrRatio) || !errors.Is(err, ErrLimit) || !errors.As(err, &fe) {
				t.Errorf("%s with MaxRatio %d: %v, want ErrRatio", name, ratio, err)
				continue
			}
			// Knowing the size first, Open and Inspect refuse at the
			// entry that declares the bytes (so before reading its data).
			if known := name == "Open" || name == "Inspect"; known != (fe.Entry >= 0) || known && fe.Name != "w" {
				t.Errorf("%s with MaxRatio %d: refused at entry %d %q", name, ratio, fe.Entry, fe.Name)
			}
		}
	}

	// Skim refuses the bomb without decoding it: a 60 MiB tensor cannot be
	// decoded in 4 MiB.
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err := Skim(ctx, bytes.NewReader(file), Limits{MaxRatio: 64})
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, ErrRatio) {
		t.Fatal(err)
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 4<<20 {
		t.Errorf("Skim allocated %d bytes to refuse a %d-byte file", alloc, len(file))
	}

	// Real tensors are far from any such bound.
	for _, c := range []Compression{None, LZ4, Zstd} {
		real := encode(t, sampleTensors(3), WriteOptions{Compression: c})
		if _, err := Verify(ctx, bytes.NewReader(real), Limits{MaxRatio: 2}); err != nil {
			t.Errorf("%s sample tensors with MaxRatio 2: %v", c, err)
		}
	}
}
