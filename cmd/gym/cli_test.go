package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/modelbench"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/safetensors"
)

// gymBin is the gym binary built once for these tests: the CLI contract is
// tested across a real process boundary (exit statuses, stdout, files).
var gymBin string

func TestMain(m *testing.M) {
	if netnsHelperMain() || spawnMain() {
		return
	}
	dir, err := os.MkdirTemp("", "gym-cli-test-")
	if err != nil {
		panic(err)
	}
	gymBin = filepath.Join(dir, "gym")
	if out, err := exec.Command("go", "build", "-o", gymBin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

func gym(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(gymBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustGym(t *testing.T, args ...string) string {
	t.Helper()
	r := gym(t, args...)
	if r.code != 0 {
		t.Fatalf("gym %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}\n$`)

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	out := mustGym(t, "keygen", "--out", key)
	if !hex64.MatchString(out) {
		t.Fatalf("keygen printed %q, want 64 hex characters", out)
	}
	st, err := os.Stat(key)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st.Mode(), err)
	}
	pem, _ := os.ReadFile(key)
	if !strings.HasPrefix(string(pem), "-----BEGIN PRIVATE KEY-----") {
		t.Fatalf("not PKCS#8 PEM: %s", pem)
	}
	if r := gym(t, "keygen", "--out", key); r.code == 0 {
		t.Fatal("keygen replaced an existing key without --force")
	}
	if r := gym(t, "keygen"); r.code != 2 {
		t.Fatalf("keygen without --out: exit %d, want 2", r.code)
	}
	if _, err := exec.LookPath("openssl"); err == nil {
		if out, err := exec.Command("openssl", "pkey", "-in", key, "-noout").CombinedOutput(); err != nil {
			t.Fatalf("openssl cannot read our key: %v %s", err, out)
		}
	}
}

// writeAdapter makes a safetensors file with the given tensors.
func writeAdapter(t *testing.T, path string, ts []safetensors.Tensor) {
	t.Helper()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func seq(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)*31 + seed
	}
	return b
}

type inspectOut struct {
	Version     *int            `json:"version"`
	Compression *string         `json:"compression"`
	Flags       *int            `json:"flags"`
	Checksum    *string         `json:"checksum"`
	Pubkey      *string         `json:"pubkey"`
	Valid       bool            `json:"valid"`
	Error       *string         `json:"error"`
	Tensors     []inspectTensor `json:"tensors"`
	Metadata    map[string]any  `json:"metadata"`
}

func TestPackInspectVerifyUnpack(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	pub := strings.TrimSpace(mustGym(t, "keygen", "--out", key))
	in := filepath.Join(dir, "in.safetensors")
	// Written in this order; data offsets order is b, a, c (safetensors.Write
	// lays data out in the order given).
	ts := []safetensors.Tensor{
		{Name: "lora.b.B.weight", DType: "BF16", Shape: []uint64{4, 8}, Data: seq(64, 1)},
		{Name: "lora.a.A.weight", DType: "F32", Shape: []uint64{3}, Data: seq(12, 2)},
		{Name: "scale", DType: "F16", Shape: []uint64{}, Data: seq(2, 3)},
		{Name: "q", DType: "I8", Shape: []uint64{5}, Data: seq(5, 4)},
	}
	writeAdapter(t, in, ts)
	for _, comp := range []string{"lz4", "zstd", "none"} {
		t.Run(comp, func(t *testing.T) {
			out := filepath.Join(dir, comp+".delta")
			mustGym(t, "delta", "pack", "--key", key, "--compression", comp, "--kind", "full", "--meta", `{"job":"j1","epoch":3}`, in, out)
			var r inspectOut
			if err := json.Unmarshal([]byte(mustGym(t, "delta", "inspect", "--json", out)), &r); err != nil {
				t.Fatal(err)
			}
			if !r.Valid || r.Error != nil || *r.Version != 1 || *r.Compression != comp || *r.Flags != 2 || *r.Pubkey != pub || len(*r.Checksum) != 32 {
				t.Fatalf("inspect: %+v", r)
			}
			if r.Metadata["job"] != "j1" || r.Metadata["epoch"] != 3.0 {
				t.Fatalf("metadata %v", r.Metadata)
			}
			if len(r.Tensors) != len(ts) {
				t.Fatalf("tensors %+v", r.Tensors)
			}
			wantDT := map[string]string{"BF16": "bf16", "F32": "fp32", "F16": "fp16", "I8": "int8"}
			for i, tn := range r.Tensors {
				if tn.Name != ts[i].Name || tn.DType != wantDT[ts[i].DType] || len(tn.Shape) != len(ts[i].Shape) || tn.StoredBytes <= 0 {
					t.Fatalf("tensor %d: %+v, want %s", i, tn, ts[i].Name)
				}
			}
			mustGym(t, "delta", "verify", out)
			mustGym(t, "delta", "verify", "--pubkey", pub, out)

			back := filepath.Join(dir, comp+".safetensors")
			mustGym(t, "delta", "unpack", "--pubkey", pub, out, back)
			b, _ := os.ReadFile(back)
			f, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)), safetensors.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if f.Metadata["job"] != "j1" || f.Metadata["epoch"] != "3" {
				t.Fatalf("unpacked metadata %v", f.Metadata)
			}
			for i, info := range f.Tensors {
				data, _ := f.ReadTensor(bytes.NewReader(b), info)
				if info.Name != ts[i].Name || info.DType != ts[i].DType || !bytes.Equal(data, ts[i].Data) {
					t.Fatalf("unpacked tensor %d differs: %+v", i, info)
				}
			}
		})
	}
}

func TestVerifyReportsBadFiles(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	mustGym(t, "keygen", "--out", key)
	other := strings.TrimSpace(mustGym(t, "keygen", "--out", filepath.Join(dir, "other.pem")))
	in := filepath.Join(dir, "in.safetensors")
	writeAdapter(t, in, []safetensors.Tensor{{Name: "w", DType: "F32", Shape: []uint64{64}, Data: seq(256, 9)}})
	good := filepath.Join(dir, "good.delta")
	mustGym(t, "delta", "pack", "--key", key, "--compression", "none", in, good)
	orig, _ := os.ReadFile(good)
	flipped := filepath.Join(dir, "flipped.delta")
	bad := append([]byte(nil), orig...)
	bad[60] ^= 1
	os.WriteFile(flipped, bad, 0o644)
	short := filepath.Join(dir, "short.delta")
	os.WriteFile(short, orig[:len(orig)-10], 0o644)
	notDelta := filepath.Join(dir, "x.txt")
	os.WriteFile(notDelta, []byte("hello, this is not a delta file at all, but long enough to have a header and more"), 0o644)

	r := gym(t, "delta", "verify", good, flipped, short, notDelta, filepath.Join(dir, "missing.delta"))
	if r.code != 1 {
		t.Fatalf("exit %d, want 1", r.code)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("want one line per bad file, got:\n%s", r.stdout)
	}
	for i, want := range []string{flipped + ": delta: checksum mismatch", short + ": ", notDelta + ": delta: not a delta file", filepath.Join(dir, "missing.delta") + ": "} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], want)
		}
	}
	if r := gym(t, "delta", "verify", "--pubkey", other, good); r.code != 1 || !strings.Contains(r.stdout, "signed by") {
		t.Fatalf("wrong signer accepted: %+v", r)
	}
	if r := gym(t, "delta", "verify", "--pubkey", "abcd", good); r.code != 2 {
		t.Fatalf("short --pubkey: exit %d, want 2 (%s)", r.code, r.stderr)
	}
	// inspect still reports an invalid file, with valid false and the reason.
	var ir inspectOut
	if err := json.Unmarshal([]byte(mustGym(t, "delta", "inspect", "--json", flipped)), &ir); err != nil {
		t.Fatal(err)
	}
	if ir.Valid || ir.Error == nil || !strings.Contains(*ir.Error, "checksum") || ir.Pubkey == nil {
		t.Fatalf("inspect of a bad file: %+v", ir)
	}
	if err := json.Unmarshal([]byte(mustGym(t, "delta", "inspect", "--json", notDelta)), &ir); err != nil {
		t.Fatal(err)
	}
	if ir.Valid || ir.Version != nil || ir.Compression != nil {
		t.Fatalf("inspect of a non-delta: %+v", ir)
	}
	// unpack refuses before writing anything.
	out := filepath.Join(dir, "out.safetensors")
	if r := gym(t, "delta", "unpack", flipped, out); r.code == 0 {
		t.Fatal("unpacked a bad file")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("unpack left a file behind")
	}
}

func TestPackRefuses(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	mustGym(t, "keygen", "--out", key)
	in := filepath.Join(dir, "in.safetensors")
	writeAdapter(t, in, []safetensors.Tensor{{Name: "w", DType: "F64", Shape: []uint64{2}, Data: seq(16, 1)}})
	out := filepath.Join(dir, "o.delta")
	r := gym(t, "delta", "pack", "--key", key, in, out)
	if r.code != 1 || !strings.Contains(r.stderr, `"w" has dtype F64`) {
		t.Fatalf("F64 input: %+v", r)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("pack left a file behind")
	}
	writeAdapter(t, in, []safetensors.Tensor{{Name: "w", DType: "F32", Shape: []uint64{2}, Data: seq(8, 1)}})
	for _, args := range [][]string{
		{"delta", "pack", in, out}, // no --key
		{"delta", "pack", "--key", key, "--compression", "gzip", in, out},
		{"delta", "pack", "--key", key, "--kind", "half", in, out},
		{"delta", "pack", "--key", key, "--meta", "[1,2]", in, out},
		{"delta", "pack", "--key", key, in},
	} {
		if r := gym(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
}

// A key made by OpenSSL signs deltas that verify under its public key.
func TestOpenSSLKey(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "ossl.pem")
	if out, err := exec.Command("openssl", "genpkey", "-algorithm", "ed25519", "-out", key).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	der, err := exec.Command("openssl", "pkey", "-in", key, "-pubout", "-outform", "DER").Output()
	if err != nil {
		t.Fatal(err)
	}
	pub := hex.EncodeToString(der[len(der)-32:])
	in := filepath.Join(dir, "in.safetensors")
	writeAdapter(t, in, []safetensors.Tensor{{Name: "w", DType: "BF16", Shape: []uint64{8}, Data: seq(16, 5)}})
	out := filepath.Join(dir, "o.delta")
	mustGym(t, "delta", "pack", "--key", key, in, out)
	mustGym(t, "delta", "verify", "--pubkey", pub, out)
}

func TestHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{{}, {"delta"}, {"delta", "pack"}, {"delta", "unpack"}, {"delta", "inspect"}, {"delta", "verify"}, {"keygen"}, {"bench", "delta"}, {"bench", "model"}, {"bench", "backend"}, {"demo"}} {
		out := mustGym(t, append(args, "--help")...)
		if !strings.Contains(out, "Usage:") {
			t.Errorf("gym %v --help: no usage\n%s", args, out)
		}
	}
	if r := gym(t, "no-such-command"); r.code == 0 {
		t.Error("unknown command succeeded")
	}
}

func TestDemo(t *testing.T) {
	out := mustGym(t, "demo", "--dir", t.TempDir())
	for _, want := range []string{"valid (exit status 0)", "checksum mismatch", "byte-identical"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// The benchmark runs end to end on a small delta (a test of the command, not
// a measurement).
func TestBenchDeltaSmall(t *testing.T) {
	var r struct {
		Codecs []struct {
			Compression string  `json:"compression"`
			PackMBps    float64 `json:"pack_sign_mb_s"`
			PeakRSS     int64   `json:"verify_peak_rss_bytes"`
		} `json:"codecs"`
		SHA3 float64 `json:"sha3_256_mb_s"`
	}
	out := mustGym(t, "bench", "delta", "--mib", "2", "--tensors", "4", "--iters", "1", "--json", "--dir", t.TempDir())
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(r.Codecs) != 3 || r.SHA3 <= 0 {
		t.Fatalf("%s", out)
	}
	for _, c := range r.Codecs {
		if c.PackMBps <= 0 || c.PeakRSS <= 0 {
			t.Fatalf("%+v", c)
		}
	}
}

// bench model runs end to end, Go side only, on a tiny model (a test of
// the command and its child process, not a measurement); bad flags are
// usage errors.
func TestBenchModelSmall(t *testing.T) {
	w, err := modelbench.RandomWeights(modelbench.TinyShape(), 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := llama.Save(dir, w); err != nil {
		t.Fatal(err)
	}
	var r modelbench.Result
	out := mustGym(t, "bench", "model", "--model", dir, "--baseline", "none", "--threads", "2", "--seq", "8", "--iters", "1", "--json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(r.Models) != 1 || r.Models[0].Go.PrefillTPS <= 0 || r.Models[0].Go.TrainTPS <= 0 || r.Models[0].Go.PeakRSSBytes <= 0 || r.Models[0].Torch != nil {
		t.Fatalf("%s", out)
	}
	for _, args := range [][]string{{"--threads", "0"}, {"--seq", "1"}, {"--baseline", "jax"}, {"--iters", "0"}} {
		if res := gym(t, append([]string{"bench", "model", "--model", dir}, args...)...); res.code == 0 {
			t.Errorf("bench model %v succeeded", args)
		}
	}
}

// bench load runs end to end on a tiny BF16 model (a test of the command
// and its child processes; internal/modelbench checks the figures); bad
// flags are usage errors.
func TestBenchLoadSmall(t *testing.T) {
	w, err := modelbench.RandomWeights(modelbench.TinyShape(), 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := llama.SaveAs(dir, w, llama.BF16); err != nil {
		t.Fatal(err)
	}
	var r modelbench.LoadResult
	out := mustGym(t, "bench", "load", "--model", dir, "--threads", "2", "--seq", "8", "--json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Float32.Mode != modelbench.ModeFloat32 || r.Kept.Mode != modelbench.ModeKept || r.FileBytes <= 0 ||
		r.Kept.WeightsBytes >= r.Float32.WeightsBytes || r.Kept.PeakRSSBytes <= 0 || r.Float32.PeakRSSBytes <= 0 {
		t.Fatalf("%s", out)
	}
	for _, args := range [][]string{{"--threads", "0"}, {"--seq", "1"}} {
		if res := gym(t, append([]string{"bench", "load", "--model", dir}, args...)...); res.code == 0 {
			t.Errorf("bench load %v succeeded", args)
		}
	}
}
