package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/zooai/gym/protocol/hardware"
)

// hwProbe is where workerHardware reads the machine: this host's memory
// and its NVIDIA GPUs (hardware.Host, hardware.GPUs; tests pass others).
type hwProbe struct {
	host func() (hardware.Accelerator, error)
	gpus func(context.Context) ([]hardware.Accelerator, error)
}

var machineProbe = hwProbe{host: hardware.Host, gpus: hardware.GPUs}

// workerHardware is the report gym worker registers: the accelerators of
// --accelerator when given, else for a torch worker on CUDA the GPUs
// nvidia-smi lists (the one of cuda:N alone), then the cpu entry (the one
// given, else this host's memory); its backend; and the types it trains
// in: float32 for go, --torch-dtype for torch, and nf4 for torch on CUDA
// (bitsandbytes' 4-bit; a worker without it refuses such jobs with the
// reason).
func workerHardware(ctx context.Context, p hwProbe, flags []string, backendName, device, dtype string) (hardware.Report, error) {
	var accs []hardware.Accelerator
	for _, s := range flags {
		a, err := hardware.ParseAccelerator(s)
		if err != nil {
			return hardware.Report{}, usageError{fmt.Errorf("--accelerator: %w", err)}
		}
		accs = append(accs, a)
	}
	cuda := backendName == "torch" && strings.HasPrefix(device, "cuda")
	if len(flags) == 0 && cuda {
		gpus, err := p.gpus(ctx)
		if err != nil {
			return hardware.Report{}, err
		}
		if _, n, ok := strings.Cut(device, ":"); ok {
			i, err := strconv.Atoi(n)
			if err != nil || i < 0 || i >= len(gpus) {
				return hardware.Report{}, usageError{fmt.Errorf("--torch-device %s: nvidia-smi lists %d GPU(s); give the GPU with --accelerator NAME:MIB", device, len(gpus))}
			}
			gpus = gpus[i : i+1]
		}
		accs = gpus
	}
	host, err := p.host()
	hasCPU := false
	for _, a := range accs {
		hasCPU = hasCPU || a.Name == hardware.CPU
	}
	if err != nil && !hasCPU {
		return hardware.Report{}, fmt.Errorf("%w; or give the host's memory with --accelerator cpu:MIB", err)
	}
	r := hardware.Report{Accelerators: hardware.WithHost(accs, host), Backends: []string{backendName}}
	switch backendName {
	case "go":
		r.DTypes = []string{hardware.Float32}
	default:
		r.DTypes = []string{dtype}
		if dtype == "" { // the torch backend follows each job: either type
			r.DTypes = []string{hardware.Float32, hardware.BFloat16}
		}
		if cuda {
			r.DTypes = append(r.DTypes, hardware.NF4)
		}
	}
	if err := r.Validate(); err != nil {
		return hardware.Report{}, usageError{fmt.Errorf("the hardware report: %w", err)}
	}
	return r, nil
}
