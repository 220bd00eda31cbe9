package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSettingsPrecedence: defaults < config file < environment < flags.
func TestSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "hanzod.json")
	os.WriteFile(file, []byte(`{"data": "/from/file", "listen": "127.0.0.1:1", "metrics": "127.0.0.1:2", "lease": "8s"}`), 0o600)
	t.Setenv("HANZOD_LISTEN", "127.0.0.1:3")
	t.Setenv("HANZOD_METRICS", "127.0.0.1:4")
	cfg, _, err := load([]string{"--config", file, "--metrics", "127.0.0.1:5"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/from/file" || cfg.Listen != "127.0.0.1:3" || cfg.Metrics != "127.0.0.1:5" || cfg.LeaseTTL != 8*time.Second || cfg.Store != "embedded" {
		t.Fatalf("got %+v", cfg)
	}
	os.WriteFile(file, []byte(`{"data": "/x", "lsten": "typo"}`), 0o600)
	if _, _, err := load([]string{"--config", file}); err == nil || !strings.Contains(err.Error(), "lsten") {
		t.Fatalf("unknown key accepted: %v", err)
	}
	if _, _, err := load([]string{"--store", "valkey", "--data", "/x"}); err == nil || !strings.Contains(err.Error(), "--valkey") {
		t.Fatalf("valkey without URL: %v", err)
	}
}
