package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/daemon"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/ledger"
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

// TestSeedEnvironment: the deployment seed's variables mean what the seed
// says, and contradictory combinations are refused with a message naming
// both sides.
func TestSeedEnvironment(t *testing.T) {
	for _, name := range []string{"VALKEY_URL", "IPFS_URL", "ORCHESTRATOR_KEY", "HANZOD_VALKEY_URL", "HANZOD_IPFS_URL", "HANZOD_KEY", "HANZOD_STORE"} {
		os.Unsetenv(name)
	}
	type env map[string]string
	for _, c := range []struct {
		name  string
		env   env
		args  []string
		check func(daemon.Config) bool
		err   string
	}{
		{"VALKEY_URL selects valkey", env{"VALKEY_URL": "redis://kv:6379"}, nil,
			func(c daemon.Config) bool { return c.Store == "valkey" && c.ValkeyURL == "redis://kv:6379" }, ""},
		{"same value twice", env{"VALKEY_URL": "redis://kv:6379", "HANZOD_VALKEY_URL": "redis://kv:6379"}, nil,
			func(c daemon.Config) bool { return c.Store == "valkey" }, ""},
		{"the two names disagree", env{"VALKEY_URL": "redis://kv:6379", "HANZOD_VALKEY_URL": "redis://other:6379"}, nil, nil, "disagree"},
		{"VALKEY_URL with the embedded store", env{"VALKEY_URL": "redis://kv:6379"}, []string{"--store", "embedded"}, nil, "VALKEY_URL is set but the store"},
		{"a Valkey URL with the embedded store", nil, []string{"--store", "embedded", "--valkey", "redis://kv:6379"}, nil, "embedded store does not use it"},
		{"IPFS_URL", env{"IPFS_URL": "http://ipfs:5001"}, nil, func(c daemon.Config) bool { return c.IPFS == "http://ipfs:5001" }, ""},
		{"a flag wins over IPFS_URL", env{"IPFS_URL": "http://ipfs:5001"}, []string{"--ipfs", "http://127.0.0.1:5001"},
			func(c daemon.Config) bool { return c.IPFS == "http://127.0.0.1:5001" }, ""},
		{"IPFS_URL as a multiaddr", env{"IPFS_URL": "/ip4/127.0.0.1/tcp/5001"}, nil, nil, "kubo's RPC API"},
		{"ORCHESTRATOR_KEY is the key file", env{"ORCHESTRATOR_KEY": "/run/secrets/hanzod.key"}, nil,
			func(c daemon.Config) bool { return c.KeyFile == "/run/secrets/hanzod.key" }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, _, err := load(append([]string{"--data", t.TempDir()}, c.args...))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("want an error with %q, got %v", c.err, err)
				}
				return
			}
			if err != nil || !c.check(cfg) {
				t.Fatalf("%v: %+v", err, cfg)
			}
		})
	}
}

func TestLedgerFlags(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ledger", "chain"}, "--ledger"},
		{[]string{"--ledger", "evm"}, "--rpc"},
		{[]string{"--ledger", "evm", "--rpc", "http://127.0.0.1:8545"}, "--contracts"},
		{[]string{"--ledger", "evm", "--rpc", "http://127.0.0.1:8545", "--contracts", "c.json"}, "--chain-key"},
	} {
		_, _, err := load(append([]string{"--data", dir}, c.args...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
	_, _, cs, err := loadAll([]string{"--data", dir, "--ledger", "evm", "--rpc", "http://x", "--contracts", "c.json", "--chain-key", "k"})
	if err != nil || cs.ChainID != 36900 || cs.Confirmations != 1 {
		t.Fatalf("defaults %+v, %v", cs, err)
	}
	t.Setenv("HANZO_CHAIN_ID", "1337")
	t.Setenv("HANZO_RPC", "http://127.0.0.1:8545")
	_, _, cs, err = loadAll([]string{"--data", dir, "--ledger", "evm", "--contracts", "c.json", "--chain-key", "k"})
	if err != nil || cs.ChainID != 1337 || cs.RPC != "http://127.0.0.1:8545" {
		t.Fatalf("seed environment %+v, %v", cs, err)
	}
}

// TestRewardFlags: the reward rules come from defaults, the config file,
// the environment and flags into the state machine's config, and a bad
// amount is refused naming the flag.
func TestRewardFlags(t *testing.T) {
	dir := t.TempDir()
	cfg, _, err := load([]string{"--data", dir})
	if err != nil {
		t.Fatal(err)
	}
	st := cfg.Engine.State
	if st.EpochReward != 100*ledger.GYM || st.RewardPerSample != 25_000 || st.MinEpochSamples != 128 {
		t.Fatalf("defaults: epoch reward %d, per sample %d, minimum %d", st.EpochReward, st.RewardPerSample, st.MinEpochSamples)
	}
	file := filepath.Join(dir, "hanzod.json")
	os.WriteFile(file, []byte(`{"epoch-reward": "50", "min-epoch-samples": 64}`), 0o600)
	t.Setenv("HANZOD_REWARD_PER_SAMPLE", "0.01")
	cfg, _, err = load([]string{"--data", dir, "--config", file, "--min-epoch-samples", "512"})
	if err != nil {
		t.Fatal(err)
	}
	if st := cfg.Engine.State; st.EpochReward != 50*ledger.GYM || st.RewardPerSample != 10_000 || st.MinEpochSamples != 512 {
		t.Fatalf("set: epoch reward %d, per sample %d, minimum %d", st.EpochReward, st.RewardPerSample, st.MinEpochSamples)
	}
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--epoch-reward", "1.0000001"}, "", "--epoch-reward"},
		{[]string{"--reward-per-sample", "-1"}, "", "--reward-per-sample"},
		{nil, "lots", "--min-epoch-samples"},
	} {
		t.Setenv("HANZOD_MIN_EPOCH_SAMPLES", c.env)
		if c.env == "" {
			os.Unsetenv("HANZOD_MIN_EPOCH_SAMPLES")
		}
		if _, _, err := load(append([]string{"--data", dir}, c.args...)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %q: %v, want an error naming %s", c.args, c.env, err, c.want)
		}
	}
}

// TestModelWorkFlags: --model-work and --provision-timeout by default, by
// the environment and by flag, and refused when they make no sense.
func TestModelWorkFlags(t *testing.T) {
	dir := t.TempDir()
	cfg, _, err := load([]string{"--data", dir})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ModelWork != judge.ModelWorkAuto || cfg.Engine.State.ProvisionTimeout != 10*time.Minute {
		t.Fatalf("defaults: model work %q, provision timeout %v", cfg.ModelWork, cfg.Engine.State.ProvisionTimeout)
	}
	t.Setenv("HANZOD_MODEL_WORK", "nodes")
	cfg, _, err = load([]string{"--data", dir, "--provision-timeout", "90s"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ModelWork != judge.ModelWorkNodes || cfg.Engine.State.ProvisionTimeout != 90*time.Second {
		t.Fatalf("set: model work %q, provision timeout %v", cfg.ModelWork, cfg.Engine.State.ProvisionTimeout)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model-work", "gpu"}, "--model-work"},
		{[]string{"--provision-timeout", "0s"}, "--provision-timeout"},
		{[]string{"--provision-timeout", "soon"}, "--provision-timeout"},
	} {
		if _, _, err := load(append([]string{"--data", dir}, c.args...)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
}
