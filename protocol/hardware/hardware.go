// Package hardware describes what a node reports it has (its accelerators
// with their memory, the backends and floating-point types it trains in),
// estimates the memory a job needs on a given backend, dtype and
// quantisation, and says whether a node meets a job, with the numbers.
//
// The node signs its report (nodeauth.Register) and hanzod records it in
// its event log; the estimate is a pure function of the base's shape
// (config.json's dimensions) and the job's settings, so hanzod decides with
// it before anything is loaded, and a worker refuses with the same figures.
package hardware

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// CPU is the accelerator name of host memory: a node without a GPU
// reports one accelerator named cpu whose memory is its RAM, and every
// node lists it (last) for the backends that train on the host (go).
const CPU = "cpu"

// Backends and floating-point types a node may report (the backend
// package's names; NF4 says the node loads 4-bit bases, use_4bit).
const (
	BackendGo    = "go"
	BackendTorch = "torch"

	Float32  = "float32"
	BFloat16 = "bfloat16"
	Float16  = "float16"
	NF4      = "nf4"
)

// Accelerator is one device of a node as the node reports it.
type Accelerator struct {
	// Name is the device's name ("NVIDIA H100 80GB HBM3"), or CPU for
	// host memory.
	Name string `json:"name"`
	// TotalMiB and FreeMiB are its memory and what was free when the node
	// registered (MemTotal and MemAvailable for the cpu entry).
	TotalMiB uint64 `json:"total_mib"`
	FreeMiB  uint64 `json:"free_mib"`
	// Compute is the CUDA compute capability, "major.minor" ("9.0"); empty
	// for the cpu entry or where unknown.
	Compute string `json:"compute,omitempty"`
}

// Available is the memory a job may use: FreeMiB when the node reported
// it, else TotalMiB.
func (a Accelerator) Available() uint64 {
	if a.FreeMiB > 0 {
		return a.FreeMiB
	}
	return a.TotalMiB
}

func (a Accelerator) String() string {
	s := fmt.Sprintf("%s (%d MiB, %d free", a.Name, a.TotalMiB, a.FreeMiB)
	if a.Compute != "" {
		s += ", compute " + a.Compute
	}
	return s + ")"
}

// Report is a node's hardware as it registers it. The zero Report is a
// node that registered before nodes reported hardware: it is judged by its
// gpu model and VRAM alone (Legacy).
type Report struct {
	Accelerators []Accelerator `json:"accelerators,omitempty"`
	// Backends are the training backends the node runs (go, torch).
	Backends []string `json:"backends,omitempty"`
	// DTypes are the floating-point types it trains in (float32,
	// bfloat16, float16) and nf4 when it loads 4-bit bases.
	DTypes []string `json:"dtypes,omitempty"`
}

// Empty reports whether r says nothing (a node registered without it).
func (r Report) Empty() bool {
	return len(r.Accelerators) == 0 && len(r.Backends) == 0 && len(r.DTypes) == 0
}

// Bounds on a report.
const (
	MaxAccelerators = 64
	MaxName         = 128
	MaxMiB          = 1 << 24 // 16 TiB
)

// ErrReport reports a malformed hardware report.
var ErrReport = errors.New("hardware: invalid report")

var (
	knownBackends = []string{BackendGo, BackendTorch}
	knownDTypes   = []string{Float32, BFloat16, Float16, NF4}
)

// Validate checks r's bounds: at most MaxAccelerators accelerators with a
// printable name of 1..MaxName bytes, total memory 1..MaxMiB MiB, free at
// most total, compute capability "major.minor" (none for cpu); backends and
// dtypes known, each once. An empty report is valid.
func (r Report) Validate() error {
	if len(r.Accelerators) > MaxAccelerators {
		return fmt.Errorf("%w: %d accelerators, at most %d", ErrReport, len(r.Accelerators), MaxAccelerators)
	}
	for i, a := range r.Accelerators {
		switch {
		case len(a.Name) == 0 || len(a.Name) > MaxName || !printable(a.Name):
			return fmt.Errorf("%w: accelerator %d: name must be 1..%d printable bytes", ErrReport, i, MaxName)
		case a.TotalMiB == 0 || a.TotalMiB > MaxMiB:
			return fmt.Errorf("%w: accelerator %d (%s): total memory %d MiB outside 1..%d", ErrReport, i, a.Name, a.TotalMiB, MaxMiB)
		case a.FreeMiB > a.TotalMiB:
			return fmt.Errorf("%w: accelerator %d (%s): free memory %d MiB above its total %d", ErrReport, i, a.Name, a.FreeMiB, a.TotalMiB)
		case a.Compute != "" && (a.Name == CPU || !validCompute(a.Compute)):
			return fmt.Errorf("%w: accelerator %d (%s): compute capability %q (major.minor, none for cpu)", ErrReport, i, a.Name, a.Compute)
		}
	}
	if err := checkSet("backend", r.Backends, knownBackends); err != nil {
		return err
	}
	return checkSet("dtype", r.DTypes, knownDTypes)
}

func checkSet(what string, got, known []string) error {
	if len(got) > len(known) {
		return fmt.Errorf("%w: %d %ss, at most %d", ErrReport, len(got), what, len(known))
	}
	for i, v := range got {
		if !slices.Contains(known, v) || slices.Contains(got[:i], v) {
			return fmt.Errorf("%w: %s %q (want each of %s at most once)", ErrReport, what, v, strings.Join(known, ", "))
		}
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return false
		}
	}
	return true
}

func validCompute(s string) bool {
	maj, min, ok := strings.Cut(s, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	return ok && err1 == nil && err2 == nil && a >= 0 && a < 100 && b >= 0 && b < 100 &&
		strconv.Itoa(a) == maj && strconv.Itoa(b) == min
}

// Host is r's cpu entry (host memory), ok false when r has none.
func (r Report) Host() (Accelerator, bool) {
	for _, a := range r.Accelerators {
		if a.Name == CPU {
			return a, true
		}
	}
	return Accelerator{}, false
}

// GPU is r's accelerator with the most memory other than the cpu entry,
// ok false when r has none.
func (r Report) GPU() (Accelerator, bool) {
	var best Accelerator
	ok := false
	for _, a := range r.Accelerators {
		if a.Name != CPU && (!ok || a.TotalMiB > best.TotalMiB) {
			best, ok = a, true
		}
	}
	return best, ok
}

// Summary is the legacy gpu model and VRAM of r: its largest GPU, or its
// cpu entry where it has none (what nodes that registered before reports
// existed sent, and what `gym node list` shows in those columns).
func (r Report) Summary() (string, uint64) {
	if g, ok := r.GPU(); ok {
		return g.Name, g.TotalMiB
	}
	if h, ok := r.Host(); ok {
		return h.Name, h.TotalMiB
	}
	return "", 0
}
