package delta

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the fuzz seed files in testdata/")

// seedFiles are small valid files of every compression, committed under
// testdata/ as the fuzz corpus's starting points (plus python-*.delta, made
// by the Python reference writer).
func TestSeedFiles(t *testing.T) {
	ts := sampleTensors(7)
	ts[5].Shape = []uint64{64, 70} // keep the corpus small
	ts[5].Data = ts[5].Data[:64*70*2]
	meta := NewMetadata(MetadataFields{Job: "seed", Epoch: 1, Step: 2, Node: "n", Sequence: 3})
	for _, c := range []Compression{None, LZ4, Zstd} {
		file := encode(t, ts, WriteOptions{Compression: c, Flags: FlagLoRA, Metadata: meta})
		path := filepath.Join("testdata", "seed-"+c.String()+".delta")
		if *updateSeeds {
			if err := os.WriteFile(path, file, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestSeedFiles -update-seeds)", err)
		}
		if !bytes.Equal(got, file) {
			t.Fatalf("%s: the writer's output changed; if that is intended, run with -update-seeds", path)
		}
	}
}

func fuzzSeeds(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.delta"))
	if len(paths) == 0 {
		f.Fatal("no seed files in testdata/")
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Hostile starting points: the small-order forgery, refused names and
	// an empty tensor with dimensions no tensor could have.
	f.Add(forgedFile())
	for _, name := range badNames {
		f.Add(build(None, 0, entry(name, FP32, []uint64{1}, make([]byte, 4))))
	}
	f.Add(build(Zstd, 0, entry("a", FP32, []uint64{0, 1<<64 - 1, 1<<64 - 1}, nil)))
}

// fuzzLimits bound the decoded size absolutely and per byte of the file
// (MaxRatio), so the readers must also agree on the ratio.
var fuzzLimits = Limits{MaxTensorBytes: 1 << 20, MaxTotalBytes: 4 << 20, MaxTensors: 256, MaxRatio: 64}

// checkReaders runs every reader on b and checks they agree.
func checkReaders(t *testing.T, b []byte) {
	ctx := context.Background()
	d, err := Read(ctx, bytes.NewReader(b), fuzzLimits)
	_, verr := Verify(ctx, bytes.NewReader(b), fuzzLimits)
	if (err == nil) != (verr == nil) {
		t.Fatalf("Read says %v, Verify says %v", err, verr)
	}
	// Inspect skips the frames: it accepts whatever Read accepts, and what
	// it accepts beyond that must fail when a tensor is decoded.
	fi, ierr := Inspect(ctx, bytes.NewReader(b), int64(len(b)), fuzzLimits)
	if err == nil && ierr != nil {
		t.Fatalf("Read accepts, Inspect says %v", ierr)
	}
	if err != nil && ierr == nil {
		failed := false
		for _, e := range fi.Info().Entries {
			if e.Name == MetadataName {
				continue
			}
			if _, terr := fi.Tensor(e.Name); terr != nil {
				if !isFormatErr(terr) {
					t.Fatalf("Inspect/Tensor(%q): %v, want a frame or size error", e.Name, terr)
				}
				failed = true
				break
			}
		}
		if !failed {
			t.Fatalf("Read says %v, but Inspect and every Tensor accept", err)
		}
	}
	if err != nil {
		if d != nil {
			t.Fatal("tensors returned with an error")
		}
		return
	}
	for _, want := range d.Tensors {
		got, err := fi.Tensor(want.Name)
		if err != nil || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("Inspect/Tensor(%q) disagrees with Read: %v", want.Name, err)
		}
	}
	// Skim accepts whatever fully verifies, and sees the same entries.
	sk, err := Skim(ctx, bytes.NewReader(b), fuzzLimits)
	if err != nil || len(sk.Entries) != len(d.Info.Entries) {
		t.Fatalf("Read accepts, Skim says %v", err)
	}
	for i := range sk.Entries {
		if sk.Entries[i].StoredBytes != d.Info.Entries[i].StoredBytes {
			t.Fatalf("entry %d: Skim sees %d stored bytes, Read %d", i, sk.Entries[i].StoredBytes, d.Info.Entries[i].StoredBytes)
		}
	}
	// So does StreamData, with the same bytes.
	i := 0
	if _, err := StreamData(ctx, bytes.NewReader(b), fuzzLimits, func(e *Entry, r io.Reader) error {
		got, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, d.Tensors[i].Data) {
			t.Fatalf("StreamData: tensor %q differs from Read's", e.Name)
		}
		i++
		return nil
	}); err != nil {
		t.Fatalf("Read accepts, StreamData says %v", err)
	}
	f, err := Open(ctx, bytes.NewReader(b), int64(len(b)), fuzzLimits)
	if err != nil {
		t.Fatalf("Read accepts, Open says %v", err)
	}
	for _, want := range d.Tensors {
		got, err := f.Tensor(want.Name)
		if err != nil || !bytes.Equal(got.Data, want.Data) || !slices.Equal(got.Shape, want.Shape) {
			t.Fatalf("Open/Tensor(%q) disagrees with Read: %v", want.Name, err)
		}
	}
	// A file that verified re-encodes to a file that verifies with the same tensors.
	var out bytes.Buffer
	if _, err := Write(ctx, &out, testKey(2), d.Tensors, WriteOptions{Compression: d.Info.Header.Compression, Flags: d.Info.Header.Flags, Metadata: d.Info.Metadata}); err != nil {
		t.Fatalf("re-encoding a verified file: %v", err)
	}
	// (Its size may differ: the ratio is the input's, not the tensors'.)
	noRatio := fuzzLimits
	noRatio.MaxRatio = 0
	if _, err := Read(ctx, &out, noRatio); err != nil {
		t.Fatalf("re-encoded file does not read: %v", err)
	}
}

// FuzzRead feeds arbitrary bytes to every reader: nothing may panic, hang or
// allocate past the limits, and the readers must agree.
func FuzzRead(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) { checkReaders(t, b) })
}

// FuzzReadResigned re-signs each input before reading it, so mutations get
// past the checksum and signature and exercise the entry and frame parsers.
func FuzzReadResigned(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < HeaderSize+TrailerSize {
			return
		}
		checkReaders(t, resign(b))
	})
}
