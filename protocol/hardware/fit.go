package hardware

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zooai/gym/protocol/jobspec"
)

// Fit is how a job would run on a node: the target it would train with,
// the device it would train on, the memory it needs there (when the base's
// shape is known) and, when it cannot, why (Reason, with the numbers).
type Fit struct {
	Target Target
	Device Accelerator
	Need   *Memory // nil when the base's shape is unknown
	Reason string  // "" when the job fits
}

// OK reports whether the job fits.
func (f Fit) OK() bool { return f.Reason == "" }

func (f Fit) String() string {
	if !f.OK() {
		return f.Reason
	}
	s := fmt.Sprintf("%s on %s", f.Target, f.Device.Name)
	if f.Need != nil {
		return s + fmt.Sprintf(": needs %d of %d MiB", f.Need.TotalMiB(), f.Device.Available())
	}
	return s + fmt.Sprintf(" (%d MiB; no memory estimate: hanzod has not read the base's config.json)", f.Device.TotalMiB)
}

// Legacy is the report of a node that registered only a gpu model and a
// VRAM figure (before reports existed): one accelerator, backends and
// dtypes unknown, which Check takes as whatever the job asks for.
func Legacy(gpu string, vramMiB uint64) Report {
	return Report{Accelerators: []Accelerator{{Name: gpu, TotalMiB: vramMiB}}}
}

// Check says whether job spec s (normalised) fits a node that reported r,
// given the base's shape sh (nil: unknown, no memory estimate). The node
// must run the job's backend (either, for backend any: the first of the
// node's that fits), train in its dtype when the job names one, load
// 4-bit bases when a torch job has use_4bit, and its device must have
// min_vram_mib in total and, when sh is known, the estimate free: the go
// engine trains in host memory (the cpu entry), torch on the node's
// largest GPU, or on the host where it has none. A report that lists no
// backends or dtypes (Legacy) accepts what the job asks for.
func Check(r Report, s jobspec.Spec, sh *Shape) Fit {
	var cands []string
	switch b := s.TrainingBackend(); {
	case b != "any":
		cands = []string{b}
	case len(r.Backends) > 0:
		cands = r.Backends
	default:
		cands = []string{BackendGo}
	}
	var first Fit
	for i, b := range cands {
		f := check(r, s, sh, b)
		if f.OK() {
			return f
		}
		if i == 0 {
			first = f
		}
	}
	return first
}

func check(r Report, s jobspec.Spec, sh *Shape, backend string) Fit {
	f := Fit{Target: Target{Backend: backend}}
	if len(r.Backends) > 0 && !slices.Contains(r.Backends, backend) {
		f.Reason = fmt.Sprintf("backend %s: the node runs %s", backend, strings.Join(r.Backends, ", "))
		return f
	}
	dtypes := slices.DeleteFunc(slices.Clone(r.DTypes), func(d string) bool { return d == NF4 })
	switch want := s.DType; {
	case backend == BackendGo:
		f.Target.DType = Float32
		if want != "" && want != Float32 {
			f.Reason = fmt.Sprintf("dtype %s: the go engine trains in float32", want)
			return f
		}
	case want != "":
		f.Target.DType = want
		if len(dtypes) > 0 && !slices.Contains(dtypes, want) {
			f.Reason = fmt.Sprintf("dtype %s: the node trains in %s", want, strings.Join(dtypes, ", "))
			return f
		}
	case len(dtypes) > 0:
		f.Target.DType = dtypes[0]
	default:
		f.Target.DType = Float32
	}
	if backend == BackendTorch && s.GSPO.Use4Bit {
		f.Target.Use4Bit = true
		if len(r.DTypes) > 0 && !slices.Contains(r.DTypes, NF4) {
			f.Reason = fmt.Sprintf("use_4bit: the node does not load 4-bit bases (it reports %s; torch loads NF4 on CUDA with bitsandbytes) — set gspo.use_4bit: false or pick a GPU node",
				strings.Join(r.DTypes, ", "))
			return f
		}
	}
	dev, ok := device(r, backend)
	if !ok {
		f.Reason = "the node reports no memory"
		return f
	}
	f.Device = dev
	if dev.TotalMiB < s.MinVRAMMiB {
		f.Reason = fmt.Sprintf("min_vram_mib %d: %s has %d MiB", s.MinVRAMMiB, dev.Name, dev.TotalMiB)
		return f
	}
	if sh != nil {
		m, err := Estimate(s, *sh, f.Target)
		if err != nil {
			f.Reason = err.Error()
			return f
		}
		f.Need = &m
		if need, have := m.TotalMiB(), dev.Available(); need > have {
			f.Reason = fmt.Sprintf("memory: %s needs %d MiB (%s), %s has %d MiB free", f.Target, need, m.Terms(), dev.Name, have)
		}
	}
	return f
}

// device is the accelerator backend trains on: the cpu entry for go, the
// largest GPU for torch (the cpu entry where there is none); a legacy
// report's one accelerator either way.
func device(r Report, backend string) (Accelerator, bool) {
	if backend == BackendTorch {
		if g, ok := r.GPU(); ok {
			return g, true
		}
	}
	if h, ok := r.Host(); ok {
		return h, true
	}
	if len(r.Accelerators) > 0 {
		return r.Accelerators[0], true
	}
	return Accelerator{}, false
}
