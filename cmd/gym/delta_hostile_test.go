package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha3"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/safetensors"
	"github.com/zooai/gym/protocol/delta"
)

// rawEntry is a delta entry with its stored data as given.
type rawEntry struct {
	name  string
	dtype delta.DType
	shape []uint64
	data  []byte
}

// craft lays out a delta file by hand: header (checksum filled in),
// entries, then either a signature by key or, when key is nil, the trailer
// given.
func craft(c delta.Compression, entries []rawEntry, key ed25519.PrivateKey, trailer []byte) []byte {
	var payload []byte
	for _, e := range entries {
		payload = binary.LittleEndian.AppendUint32(payload, uint32(len(e.name)))
		payload = append(payload, e.name...)
		payload = append(payload, byte(e.dtype), byte(len(e.shape)))
		for _, d := range e.shape {
			payload = binary.LittleEndian.AppendUint64(payload, d)
		}
		payload = append(payload, e.data...)
	}
	sum := sha3.Sum256(payload)
	file := append([]byte("DELTA"), delta.Version, byte(c), 0)
	file = append(file, sum[:delta.ChecksumSize]...)
	file = append(file, payload...)
	if key == nil {
		return append(file, trailer...)
	}
	digest := sha3.Sum256(file)
	file = append(file, ed25519.Sign(key, digest[:])...)
	return append(file, key.Public().(ed25519.PublicKey)...)
}

// zstdZeros hand-writes a Zstandard frame of n zero bytes as RLE blocks,
// four bytes per 128 KiB: a compression bomb's building block. A
// single-segment frame's window is n itself; otherwise it is 8 MiB.
func zstdZeros(n uint64, single bool) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	if single {
		b = append(b, 3<<6|1<<5)
	} else {
		b = append(b, 3<<6, (23-10)<<3)
	}
	b = binary.LittleEndian.AppendUint64(b, n)
	if n == 0 {
		return append(b, 1, 0, 0) // one empty raw block, the last
	}
	for n > 0 {
		k := min(n, 128<<10)
		n -= k
		h := uint32(1)<<1 | uint32(k)<<3
		if n == 0 {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return b
}

const identityHex = "0100000000000000000000000000000000000000000000000000000000000000"

// The forgery crypto/ed25519 alone accepts: content nobody signed, with the
// identity as the trailer key, R = identity and S = 0. gym delta verify
// --pubkey 0100…00 used to exit 0 for it.
func TestDeltaForgedSmallOrderFile(t *testing.T) {
	dir := t.TempDir()
	identity, _ := hex.DecodeString(identityHex)
	trailer := append(append(bytes.Clone(identity), make([]byte, 32)...), identity...)
	forged := filepath.Join(dir, "forged.delta")
	os.WriteFile(forged, craft(delta.None, []rawEntry{{"lora.A", delta.FP32, []uint64{2}, make([]byte, 8)}}, nil, trailer), 0o644)

	if r := gym(t, "delta", "verify", "--pubkey", identityHex, forged); r.code == 0 {
		t.Fatalf("verify --pubkey %s accepted a forged file:\n%s", identityHex, r.stdout)
	}
	r := gym(t, "delta", "verify", forged)
	if r.code != 1 || !strings.Contains(r.stdout, "small order") {
		t.Fatalf("verify of the forged file: exit %d, %q", r.code, r.stdout)
	}
	out := filepath.Join(dir, "out.safetensors")
	if r := gym(t, "delta", "unpack", forged, out); r.code == 0 || !strings.Contains(r.stderr, "small order") {
		t.Fatalf("unpack of the forged file: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("unpack left a file behind")
	}
	var ir inspectOut
	if err := json.Unmarshal([]byte(mustGym(t, "delta", "inspect", "--json", forged)), &ir); err != nil {
		t.Fatal(err)
	}
	if ir.Valid {
		t.Fatal("inspect calls the forged file valid")
	}
}

// --pubkey refuses keys of the wrong size and keys nothing can be proven
// under, with a reason, before reading any file.
func TestDeltaPubkeyFlagRefuses(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	pub := strings.TrimSpace(mustGym(t, "keygen", "--out", key))
	in := filepath.Join(dir, "in.safetensors")
	writeAdapter(t, in, []safetensors.Tensor{{Name: "w", DType: "F32", Shape: []uint64{4}, Data: seq(16, 1)}})
	good := filepath.Join(dir, "good.delta")
	mustGym(t, "delta", "pack", "--key", key, in, good)
	mustGym(t, "delta", "verify", "--pubkey", pub, good)
	for _, c := range []struct{ name, key, mention string }{
		{"31 bytes", pub[:62], "31 bytes"},
		{"33 bytes", pub + "00", "33 bytes"},
		{"identity", identityHex, "small order"},
		{"order 2", "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", "small order"},
		{"order 8", "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", "small order"},
		{"non-canonical", "ee" + strings.Repeat("ff", 30) + "7f", "canonical"},
	} {
		for _, sub := range []string{"verify", "unpack"} {
			args := []string{"delta", sub, "--pubkey", c.key, good}
			if sub == "unpack" {
				args = append(args, filepath.Join(dir, "out.safetensors"))
			}
			if r := gym(t, args...); r.code != 2 || !strings.Contains(r.stderr, c.mention) {
				t.Errorf("%s --pubkey %s: exit %d, stderr %q; want 2 mentioning %q", sub, c.name, r.code, r.stderr, c.mention)
			}
		}
	}
}

// peakRSS runs gym and returns its exit code, peak resident memory and
// wall time.
//
// The peak is wait4's ru_maxrss of the gym process, which Linux records as
// the larger of the process's own high-water mark and that of the memory
// it replaced at exec: with Go's vfork-style spawn, the parent's. So gym is
// not started from this (large) test process but from a fresh copy of the
// test binary (spawnMain), a few MiB, which reports gym's rusage back.
func peakRSS(t *testing.T, args ...string) (code int, rssMiB float64, took time.Duration, stderr string) {
	t.Helper()
	argv, _ := json.Marshal(append([]string{gymBin}, args...))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "GYM_TEST_SPAWN="+string(argv))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("spawner: %v\n%s", err, errb.String())
	}
	var rep spawnReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("spawner said %q: %v", out.String(), err)
	}
	return rep.Code, float64(rep.MaxRSSKiB) / 1024, time.Duration(rep.Nanos), rep.Stderr
}

type spawnReport struct {
	Code      int
	MaxRSSKiB int64
	Nanos     int64
	Stderr    string
}

// spawnMain is the spawner's side of peakRSS: with GYM_TEST_SPAWN set, the
// test binary runs that argv, prints a spawnReport and exits.
func spawnMain() bool {
	spec := os.Getenv("GYM_TEST_SPAWN")
	if spec == "" {
		return false
	}
	var argv []string
	if err := json.Unmarshal([]byte(spec), &argv); err != nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "GYM_TEST_SPAWN: want a JSON argv")
		os.Exit(2)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	err := cmd.Run()
	rep := spawnReport{Nanos: int64(time.Since(start)), Stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		rep.Code = ee.ExitCode()
	} else if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rep.MaxRSSKiB = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	json.NewEncoder(os.Stdout).Encode(rep)
	os.Exit(0)
	return true
}

// zeroBomb is n Zstandard frames of size zero bytes each, as int8 tensors.
func zeroBomb(n int, size uint64, single bool) []rawEntry {
	var es []rawEntry
	for i := range n {
		es = append(es, rawEntry{"layer." + string(rune('a'+i)) + ".lora_B.weight", delta.Int8, []uint64{size}, zstdZeros(size, single)})
	}
	return es
}

// The bomb of issue 44: a 98 KB file whose 24 tensors declare 3 GiB, which
// its frames really decode to (Zstandard RLE blocks, 4 bytes per 128 KiB of
// zeros). Within --max-total-bytes, unpack wrote all 3 GiB to disk. Now
// unpack, verify and inspect refuse it by its ratio (32 768 decoded bytes per
// byte of file, over --max-ratio 64) before decoding or writing anything,
// and say the numbers and the flag; --max-ratio lets a genuine file through.
func TestDeltaRatioRefusesBomb(t *testing.T) {
	dir := t.TempDir()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	bomb := filepath.Join(dir, "bomb.delta")
	file := craft(delta.Zstd, zeroBomb(24, 128<<20, false), key, nil)
	if err := os.WriteFile(bomb, file, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("bomb: %d bytes declaring %d", len(file), 3<<30)
	out := filepath.Join(dir, "out.safetensors")
	r := gym(t, "delta", "unpack", bomb, out)
	for _, want := range []string{"--max-ratio", fmt.Sprint(3 << 30), fmt.Sprintf("%d-byte file", len(file)), "limit is 64 per byte"} {
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("unpack of the bomb: exit %d, stderr %q; want a refusal mentioning %q", r.code, r.stderr, want)
		}
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("unpack left files behind: %v", names)
	}
	if r := gym(t, "delta", "verify", bomb); r.code != 1 || !strings.Contains(r.stdout, "--max-ratio") {
		t.Errorf("verify of the bomb: exit %d, %q", r.code, r.stdout)
	}
	var ir inspectOut
	if err := json.Unmarshal([]byte(mustGym(t, "delta", "inspect", "--json", bomb)), &ir); err != nil {
		t.Fatal(err)
	}
	if ir.Valid || ir.Error == nil || !strings.Contains(*ir.Error, "--max-ratio") || len(ir.Tensors) != 24 {
		t.Errorf("inspect of the bomb: valid %v, error %v, %d tensors", ir.Valid, ir.Error, len(ir.Tensors))
	}

	// A small one, let through by the flag, unpacks to what it declares.
	small := filepath.Join(dir, "small.delta")
	if err := os.WriteFile(small, craft(delta.Zstd, zeroBomb(1, 4<<20, false), key, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := gym(t, "delta", "unpack", small, out); r.code == 0 {
		t.Fatal("unpacked a 4 MiB bomb under the default ratio")
	}
	mustGym(t, "delta", "unpack", "--max-ratio", "0", small, out)
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	sf, err := safetensors.Parse(f, st.Size(), safetensors.Limits{})
	f.Close()
	if err != nil || len(sf.Tensors) != 1 || st.Size()-sf.DataOffset != 4<<20 {
		t.Fatalf("output: %v, %d bytes", err, st.Size())
	}
}

// The compression bomb of the review: a 98 KB file whose tensors are 3 GiB
// of zeros made unpack hold them all (5 GB for 63 s). unpack now streams one
// tensor at a time: the same file, let through with --max-ratio 0, unpacks
// under 100 MiB, and files over the limits are refused before anything is
// decoded.
func TestDeltaUnpackBombBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 3 GiB")
	}
	dir := t.TempDir()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	write := func(name string, entries []rawEntry) string {
		path := filepath.Join(dir, name)
		file := craft(delta.Zstd, entries, key, nil)
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", name, len(file))
		return path
	}
	zeros := zeroBomb
	const limit = 100 // MiB

	// Within the default limits but the ratio: 24 tensors of 128 MiB, 3 GiB
	// in 98 KB.
	bomb := write("bomb.delta", zeros(24, 128<<20, false))
	out := filepath.Join(dir, "out.safetensors")
	code, rss, took, stderr := peakRSS(t, "delta", "unpack", "--max-ratio", "0", bomb, out)
	t.Logf("unpack of the 3 GiB bomb: exit %d, peak RSS %.1f MiB, %v", code, rss, took)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if rss > limit {
		t.Errorf("peak RSS %.1f MiB, want under %d MiB", rss, limit)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	sf, err := safetensors.Parse(f, st.Size(), safetensors.Limits{})
	f.Close()
	if err != nil || len(sf.Tensors) != 24 || st.Size()-sf.DataOffset != 3<<30 {
		t.Fatalf("output: %v, %d bytes", err, st.Size())
	}
	os.Remove(out)

	// Over the limits: refused while skimming, before any decoding.
	for _, c := range []struct {
		name, mention string
		entries       []rawEntry
	}{
		{"over the ratio", "--max-ratio", zeros(24, 128<<20, false)},                                                             // 3 GiB in 98 KB
		{"over the total", "limit", zeros(6, 1<<30, false)},                                                                      // 6 GiB in 192 KB
		{"over a tensor", "per-tensor limit", []rawEntry{{"big", delta.Int8, []uint64{2 << 30}, zstdZeros(2<<30, false)}}},       // 2 GiB
		{"1 GiB window", "window", []rawEntry{{"wide", delta.Int8, []uint64{1 << 30}, zstdZeros(1<<30, true)}}},                  // single segment
		{"empty, huge dims", "bad shape", []rawEntry{{"e", delta.FP32, []uint64{0, 1<<64 - 1, 1<<64 - 1}, zstdZeros(0, false)}}}, // strides overflow
		{"hostile name", "bad tensor name", []rawEntry{{"../../etc/passwd", delta.Int8, []uint64{1 << 20}, zstdZeros(1<<20, false)}}},
	} {
		path := write(strings.ReplaceAll(c.name, " ", "-")+".delta", c.entries)
		code, rss, took, stderr := peakRSS(t, "delta", "unpack", path, out)
		t.Logf("%s: exit %d, peak RSS %.1f MiB, %v", c.name, code, rss, took)
		if code == 0 || !strings.Contains(stderr, c.mention) {
			t.Errorf("%s: exit %d, stderr %q; want a refusal mentioning %q", c.name, code, stderr, c.mention)
		}
		if rss > limit || took > 5*time.Second {
			t.Errorf("%s: peak RSS %.1f MiB in %v, want under %d MiB and fast", c.name, rss, took, limit)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: unpack left a file behind", c.name)
		}
	}
}

// gym eval --checkpoint X.delta read the file with delta.Read under a 1 GiB
// total: a 16 KB file declaring 512 MiB of zeros made it allocate them.
// It now refuses the file by its ratio before allocating.
func TestEvalRefusesDeltaBomb(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	raw := craft(delta.Zstd, zeroBomb(1, 512<<20, false), key, nil)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err := evalFromDelta(context.Background(), "bomb.delta", raw, llama.Config{})
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, delta.ErrRatio) {
		t.Fatalf("got %v, want a ratio refusal", err)
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 64<<20 {
		t.Errorf("allocated %d MiB to refuse a %d-byte file", alloc>>20, len(raw))
	}
}
