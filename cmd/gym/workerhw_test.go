package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zooai/gym/protocol/hardware"
)

// gym worker registers the host's memory as cpu, the GPUs nvidia-smi
// lists for a torch worker on CUDA (the one of cuda:N alone), what
// --accelerator gives instead, its backend and its dtypes.
func TestWorkerHardware(t *testing.T) {
	host := hardware.Accelerator{Name: "cpu", TotalMiB: 64000, FreeMiB: 60000}
	h100 := hardware.Accelerator{Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559, FreeMiB: 81000, Compute: "9.0"}
	l4 := hardware.Accelerator{Name: "NVIDIA L4", TotalMiB: 23034, FreeMiB: 22000, Compute: "8.9"}
	asked := 0
	p := hwProbe{
		host: func() (hardware.Accelerator, error) { return host, nil },
		gpus: func(context.Context) ([]hardware.Accelerator, error) {
			asked++
			return []hardware.Accelerator{h100, l4}, nil
		},
	}
	ctx := context.Background()
	r, err := workerHardware(ctx, p, nil, "go", "cpu", "float32")
	if err != nil || len(r.Accelerators) != 1 || r.Accelerators[0] != host || r.Backends[0] != "go" || strings.Join(r.DTypes, ",") != "float32" || asked != 0 {
		t.Fatalf("go: %+v %v (nvidia-smi asked %d times)", r, err, asked)
	}
	r, err = workerHardware(ctx, p, nil, "torch", "cuda:1", "bfloat16")
	if err != nil || len(r.Accelerators) != 2 || r.Accelerators[0] != l4 || r.Accelerators[1] != host || strings.Join(r.DTypes, ",") != "bfloat16,nf4" {
		t.Fatalf("torch cuda:1: %+v %v", r, err)
	}
	if r, err = workerHardware(ctx, p, nil, "torch", "cuda", "bfloat16"); err != nil || len(r.Accelerators) != 3 {
		t.Fatalf("torch cuda: %+v %v", r, err)
	}
	if r, err = workerHardware(ctx, p, nil, "torch", "cpu", "float32"); err != nil || len(r.Accelerators) != 1 || strings.Join(r.DTypes, ",") != "float32" {
		t.Fatalf("torch on cpu: %+v %v", r, err)
	}
	r, err = workerHardware(ctx, p, []string{"cpu:24576", "RTX 4090:24564"}, "go", "cpu", "float32")
	if err != nil || len(r.Accelerators) != 2 || r.Accelerators[0].Name != "RTX 4090" || r.Accelerators[1].TotalMiB != 24576 {
		t.Fatalf("--accelerator: %+v %v", r, err)
	}
	var u usageError
	if _, err := workerHardware(ctx, p, []string{"RTX 4090"}, "go", "cpu", "float32"); !errors.As(err, &u) {
		t.Fatalf("a bad --accelerator: %v", err)
	}
	if _, err := workerHardware(ctx, p, nil, "torch", "cuda:7", "bfloat16"); !errors.As(err, &u) || !strings.Contains(err.Error(), "2 GPU(s)") {
		t.Fatalf("cuda:7 of two: %v", err)
	}
	noHost := hwProbe{host: func() (hardware.Accelerator, error) { return hardware.Accelerator{}, errors.New("no meminfo") }, gpus: p.gpus}
	if _, err := workerHardware(ctx, noHost, nil, "go", "cpu", "float32"); err == nil || !strings.Contains(err.Error(), "--accelerator cpu:MIB") {
		t.Fatalf("host unknown: %v", err)
	}
	if r, err := workerHardware(ctx, noHost, []string{"cpu:8192"}, "go", "cpu", "float32"); err != nil || r.Accelerators[0].TotalMiB != 8192 {
		t.Fatalf("host given: %+v %v", r, err)
	}
}
