// Package deltabench measures the delta format's writer and readers against
// the bounds this machine sets: SHA3-256 throughput (the format hashes every
// byte once to verify and twice, in sequence, to sign) and memcpy. It backs
// `gym bench delta`; docs/delta-format.md records its figures.
package deltabench

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha3"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zooai/gym/internal/pyref"
	"github.com/zooai/gym/protocol/delta"
)

// Config says what to measure.
type Config struct {
	Bytes   int64  // decoded bytes of the delta
	Tensors int    // split into this many equal bf16 tensors
	Iters   int    // timed repetitions of each measurement; the best counts
	Python  bool   // also time the Python reference writer (LZ4)
	Dir     string // scratch directory; files are removed afterwards
	// VerifyCmd, when set, is run as VerifyCmd... FILE in a child process to
	// measure verify's peak resident memory (gym passes itself).
	VerifyCmd []string
	Progress  io.Writer // human progress lines; nil for none
}

// Codec is one compression's figures.
type Codec struct {
	Compression    string  `json:"compression"`
	FileBytes      int64   `json:"file_bytes"`
	PackMBps       float64 `json:"pack_sign_mb_s"`
	VerifyMBps     float64 `json:"verify_decode_mb_s"`
	VerifyOnlyMBps float64 `json:"verify_only_mb_s"`
	PackRatio      float64 `json:"pack_vs_two_pass_sha3"`
	VerifyRatio    float64 `json:"verify_vs_one_pass_sha3"`
	// VerifyParallelRatio compares with one of two SHA3 streams running at
	// once: the bound for computing both digests in parallel here.
	VerifyParallelRatio float64 `json:"verify_vs_parallel_sha3"`
	PeakRSSBytes        int64   `json:"verify_peak_rss_bytes,omitempty"`
}

// Result is what Run measured. MB are 10^6 bytes of decoded tensor data.
type Result struct {
	Bytes             int64   `json:"bytes"`
	Tensors           int     `json:"tensors"`
	LargestTensor     int64   `json:"largest_tensor_bytes"`
	CPUs              int     `json:"cpus"`
	SHA3MBps          float64 `json:"sha3_256_mb_s"`
	SHA3ParallelMBps  float64 `json:"sha3_256_two_streams_mb_s_each"`
	SHA256MBps        float64 `json:"sha256_mb_s"`
	MemcpyMBps        float64 `json:"memcpy_mb_s"`
	TwoPassBoundMBps  float64 `json:"pack_bound_mb_s"`
	Codecs            []Codec `json:"codecs"`
	BaselineRSSBytes  int64   `json:"verify_baseline_rss_bytes,omitempty"`
	PythonMBps        float64 `json:"python_reference_lz4_mb_s,omitempty"`
	PythonSkipped     string  `json:"python_skipped,omitempty"`
	GoVsPythonSpeedup float64 `json:"go_vs_python_pack_speedup,omitempty"`
}

// Tensors makes the benchmark's delta: n bf16 tensors of Gaussian values with
// σ = 1e-3, like a LoRA update, from a fixed seed.
func Tensors(total int64, n int) []delta.Tensor {
	per := total / int64(n) / 2 * 2
	rng := rand.New(rand.NewPCG(42, 7))
	out := make([]delta.Tensor, n)
	for i := range out {
		data := make([]byte, per)
		for j := 0; j < len(data); j += 2 {
			f := float32(rng.NormFloat64() * 1e-3)
			binary.LittleEndian.PutUint16(data[j:], uint16(math.Float32bits(f)>>16))
		}
		rows := uint64(per / 2 / 1024)
		shape := []uint64{rows, 1024}
		if rows*1024*2 != uint64(per) {
			shape = []uint64{uint64(per / 2)}
		}
		out[i] = delta.Tensor{Name: fmt.Sprintf("lora.layers.%d.q_proj.%s.weight", i/2, [2]string{"A", "B"}[i%2]), DType: delta.BF16, Shape: shape, Data: data}
	}
	return out
}

func mbps(bytes int64, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e6 }

// best runs f iters times and returns the shortest duration; setup, if not
// nil, runs untimed before each run.
func best(iters int, setup, f func() error) (time.Duration, error) {
	var ds []time.Duration
	for range max(iters, 1) {
		if setup != nil {
			if err := setup(); err != nil {
				return 0, err
			}
		}
		start := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	return slices.Min(ds), nil
}

// Run measures everything in cfg and returns the figures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	say := func(format string, a ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", a...)
		}
	}
	dir, err := os.MkdirTemp(cfg.Dir, "gym-bench-delta-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	say("generating %d bf16 tensors, %d MiB in all", cfg.Tensors, cfg.Bytes>>20)
	ts := Tensors(cfg.Bytes, cfg.Tensors)
	var total int64
	for _, t := range ts {
		total += int64(len(t.Data))
	}
	res := &Result{Bytes: total, Tensors: len(ts), LargestTensor: int64(len(ts[0].Data)), CPUs: runtime.GOMAXPROCS(0)}

	flat := make([]byte, 0, total)
	for _, t := range ts {
		flat = append(flat, t.Data...)
	}
	say("measuring the bounds: SHA3-256, SHA-256, memcpy (one core)")
	d, _ := best(cfg.Iters, nil, func() error { sha3.Sum256(flat); return nil })
	res.SHA3MBps = mbps(total, d)
	// Verification runs two SHA3 streams at once; on machines whose two
	// CPUs share a physical core, each runs far slower than alone.
	d, _ = best(cfg.Iters, nil, func() error {
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { sha3.Sum256(flat) })
		}
		wg.Wait()
		return nil
	})
	res.SHA3ParallelMBps = mbps(total, d)
	d, _ = best(cfg.Iters, nil, func() error { sha256.Sum256(flat); return nil })
	res.SHA256MBps = mbps(total, d)
	dst := make([]byte, len(flat))
	d, _ = best(cfg.Iters, nil, func() error { copy(dst, flat); return nil })
	res.MemcpyMBps = mbps(total, d)
	dst = nil
	res.TwoPassBoundMBps = res.SHA3MBps / 2

	key := benchKey()
	for _, c := range []delta.Compression{delta.LZ4, delta.Zstd, delta.None} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		say("%s: pack+sign, verify+decode, verify", c)
		path := filepath.Join(dir, c.String()+".delta")
		cr := Codec{Compression: c.String()}
		removeOld := func() error { // truncating in the timed part would time the file system
			if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
				return err
			}
			return nil
		}
		d, err := best(cfg.Iters, removeOld, func() error {
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			_, err = delta.Write(ctx, f, key, ts, delta.WriteOptions{Compression: c, Flags: delta.FlagLoRA})
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		cr.PackMBps = mbps(total, d)
		if err := syncFile(path); err != nil { // let writeback finish before timing reads
			return nil, err
		}
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		cr.FileBytes = st.Size()
		read := func(verifyOnly bool) func() error {
			return func() error {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				defer f.Close()
				if verifyOnly {
					_, err = delta.Verify(ctx, f, delta.Limits{})
					return err
				}
				var n int64
				_, err = delta.Stream(ctx, f, delta.Limits{}, func(u *delta.Unverified) error {
					n += int64(len(u.UnverifiedData()))
					return nil
				})
				if err == nil && n != total {
					err = fmt.Errorf("decoded %d bytes, want %d", n, total)
				}
				return err
			}
		}
		if d, err = best(cfg.Iters, nil, read(false)); err != nil {
			return nil, err
		}
		cr.VerifyMBps = mbps(total, d)
		if d, err = best(cfg.Iters, nil, read(true)); err != nil {
			return nil, err
		}
		cr.VerifyOnlyMBps = mbps(total, d)
		cr.PackRatio = cr.PackMBps / res.TwoPassBoundMBps
		cr.VerifyRatio = cr.VerifyMBps / res.SHA3MBps
		cr.VerifyParallelRatio = cr.VerifyMBps / res.SHA3ParallelMBps
		if len(cfg.VerifyCmd) > 0 {
			if cr.PeakRSSBytes, err = childRSS(ctx, cfg.VerifyCmd, path); err != nil {
				return nil, err
			}
		}
		res.Codecs = append(res.Codecs, cr)
	}
	if len(cfg.VerifyCmd) > 0 {
		// The same command on an empty delta: the runtime's own footprint.
		path := filepath.Join(dir, "empty.delta")
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		_, err = delta.Write(ctx, f, key, nil, delta.WriteOptions{})
		f.Close()
		if err != nil {
			return nil, err
		}
		if res.BaselineRSSBytes, err = childRSS(ctx, cfg.VerifyCmd, path); err != nil {
			return nil, err
		}
	}
	if cfg.Python {
		say("Python reference writer (LZ4, the seed's listing); this takes a while")
		mb, err := pythonWriter(ctx, dir, ts)
		switch {
		case err != nil:
			res.PythonSkipped = err.Error()
		default:
			res.PythonMBps = mb
			res.GoVsPythonSpeedup = res.Codecs[0].PackMBps / mb
		}
	} else {
		res.PythonSkipped = "not requested"
	}
	return res, nil
}

func benchKey() ed25519.PrivateKey {
	seed := sha3.Sum256([]byte("gym bench delta"))
	return ed25519.NewKeyFromSeed(seed[:])
}

// childRSS runs cmd FILE, which must print its own peak resident set size
// in bytes (see PeakRSS). The child's rusage cannot be used: Linux charges a
// child started with vfork, as Go does, the parent's peak.
func childRSS(ctx context.Context, cmd []string, file string) (int64, error) {
	out, err := exec.CommandContext(ctx, cmd[0], append(cmd[1:], file)...).Output()
	if err != nil {
		return 0, fmt.Errorf("%v: %w", cmd, err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// PeakRSS returns this process's peak resident set size (VmHWM) in bytes.
func PeakRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}

func pythonWriter(ctx context.Context, dir string, ts []delta.Tensor) (float64, error) {
	if err := pyref.Available(); err != nil {
		return 0, err
	}
	var pts []pyref.Tensor
	for _, t := range ts {
		pts = append(pts, pyref.Tensor{Name: t.Name, DType: int(t.DType), Shape: t.Shape, Data: t.Data})
	}
	seed := sha3.Sum256([]byte("gym bench delta"))
	sp, err := pyref.WriteSpec(dir, seed[:], int(delta.LZ4), int(delta.FlagLoRA), pts)
	if err != nil {
		return 0, err
	}
	out, err := pyref.Run(ctx, pyref.Writer, "--spec", sp, "--out", filepath.Join(dir, "python.delta"), "--time")
	if err != nil {
		return 0, err
	}
	var r struct {
		Seconds float64 `json:"seconds"`
		Bytes   int64   `json:"bytes"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("python writer printed %q: %v", out, err)
	}
	// Its file must verify here too, or the comparison means nothing.
	f, err := os.Open(filepath.Join(dir, "python.delta"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := delta.Verify(ctx, f, delta.Limits{}); err != nil {
		return 0, fmt.Errorf("the Python writer's file does not verify: %w", err)
	}
	return float64(r.Bytes) / r.Seconds / 1e6, nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
