// Command hanzod is the Zoo Gym orchestrator: it registers nodes, tracks
// their liveness, schedules jobs, builds and repairs rings and keeps the
// stake ledger, over an event log in an embedded store (one directory) or
// in Valkey (several replicas, one leader at a time).
//
// It also validates, scores and merges the deltas workers submit, publishes
// each epoch's checkpoint (PEFT layout, content-addressed) and serves it to
// nodes over the artifact server; see docs/orchestrator.md and
// docs/end-to-end.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zooai/gym/internal/version"
	"github.com/zooai/gym/orchestrator/daemon"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/ledger"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// settings are what a config file, the environment and flags can set, in
// that order of increasing precedence. Names are the flag names.
type settings struct {
	Data           string `json:"data"`
	Listen         string `json:"listen"`
	Metrics        string `json:"metrics"`
	Store          string `json:"store"`
	Valkey         string `json:"valkey"`
	ValkeyPrefix   string `json:"valkey-prefix"`
	Lease          string `json:"lease"`
	TLSCert        string `json:"tls-cert"`
	TLSKey         string `json:"tls-key"`
	Insecure       bool   `json:"insecure"`
	AdminTokenFile string `json:"admin-token-file"`
	LogLevel       string `json:"log-level"`
	Artifacts      string `json:"artifacts"`
	Advertise      string `json:"artifacts-advertise"`
	Threads        int    `json:"threads"`
	EpochGrace     string `json:"epoch-grace"`
	CheckTimeout   string `json:"check-timeout"`
	ModelWork      string `json:"model-work"`
	Provision      string `json:"provision-timeout"`
	BlobRetention  string `json:"blob-retention"`
	IPFS           string `json:"ipfs"`
	Key            string `json:"key"`
	Ledger         string `json:"ledger"`
	RPC            string `json:"rpc"`
	ChainID        uint64 `json:"chain-id"`
	Contracts      string `json:"contracts"`
	ChainKey       string `json:"chain-key"`
	ChainAccounts  string `json:"chain-accounts"`
	Confirmations  uint64 `json:"confirmations"`
	// Rewards (docs/threat-model.md, "Economics"): GYM amounts as text.
	EpochReward     string `json:"epoch-reward"`
	RewardPerSample string `json:"reward-per-sample"`
	MinEpochSamples uint64 `json:"min-epoch-samples"`
	// RingGroups (≥ 2) makes every ring a two-level all-reduce in that
	// many balanced groups (docs/ring.md, "Two-level all-reduce").
	RingGroups int `json:"ring-groups"`
}

var envNames = map[string]string{
	"data": "HANZOD_DATA", "listen": "HANZOD_LISTEN", "metrics": "HANZOD_METRICS", "store": "HANZOD_STORE",
	"valkey": "HANZOD_VALKEY_URL", "valkey-prefix": "HANZOD_VALKEY_PREFIX", "lease": "HANZOD_LEASE",
	"tls-cert": "HANZOD_TLS_CERT", "tls-key": "HANZOD_TLS_KEY", "insecure": "HANZOD_INSECURE",
	"admin-token-file": "HANZOD_ADMIN_TOKEN_FILE", "log-level": "HANZOD_LOG_LEVEL",
	"artifacts": "HANZOD_ARTIFACTS", "artifacts-advertise": "HANZOD_ARTIFACTS_ADVERTISE", "threads": "HANZOD_THREADS",
	"epoch-grace": "HANZOD_EPOCH_GRACE", "check-timeout": "HANZOD_CHECK_TIMEOUT", "model-work": "HANZOD_MODEL_WORK", "provision-timeout": "HANZOD_PROVISION_TIMEOUT", "blob-retention": "HANZOD_BLOB_RETENTION", "ipfs": "HANZOD_IPFS_URL", "key": "HANZOD_KEY",
	"ledger": "HANZOD_LEDGER", "rpc": "HANZOD_RPC", "chain-id": "HANZOD_CHAIN_ID", "contracts": "HANZOD_CONTRACTS",
	"chain-key": "HANZOD_CHAIN_KEY", "chain-accounts": "HANZOD_CHAIN_ACCOUNTS", "confirmations": "HANZOD_CONFIRMATIONS",
	"epoch-reward": "HANZOD_EPOCH_REWARD", "reward-per-sample": "HANZOD_REWARD_PER_SAMPLE", "min-epoch-samples": "HANZOD_MIN_EPOCH_SAMPLES", "ring-groups": "HANZOD_RING_GROUPS",
}

// seedEnv are the deployment seed's names for some settings (its compose
// file sets them for hanzod). Each means the same as the HANZOD_ variable;
// both set to different values is refused. VALKEY_URL also selects the
// Valkey store.
var seedEnv = map[string]string{"valkey": "VALKEY_URL", "ipfs": "IPFS_URL", "key": "ORCHESTRATOR_KEY",
	"rpc": "HANZO_RPC", "chain-id": "HANZO_CHAIN_ID"}

// load builds the daemon config from defaults, the config file, the
// environment and the flags.
func load(args []string) (daemon.Config, slog.Level, error) {
	cfg, level, _, err := loadAll(args)
	return cfg, level, err
}

// loadAll is load with the chain settings (--ledger evm), which need a
// connection to turn into the daemon's ChainLink (openChain).
func loadAll(args []string) (daemon.Config, slog.Level, chainSettings, error) {
	cfg, level, s, err := loadSettings(args)
	return cfg, level, chainSettings{Ledger: s.Ledger, RPC: s.RPC, ChainID: s.ChainID, Contracts: s.Contracts,
		Key: s.ChainKey, Accounts: s.ChainAccounts, Confirmations: s.Confirmations}, err
}

func loadSettings(args []string) (daemon.Config, slog.Level, settings, error) {
	cfg, level, s, err := parseSettings(args)
	if err == nil {
		err = chainSettings{Ledger: s.Ledger, RPC: s.RPC, ChainID: s.ChainID, Contracts: s.Contracts, Key: s.ChainKey}.validate()
	}
	return cfg, level, s, err
}

// defaultProvision is hanzod's provisioning timeout: a job's nodes fetch
// and verify its base and dataset before it starts, which for a real base
// takes minutes (the state machine's own default, 60 s, is a test's).
const defaultProvision = 10 * time.Minute

// shortDur writes d as a flag value without trailing zero units (2m, 1h).
func shortDur(d time.Duration) string {
	s := d.String() // 2m0s, 1h0m0s, 1m30s
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func parseSettings(args []string) (daemon.Config, slog.Level, settings, error) {
	def := daemon.DefaultConfig()
	s := settings{Listen: def.Listen, Metrics: def.Metrics, Store: def.Store, ValkeyPrefix: def.ValkeyPrefix, Lease: def.LeaseTTL.String(), LogLevel: "info",
		Artifacts: def.Artifacts, Threads: def.Threads, EpochGrace: shortDur(judge.DefaultEpochGrace), CheckTimeout: shortDur(def.Engine.State.CheckTimeout), ModelWork: judge.ModelWorkAuto,
		Provision: shortDur(defaultProvision), BlobRetention: shortDur(judge.DefaultBlobRetention), Ledger: "embedded", ChainID: chainIDDefault, Confirmations: 1,
		EpochReward: gym(def.Engine.State.EpochReward), RewardPerSample: gym(def.Engine.State.RewardPerSample), MinEpochSamples: def.Engine.State.MinEpochSamples}

	fs := flag.NewFlagSet("hanzod", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `hanzod: the Zoo Gym orchestrator.

Usage: hanzod --data DIR [--listen ADDR] [--metrics ADDR] [--store embedded|valkey --valkey URL] [--ipfs URL]
       hanzod version [--json]
       hanzod health [--addr 127.0.0.1:9550] [--leader]

Settings come from defaults, then --config FILE (JSON with the flag names
as keys), then the environment variable in brackets, then flags.

`)
		fs.PrintDefaults()
	}
	config := fs.String("config", os.Getenv("HANZOD_CONFIG"), "JSON config file [HANZOD_CONFIG]")
	f := settings{}
	fs.StringVar(&f.Data, "data", "", "directory for the event log, snapshots and TLS material [HANZOD_DATA]")
	fs.StringVar(&f.Listen, "listen", s.Listen, "gRPC address for nodes and clients [HANZOD_LISTEN]")
	fs.StringVar(&f.Metrics, "metrics", s.Metrics, "Prometheus metrics address, empty to disable [HANZOD_METRICS]")
	fs.StringVar(&f.Store, "store", s.Store, "state store: embedded or valkey [HANZOD_STORE]")
	fs.StringVar(&f.Valkey, "valkey", "", "Valkey URL when --store valkey, e.g. redis://10.0.0.5:6379/0 [HANZOD_VALKEY_URL, VALKEY_URL: also selects --store valkey]")
	fs.StringVar(&f.ValkeyPrefix, "valkey-prefix", s.ValkeyPrefix, "key namespace in Valkey [HANZOD_VALKEY_PREFIX]")
	fs.StringVar(&f.Lease, "lease", s.Lease, "leader lease; a standby takes over about this long after the leader stops [HANZOD_LEASE]")
	fs.StringVar(&f.TLSCert, "tls-cert", "", "TLS certificate (PEM); off loopback a self-signed one is made when absent [HANZOD_TLS_CERT]")
	fs.StringVar(&f.TLSKey, "tls-key", "", "TLS key (PEM) [HANZOD_TLS_KEY]")
	fs.BoolVar(&f.Insecure, "insecure", false, "serve plaintext gRPC even off loopback [HANZOD_INSECURE]")
	fs.StringVar(&f.AdminTokenFile, "admin-token-file", "", "file holding the bearer token for operator calls (ledger operations, job lifecycle, unsigned job submissions) from non-loopback callers [HANZOD_ADMIN_TOKEN_FILE]")
	fs.StringVar(&f.LogLevel, "log-level", s.LogLevel, "debug, info, warn or error [HANZOD_LOG_LEVEL]")
	fs.StringVar(&f.Artifacts, "artifacts", s.Artifacts, "artifact server address (published checkpoints for registered nodes), empty to disable [HANZOD_ARTIFACTS]")
	fs.StringVar(&f.Advertise, "artifacts-advertise", "", "host:port nodes use to reach the artifact server, when it differs from --artifacts [HANZOD_ARTIFACTS_ADVERTISE]")
	fs.IntVar(&f.Threads, "threads", s.Threads, "threads for validation, replay and evaluation [HANZOD_THREADS]")
	fs.StringVar(&f.EpochGrace, "epoch-grace", s.EpochGrace, "how long an epoch waits for members that have not finished once the first has [HANZOD_EPOCH_GRACE]")
	fs.StringVar(&f.ModelWork, "model-work", s.ModelWork, "where the work that needs a base model runs: nodes (validators replay, check and evaluate; hanzod never loads a base's weights), self (hanzod does it where a job asks no validators), or auto (nodes for a base named by CID, self for the built-in base) (docs/validators.md) [HANZOD_MODEL_WORK]")
	fs.StringVar(&f.Provision, "provision-timeout", s.Provision, "how long a job's members have, once assigned, to fetch and verify its base and dataset and report their links before the job fails (a real-size base takes minutes) [HANZOD_PROVISION_TIMEOUT]")
	fs.StringVar(&f.CheckTimeout, "check-timeout", s.CheckTimeout, "how long a validator has for a check before another is asked (docs/validators.md) [HANZOD_CHECK_TIMEOUT]")
	fs.StringVar(&f.BlobRetention, "blob-retention", s.BlobRetention, "how long a settled job's accepted deltas and evidence stay in the blob store before the leader deletes them [HANZOD_BLOB_RETENTION]")
	fs.StringVar(&f.IPFS, "ipfs", "", "kubo RPC URL, e.g. http://ipfs:5001: pin every published checkpoint there, retrying until it is pinned [HANZOD_IPFS_URL, IPFS_URL]")
	fs.StringVar(&f.Ledger, "ledger", s.Ledger, "stake ledger: embedded, or evm to mirror rewards, slashes, publications and job locks onto the chain contracts and check node stake there (docs/chain.md) [HANZOD_LEDGER]")
	fs.StringVar(&f.RPC, "rpc", "", "chain RPC URL with --ledger evm [HANZOD_RPC, HANZO_RPC]")
	fs.Uint64Var(&f.ChainID, "chain-id", s.ChainID, "chain id the RPC endpoint must serve [HANZOD_CHAIN_ID, HANZO_CHAIN_ID]")
	fs.StringVar(&f.Contracts, "contracts", "", "addresses file written by 'gym chain deploy' [HANZOD_CONTRACTS]")
	fs.StringVar(&f.ChainKey, "chain-key", "", "the authorised orchestrator's secp256k1 key file (64 hex digits) [HANZOD_CHAIN_KEY]")
	fs.StringVar(&f.ChainAccounts, "chain-accounts", "", "JSON file mapping node ids to their chain addresses, for nodes that have not bound one on chain (gym chain bind), whose binding takes precedence [HANZOD_CHAIN_ACCOUNTS]")
	fs.Uint64Var(&f.Confirmations, "confirmations", s.Confirmations, "blocks a chain transaction waits for, its own included [HANZOD_CONFIRMATIONS]")
	fs.StringVar(&f.EpochReward, "epoch-reward", s.EpochReward, "the most one epoch pays its workers, in GYM (docs/threat-model.md, \"Economics\") [HANZOD_EPOCH_REWARD]")
	fs.StringVar(&f.RewardPerSample, "reward-per-sample", s.RewardPerSample, "what an epoch pays, in GYM, for each sample its accepted and checked deltas trained, up to --epoch-reward [HANZOD_REWARD_PER_SAMPLE]")
	fs.Uint64Var(&f.MinEpochSamples, "min-epoch-samples", s.MinEpochSamples, "the least a job's epoch may train per worker (steps_per_epoch × prompts_per_step × group_size); smaller jobs are refused, 0: no minimum [HANZOD_MIN_EPOCH_SAMPLES]")
	fs.IntVar(&f.RingGroups, "ring-groups", 0, "run every job's all-reduce in two levels over this many balanced groups of the ring's members (0: one flat ring; docs/ring.md) [HANZOD_RING_GROUPS]")
	fs.StringVar(&f.Key, "key", "", "hanzod's signing key (gym keygen format; must exist); default DATA/hanzod.key, made when missing [HANZOD_KEY, ORCHESTRATOR_KEY]")
	var level slog.Level
	if err := fs.Parse(args); err != nil {
		return def, level, s, err
	}
	if fs.NArg() > 0 {
		return def, level, s, fmt.Errorf("hanzod: unexpected argument %q", fs.Arg(0))
	}
	if *config != "" {
		data, err := os.ReadFile(*config)
		if err != nil {
			return def, level, s, fmt.Errorf("hanzod: --config: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return def, level, s, fmt.Errorf("hanzod: --config %s: %w (keys are the flag names)", *config, err)
		}
	}
	// The environment, then the flags given on the command line.
	var badMin error
	set := func(name, v string) {
		switch name {
		case "data":
			s.Data = v
		case "listen":
			s.Listen = v
		case "metrics":
			s.Metrics = v
		case "store":
			s.Store = v
		case "valkey":
			s.Valkey = v
		case "valkey-prefix":
			s.ValkeyPrefix = v
		case "lease":
			s.Lease = v
		case "tls-cert":
			s.TLSCert = v
		case "tls-key":
			s.TLSKey = v
		case "insecure":
			s.Insecure = v == "1" || v == "true"
		case "admin-token-file":
			s.AdminTokenFile = v
		case "log-level":
			s.LogLevel = v
		case "artifacts":
			s.Artifacts = v
		case "artifacts-advertise":
			s.Advertise = v
		case "threads":
			fmt.Sscan(v, &s.Threads)
		case "epoch-grace":
			s.EpochGrace = v
		case "check-timeout":
			s.CheckTimeout = v
		case "model-work":
			s.ModelWork = v
		case "provision-timeout":
			s.Provision = v
		case "blob-retention":
			s.BlobRetention = v
		case "ipfs":
			s.IPFS = v
		case "key":
			s.Key = v
		case "ledger":
			s.Ledger = v
		case "rpc":
			s.RPC = v
		case "chain-id":
			fmt.Sscan(v, &s.ChainID)
		case "contracts":
			s.Contracts = v
		case "chain-key":
			s.ChainKey = v
		case "chain-accounts":
			s.ChainAccounts = v
		case "confirmations":
			fmt.Sscan(v, &s.Confirmations)
		case "epoch-reward":
			s.EpochReward = v
		case "reward-per-sample":
			s.RewardPerSample = v
		case "min-epoch-samples":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				badMin = fmt.Errorf("hanzod: --min-epoch-samples %q: want a whole number of samples, e.g. 128", v)
			}
			s.MinEpochSamples = n
		case "ring-groups":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n == 1 {
				badMin = fmt.Errorf("hanzod: --ring-groups %q: want 0 (flat) or a number of groups ≥ 2", v)
			}
			s.RingGroups = n
		}
	}
	storeChosen := s.Store != def.Store // by the config file
	for name, envName := range envNames {
		v, ok := os.LookupEnv(envName)
		if seed := seedEnv[name]; seed != "" {
			if sv, sok := os.LookupEnv(seed); sok {
				if ok && sv != v {
					return def, level, s, fmt.Errorf("hanzod: %s=%q and %s=%q disagree; set one of them", seed, sv, envName, v)
				}
				v, ok = sv, true
			}
		}
		if ok {
			set(name, v)
			storeChosen = storeChosen || name == "store"
		}
	}
	fs.Visit(func(fl *flag.Flag) {
		set(fl.Name, fl.Value.String())
		storeChosen = storeChosen || fl.Name == "store"
	})
	if _, ok := os.LookupEnv("VALKEY_URL"); ok && s.Valkey != "" {
		if !storeChosen {
			s.Store = "valkey"
		} else if s.Store != "valkey" {
			return def, level, s, fmt.Errorf("hanzod: VALKEY_URL is set but the store is %q: unset VALKEY_URL, or use --store valkey", s.Store)
		}
	}
	if s.Store == "embedded" && s.Valkey != "" && storeChosen {
		return def, level, s, fmt.Errorf("hanzod: a Valkey URL (%s) with --store embedded: the embedded store does not use it; drop one", s.Valkey)
	}

	cfg := def
	cfg.DataDir, cfg.Listen, cfg.Metrics, cfg.Store = s.Data, s.Listen, s.Metrics, s.Store
	cfg.ValkeyURL, cfg.ValkeyPrefix, cfg.TLSCert, cfg.TLSKey, cfg.Insecure = s.Valkey, s.ValkeyPrefix, s.TLSCert, s.TLSKey, s.Insecure
	lease, err := time.ParseDuration(s.Lease)
	if err != nil {
		return def, level, s, fmt.Errorf("hanzod: --lease %q: %w", s.Lease, err)
	}
	cfg.LeaseTTL = lease
	cfg.Artifacts, cfg.ArtifactsAdvertise, cfg.Threads = s.Artifacts, s.Advertise, s.Threads
	cfg.IPFS, cfg.KeyFile = s.IPFS, s.Key
	if cfg.EpochGrace, err = time.ParseDuration(s.EpochGrace); err != nil || cfg.EpochGrace <= 0 {
		return def, level, s, fmt.Errorf("hanzod: --epoch-grace %q: want a positive duration, e.g. 2m", s.EpochGrace)
	}
	if cfg.Engine.State.CheckTimeout, err = time.ParseDuration(s.CheckTimeout); err != nil || cfg.Engine.State.CheckTimeout <= 0 {
		return def, level, s, fmt.Errorf("hanzod: --check-timeout %q: want a positive duration, e.g. 10m", s.CheckTimeout)
	}
	if cfg.Engine.State.ProvisionTimeout, err = time.ParseDuration(s.Provision); err != nil || cfg.Engine.State.ProvisionTimeout <= 0 {
		return def, level, s, fmt.Errorf("hanzod: --provision-timeout %q: want a positive duration, e.g. 10m", s.Provision)
	}
	if cfg.ModelWork, err = judge.ParseModelWork(s.ModelWork); err != nil {
		return def, level, s, fmt.Errorf("hanzod: --model-work: %w", err)
	}
	if cfg.BlobRetention, err = time.ParseDuration(s.BlobRetention); err != nil || cfg.BlobRetention <= 0 {
		return def, level, s, fmt.Errorf("hanzod: --blob-retention %q: want a positive duration, e.g. 1h", s.BlobRetention)
	}
	if cfg.Threads < 1 {
		return def, level, s, fmt.Errorf("hanzod: --threads %d: want at least 1", cfg.Threads)
	}
	st := &cfg.Engine.State
	if st.EpochReward, err = ledger.ParseGYM(s.EpochReward); err != nil {
		return def, level, s, fmt.Errorf("hanzod: --epoch-reward: %w", err)
	}
	if st.RewardPerSample, err = ledger.ParseGYM(s.RewardPerSample); err != nil {
		return def, level, s, fmt.Errorf("hanzod: --reward-per-sample: %w", err)
	}
	if badMin != nil {
		return def, level, s, badMin
	}
	st.MinEpochSamples = s.MinEpochSamples
	st.Ring.Groups = s.RingGroups
	if s.AdminTokenFile != "" {
		b, err := os.ReadFile(s.AdminTokenFile)
		if err != nil {
			return def, level, s, fmt.Errorf("hanzod: admin token: %w", err)
		}
		cfg.AdminToken = strings.TrimSpace(string(b))
		cfg.Server.AdminToken = cfg.AdminToken
	}
	if err := level.UnmarshalText([]byte(s.LogLevel)); err != nil {
		return def, level, s, fmt.Errorf("hanzod: --log-level: %w", err)
	}
	return cfg, level, s, cfg.Validate()
}

// gym writes an amount as GYM, as --epoch-reward and --reward-per-sample
// take it.
func gym(a ledger.Amount) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%d.%06d", a/ledger.GYM, a%ledger.GYM), "0"), ".")
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "health" {
		return health(args[1:])
	}
	if len(args) > 0 && args[0] == "version" {
		vs := flag.NewFlagSet("hanzod version", flag.ContinueOnError)
		asJSON := vs.Bool("json", false, "print JSON: program, version, commit, date, modified, go, platform")
		if err := vs.Parse(args[1:]); err != nil {
			return err
		}
		if vs.NArg() > 0 {
			return fmt.Errorf("hanzod version: unexpected argument %q", vs.Arg(0))
		}
		return version.Get("hanzod").Write(os.Stdout, *asJSON)
	}
	cfg, level, cs, err := loadAll(args)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	log.Info("starting", "version", version.Get("hanzod").String())
	if _, ok := os.LookupEnv("HF_TOKEN"); ok {
		log.Info("HF_TOKEN is not used: hanzod downloads nothing from the Hugging Face Hub (docs/deploy.md)")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cs.Ledger == "evm" {
		link, closeChain, err := cs.open(ctx, log)
		if err != nil {
			return err
		}
		defer closeChain()
		cfg.Chain = link
	}
	d, err := daemon.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("shutting down")
	t0 := time.Now()
	err = d.Close()
	log.Info("stopped", "took", time.Since(t0))
	return err
}
