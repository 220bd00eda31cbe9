package delta

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Stream hands out each tensor's exact bytes (valid during the callback).
func TestStreamData(t *testing.T) {
	ts := sampleTensors(8)
	for _, c := range []Compression{None, LZ4, Zstd} {
		file := encode(t, ts, WriteOptions{Compression: c})
		i := 0
		_, err := Stream(context.Background(), bytes.NewReader(file), Limits{}, func(u *Unverified) error {
			want := ts[i]
			if u.Name != want.Name || u.DType != want.DType || !slices.Equal(u.Shape, want.Shape) || !bytes.Equal(u.UnverifiedData(), want.Data) {
				t.Fatalf("%s: tensor %d differs", c, i)
			}
			if u.NumBytes() != uint64(len(want.Data)) {
				t.Fatalf("NumBytes %d", u.NumBytes())
			}
			i++
			return nil
		})
		if err != nil || i != len(ts) {
			t.Fatalf("%s: %v after %d tensors", c, err, i)
		}
	}
}

type mutableReaderAt struct{ b []byte }

func (m *mutableReaderAt) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(m.b).ReadAt(p, off)
}

func TestOpenDetectsModification(t *testing.T) {
	ts := sampleTensors(9)
	for _, c := range []Compression{None, LZ4, Zstd} {
		file := encode(t, ts, WriteOptions{Compression: c})
		ra := &mutableReaderAt{b: append([]byte(nil), file...)}
		f, err := Open(context.Background(), ra, int64(len(file)), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Info().Entries) != len(ts) {
			t.Fatalf("entries %d", len(f.Info().Entries))
		}
		if _, err := f.Tensor("nope"); err == nil {
			t.Fatal("found a tensor that is not there")
		}
		e := f.Info().Entries[5] // "big"
		got, err := f.Tensor(e.Name)
		if err != nil || !bytes.Equal(got.Data, ts[5].Data) {
			t.Fatalf("%s: %v", c, err)
		}
		ra.b[e.DataOffset+e.StoredBytes/2] ^= 0x40
		if _, err := f.Tensor(e.Name); !errors.Is(err, ErrModified) {
			t.Fatalf("%s: changed bytes: got %v, want ErrModified", c, err)
		}
		// Other tensors are unaffected.
		if _, err := f.Tensor(ts[0].Name); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenRefusesBadFile(t *testing.T) {
	file := encode(t, sampleTensors(10), WriteOptions{Compression: LZ4})
	file[len(file)-70] ^= 1
	if _, err := Open(context.Background(), bytes.NewReader(file), int64(len(file)), Limits{}); !errors.Is(err, ErrSignature) {
		t.Fatalf("got %v", err)
	}
}

func TestMetadata(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 123, time.UTC)
	f := MetadataFields{Job: "j", Epoch: 1, Step: 2, Node: "n", Sequence: 3, BaseCheckpoint: "cid", ClaimedLoss: 0.5, Samples: 9, Time: now}
	m := NewMetadata(f)
	if err := m.Set("worker_version", "1.2"); err != nil {
		t.Fatal(err)
	}
	js, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseMetadata(js)
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.Fields()
	if err != nil || got != f {
		t.Fatalf("%+v %v", got, err)
	}
	if raw, ok := back.Get("worker_version"); !ok || string(raw) != `"1.2"` {
		t.Fatalf("unknown key lost: %s", raw)
	}
	if js2, _ := back.MarshalJSON(); !bytes.Equal(js, js2) {
		t.Fatalf("not canonical:\n%s\n%s", js, js2)
	}
	// Missing fields are named; present ones read.
	partial, _ := ParseMetadata([]byte(`{"job":"x","epoch":18446744073709551615}`))
	if e, ok := partial.Epoch(); !ok || e != 1<<64-1 {
		t.Fatal("max epoch")
	}
	if _, err := partial.Fields(); err == nil || !strings.Contains(err.Error(), `"step"`) {
		t.Fatalf("got %v", err)
	}
	if _, ok := partial.Node(); ok {
		t.Fatal("node present")
	}
	for _, bad := range []string{
		``, `[]`, `null`, `"x"`, `{"a":1} {}`, `{"epoch":-1}`, `{"epoch":1.5}`, `{"epoch":18446744073709551616}`,
		`{"job":3}`, `{"claimed_loss":"x"}`, `{"time":"yesterday"}`, `{"time":5}`, "{\"job\":\"\xff\"}",
	} {
		if _, err := ParseMetadata([]byte(bad)); !errors.Is(err, ErrMetadata) {
			t.Errorf("%q: got %v", bad, err)
		}
	}
	if err := m.Set(KeyEpoch, "one"); !errors.Is(err, ErrMetadata) {
		t.Fatalf("Set with a wrong type: %v", err)
	}
}

func TestParseNames(t *testing.T) {
	for _, s := range []string{"none", "lz4", "zstd"} {
		c, err := ParseCompression(s)
		if err != nil || c.String() != s {
			t.Fatal(s, err)
		}
	}
	if _, err := ParseCompression("gzip"); !errors.Is(err, ErrCompression) {
		t.Fatal(err)
	}
	for _, s := range []string{"fp32", "fp16", "bf16", "int8"} {
		d, err := ParseDType(s)
		if err != nil || d.String() != s {
			t.Fatal(s, err)
		}
	}
	if _, err := ParseDType("fp64"); !errors.Is(err, ErrDType) {
		t.Fatal(err)
	}
}

// A hostile size never turns into an allocation: a file declaring a 1 GiB
// tensor and delivering 10 bytes fails fast having allocated little.
func TestDeclaredSizeIsNotAllocated(t *testing.T) {
	file := build(None, 0, entry("a", Int8, []uint64{1 << 30}, make([]byte, 10)))
	var ms1, ms2 runtimeMem
	ms1.read()
	for range 5 {
		if _, err := Read(context.Background(), bytes.NewReader(file), Limits{}); !errors.Is(err, ErrTruncated) {
			t.Fatalf("got %v", err)
		}
	}
	ms2.read()
	if grew := ms2.total - ms1.total; grew > 5*(17<<20) { // the first 16 MiB step, not 1 GiB
		t.Fatalf("allocated %d MiB for 5 reads of a lying 1 GiB declaration", grew>>20)
	}
}

// stallingReader returns its bytes, then blocks until released.
type stallingReader struct {
	b       []byte
	release chan struct{}
}

func (s *stallingReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		<-s.release
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

// A peer that sends a bad start and then stalls does not hold up the
// reader. In a synctest bubble the stalled read blocks durably, so the
// bound below fires at once (fake time) if Verify waits on it.
func TestBadStartThenStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := encode(t, sampleTensors(11), WriteOptions{Compression: LZ4})
		bad := append([]byte("XELTA"), file[5:200]...)
		src := &stallingReader{b: bad, release: make(chan struct{})}
		defer close(src.release)
		done := make(chan error, 1)
		go func() {
			_, err := Verify(context.Background(), src, Limits{})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrMagic) {
				t.Fatalf("got %v, want ErrMagic", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Verify waited on a stalled source after the header was already wrong")
		}
	})
}
