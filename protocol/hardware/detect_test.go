package hardware_test

import (
	"errors"
	"testing"

	"github.com/zooai/gym/protocol/hardware"
)

func TestParseMeminfo(t *testing.T) {
	total, avail, err := hardware.ParseMeminfo([]byte("MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   20480000 kB\n"))
	if err != nil || total != 24000 || avail != 20000 {
		t.Fatalf("%d %d %v", total, avail, err)
	}
	if _, _, err := hardware.ParseMeminfo([]byte("MemFree: 1 kB\n")); err == nil {
		t.Fatal("no MemTotal accepted")
	}
}

// nvidia-smi's CSV, as --query-gpu=name,memory.total,memory.free,compute_cap
// --format=csv,noheader,nounits prints it.
func TestParseNvidiaSMI(t *testing.T) {
	out := "NVIDIA H100 80GB HBM3, 81559, 81080, 9.0\nNVIDIA L4, 23034, 22700, 8.9\n"
	g, err := hardware.ParseNvidiaSMI([]byte(out))
	if err != nil || len(g) != 2 {
		t.Fatalf("%+v %v", g, err)
	}
	if g[0] != (hardware.Accelerator{Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559, FreeMiB: 81080, Compute: "9.0"}) || g[1].Compute != "8.9" {
		t.Fatalf("%+v", g)
	}
	// Old drivers print [N/A] for the compute capability: left out.
	if g, err := hardware.ParseNvidiaSMI([]byte("Tesla K80, 11441, 11000, [N/A]")); err != nil || g[0].Compute != "" {
		t.Fatalf("%+v %v", g, err)
	}
	for _, bad := range []string{"NVIDIA L4, 23034", "NVIDIA L4, lots, 1, 8.9"} {
		if _, err := hardware.ParseNvidiaSMI([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if g, err := hardware.ParseNvidiaSMI(nil); err != nil || len(g) != 0 {
		t.Fatalf("no GPUs: %+v %v", g, err)
	}
}

func TestParseAccelerator(t *testing.T) {
	for in, want := range map[string]hardware.Accelerator{
		"NVIDIA L4:23034:22000:8.9": {Name: "NVIDIA L4", TotalMiB: 23034, FreeMiB: 22000, Compute: "8.9"},
		"cpu:65536":                 {Name: "cpu", TotalMiB: 65536},
		"A100::":                    {},
	} {
		got, err := hardware.ParseAccelerator(in)
		if want.Name == "" {
			if !errors.Is(err, hardware.ErrReport) {
				t.Errorf("%q: %+v %v", in, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %+v %v", in, got, err)
		}
	}
	for _, bad := range []string{"L4", "L4:0", "L4:10:20", "cpu:100:50:8.0", ":100", "L4:1:1:1:1"} {
		if _, err := hardware.ParseAccelerator(bad); !errors.Is(err, hardware.ErrReport) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
	h := hardware.Accelerator{Name: "cpu", TotalMiB: 9}
	l4 := hardware.Accelerator{Name: "L4", TotalMiB: 1}
	if got := hardware.WithHost([]hardware.Accelerator{l4}, h); len(got) != 2 || got[1] != h {
		t.Fatalf("%+v", got)
	}
	given := hardware.Accelerator{Name: "cpu", TotalMiB: 5}
	if got := hardware.WithHost([]hardware.Accelerator{given, l4}, h); len(got) != 2 || got[0] != l4 || got[1] != given {
		t.Fatalf("%+v", got)
	}
}
