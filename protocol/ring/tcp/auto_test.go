package tcp

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestAutoStreams(t *testing.T) {
	const gbit, mib = 125e6, 1 << 20
	for _, c := range []struct {
		rtt    time.Duration
		rate   float64
		window int
		want   int
	}{
		{40 * time.Millisecond, gbit, 2 * mib, 4},  // the wide-area bed: BDP 5 MB over 2 MiB windows, + 1
		{200 * time.Microsecond, gbit, 2 * mib, 1}, // a LAN
		{16 * time.Millisecond, gbit, 2 * mib, 1},  // BDP 2 MB: one window holds it
		{18 * time.Millisecond, gbit, 2 * mib, 3},  // just past one window
		{100 * time.Millisecond, 10 * gbit, 2 * mib, MaxAutoStreams},
		{40 * time.Millisecond, gbit, 0, 1}, // unknown window
		{0, gbit, 2 * mib, 1},
		{time.Second, 0, 2 * mib, 1},
	} {
		if got := AutoStreams(c.rtt, c.rate, c.window); got != c.want {
			t.Errorf("AutoStreams(%v, %v, %d) = %d, want %d", c.rtt, c.rate, c.window, got, c.want)
		}
	}
}

func TestWmemMax(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]int{
		"4096\t16384\t4194304\n": 4194304,
		"4096 16384 33554432":    33554432,
		"garbage":                4 << 20,
		"1 2 -5":                 4 << 20,
	} {
		p := filepath.Join(dir, "wmem")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := wmemMax(p); got != want {
			t.Errorf("wmemMax(%q) = %d, want %d", content, got, want)
		}
	}
	if got := wmemMax(filepath.Join(dir, "missing")); got != 4<<20 {
		t.Errorf("missing file: %d", got)
	}
	if got := streamWindow(1 << 20); got != 1<<19 {
		t.Errorf("streamWindow with a set buffer: %d", got)
	}
}
