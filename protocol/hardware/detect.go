package hardware

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ParseMeminfo reads MemTotal and MemAvailable (MiB) from the text of
// /proc/meminfo.
func ParseMeminfo(b []byte) (totalMiB, availMiB uint64, err error) {
	for _, line := range strings.Split(string(b), "\n") {
		k, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, perr := strconv.ParseUint(f[0], 10, 64)
		if perr != nil {
			continue
		}
		switch k {
		case "MemTotal":
			totalMiB = kb >> 10
		case "MemAvailable":
			availMiB = kb >> 10
		}
	}
	if totalMiB == 0 {
		return 0, 0, errors.New("hardware: no MemTotal in /proc/meminfo")
	}
	return totalMiB, min(availMiB, totalMiB), nil
}

// Host is the cpu entry of this machine: MemTotal and MemAvailable from
// /proc/meminfo.
func Host() (Accelerator, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return Accelerator{}, fmt.Errorf("hardware: host memory: %w (give it with --accelerator cpu:MIB)", err)
	}
	total, avail, err := ParseMeminfo(b)
	if err != nil {
		return Accelerator{}, err
	}
	return Accelerator{Name: CPU, TotalMiB: min(total, MaxMiB), FreeMiB: min(avail, MaxMiB)}, nil
}

// NvidiaSMIArgs is the query ParseNvidiaSMI reads the output of.
var NvidiaSMIArgs = []string{"--query-gpu=name,memory.total,memory.free,compute_cap", "--format=csv,noheader,nounits"}

// ParseNvidiaSMI reads the GPUs from `nvidia-smi NvidiaSMIArgs...`: one
// line per GPU, "name, total MiB, free MiB, compute capability".
func ParseNvidiaSMI(out []byte) ([]Accelerator, error) {
	var gpus []Accelerator
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("hardware: nvidia-smi line %d %q: want name, memory.total, memory.free, compute_cap", i+1, line)
		}
		for k := range f {
			f[k] = strings.TrimSpace(f[k])
		}
		total, err1 := strconv.ParseUint(f[1], 10, 64)
		free, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("hardware: nvidia-smi line %d %q: memory is not whole MiB", i+1, line)
		}
		a := Accelerator{Name: f[0], TotalMiB: total, FreeMiB: min(free, total)}
		if validCompute(f[3]) {
			a.Compute = f[3]
		}
		gpus = append(gpus, a)
	}
	return gpus, nil
}

// GPUs asks nvidia-smi for this machine's NVIDIA GPUs (none, without an
// error, where nvidia-smi is not installed).
func GPUs(ctx context.Context) ([]Accelerator, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, NvidiaSMIArgs...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("hardware: nvidia-smi: %w: %s (give the GPUs with --accelerator NAME:MIB)", err, strings.TrimSpace(stderr.String()))
	}
	return ParseNvidiaSMI(out)
}

// ParseAccelerator reads an --accelerator flag: NAME:TOTAL_MIB, with
// optionally :FREE_MIB and :COMPUTE ("NVIDIA L4:23034:22000:8.9",
// "cpu:65536"). The name may not contain a colon.
func ParseAccelerator(s string) (Accelerator, error) {
	f := strings.Split(s, ":")
	bad := func(why string) (Accelerator, error) {
		return Accelerator{}, fmt.Errorf("%w: accelerator %q: %s (NAME:TOTAL_MIB[:FREE_MIB[:COMPUTE]], e.g. \"NVIDIA L4:23034:22000:8.9\" or cpu:65536)", ErrReport, s, why)
	}
	if len(f) < 2 || len(f) > 4 || f[0] == "" {
		return bad("want 2 to 4 fields")
	}
	a := Accelerator{Name: f[0]}
	var err error
	if a.TotalMiB, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return bad("total memory is not whole MiB")
	}
	if len(f) > 2 && f[2] != "" {
		if a.FreeMiB, err = strconv.ParseUint(f[2], 10, 64); err != nil {
			return bad("free memory is not whole MiB")
		}
	}
	if len(f) > 3 {
		a.Compute = f[3]
	}
	r := Report{Accelerators: []Accelerator{a}}
	if err := r.Validate(); err != nil {
		return Accelerator{}, err
	}
	return a, nil
}

// WithHost returns accs with the cpu entry last: the one given, else
// host's. GPUs keep their order.
func WithHost(accs []Accelerator, host Accelerator) []Accelerator {
	var out []Accelerator
	var cpu *Accelerator
	for i, a := range accs {
		if a.Name == CPU {
			cpu = &accs[i]
			continue
		}
		out = append(out, a)
	}
	if cpu != nil {
		return append(out, *cpu)
	}
	return append(out, host)
}
