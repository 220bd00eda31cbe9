package nodeclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/hardware"
)

// A node started without a hardware report registers this host's memory
// as its cpu accelerator, and the legacy gpu model and VRAM repeat it:
// not the 1 MiB "cpu" that left every job with min_vram_mib pending. A
// report given is sent as given, signed (strictHanzod verifies it).
func TestRegistersHardware(t *testing.T) {
	host, err := hardware.Host()
	if err != nil {
		t.Skipf("no /proc/meminfo: %v", err)
	}
	f := &strictHanzod{key: pub(key(200)), now: time.Now}
	c, err := New(Config{Key: key(9), Conn: f, Dir: t.TempDir(), Hanzod: f.key})
	must(t, err)
	defer c.Close()
	must(t, c.Register(context.Background(), "10.0.0.1:9000", ""))
	r := f.registered
	if r == nil || len(r.Accelerators) != 1 || r.Accelerators[0].Name != "cpu" || r.Accelerators[0].TotalMib != host.TotalMiB ||
		r.GpuModel != "cpu" || r.VramMib != host.TotalMiB || r.VramMib < 64 {
		t.Fatalf("registered %+v, host %+v", r, host)
	}

	l4 := hardware.Report{
		Accelerators: []hardware.Accelerator{{Name: "NVIDIA L4", TotalMiB: 23034, FreeMiB: 22000, Compute: "8.9"}, {Name: "cpu", TotalMiB: 65536, FreeMiB: 60000}},
		Backends:     []string{"torch"}, DTypes: []string{"bfloat16", "nf4"},
	}
	c2, err := New(Config{Key: key(10), Conn: f, Dir: t.TempDir(), Hanzod: f.key, Hardware: l4})
	must(t, err)
	defer c2.Close()
	must(t, c2.Register(context.Background(), "10.0.0.1:9000", ""))
	r = f.registered
	if len(r.Accelerators) != 2 || r.Accelerators[0].Compute != "8.9" || r.GpuModel != "NVIDIA L4" || r.VramMib != 23034 ||
		len(r.Backends) != 1 || r.Dtypes[1] != "nf4" {
		t.Fatalf("registered %+v", r)
	}
}

func TestDefaultHardware(t *testing.T) {
	h := hardware.Accelerator{Name: "cpu", TotalMiB: 1000, FreeMiB: 900}
	got := defaultHardware(hardware.Report{Backends: []string{"go"}}, func() (hardware.Accelerator, error) { return h, nil })
	if len(got.Accelerators) != 1 || got.Accelerators[0] != h || got.Backends[0] != "go" {
		t.Fatalf("%+v", got)
	}
	got = defaultHardware(hardware.Report{}, func() (hardware.Accelerator, error) { return h, errors.New("no meminfo") })
	if !got.Empty() {
		t.Fatalf("host unknown: %+v", got)
	}
}
