// Package daemon wires hanzod together in one place: the store, the
// engine, the gRPC server (with health and reflection), the metrics
// endpoint and the loop that campaigns for the lease and ticks the state
// machine once a second.
package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/artifact/pin"
	astore "github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/artifact/transfer"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/orchestrator/blob"
	"github.com/zooai/gym/orchestrator/chainsync"
	"github.com/zooai/gym/orchestrator/engine"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/server"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store"
	"github.com/zooai/gym/orchestrator/store/bolt"
	"github.com/zooai/gym/orchestrator/store/valkey"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/merge"
)

// Config is everything hanzod needs; flags and environment map onto it.
type Config struct {
	DataDir      string        // event log (embedded store), TLS material
	Listen       string        // gRPC address
	Metrics      string        // Prometheus address; empty disables
	Store        string        // "embedded" or "valkey"
	ValkeyURL    string        // with Store "valkey"
	ValkeyPrefix string        // key namespace in Valkey
	Holder       string        // replica id in the lease; generated when empty
	LeaseTTL     time.Duration // failover bound
	TickInterval time.Duration // how often the state machine ticks
	// TLSCert and TLSKey are PEM files. Off loopback, TLS 1.3 is on by
	// default: without files a self-signed certificate is made in DataDir.
	TLSCert, TLSKey string
	// Insecure serves plaintext gRPC even off loopback.
	Insecure bool
	// KeyFile is hanzod's signing key (nodekey format); it must exist.
	// Empty: DataDir/hanzod.key, made when missing.
	KeyFile string
	// OrchestratorStake is what the signing key's ledger account must
	// have bonded before the validator merges, publishes or settles
	// (DefaultConfig: the orchestrator role's 50,000 GYM; 0: unchecked).
	// Replicas share one key (KeyFile), hence one staked account.
	OrchestratorStake ledger.Amount
	// AdminToken enables ledger operations from non-loopback callers.
	AdminToken string
	// Artifacts is the address of the artifact server (trustless-gateway
	// HTTP with signed authorizations) that serves published checkpoints
	// to registered nodes; empty disables it.
	Artifacts string
	// ArtifactsAdvertise is the host:port put into assignments (default:
	// the listen address, with a loopback host when it listens on all).
	ArtifactsAdvertise string
	// Threads bounds the validator's evaluation and replay threads.
	Threads int
	// EpochGrace is how long an epoch waits for members that have not
	// finished once the first has (0: 2 min).
	EpochGrace time.Duration
	// BlobRetention is how long a settled job's accepted deltas and
	// evidence stay in the blob store before the leader deletes them
	// (0: 1 h; judge.Config.BlobRetention).
	BlobRetention time.Duration
	// IPFS is the RPC URL of a kubo node (IPFS_URL, e.g.
	// http://ipfs:5001) on which every complete artifact of the store —
	// each published checkpoint — is pinned, through a durable retry
	// queue (DataDir/ipfs-pins.json); empty: no pinning.
	IPFS string
	// PinMinBackoff and PinMaxBackoff bound the waits between tries of a
	// failing pin (0: pin.DefaultConfig's 2 s and 5 min).
	PinMinBackoff, PinMaxBackoff time.Duration
	Server                       server.Config
	Engine                       engine.Config

	// EvalSize and ShardSize are the validator's held-out problems per
	// checkpoint accuracy and per delta score (0: judge.Config's
	// defaults, 500 and 128); tests make them small.
	EvalSize, ShardSize int
	// ModelWork is judge.Config.ModelWork: where replays, trace checks and
	// held-out evaluations run (auto, nodes or self).
	ModelWork string
	// Outliers is the validator's outlier replay configuration
	// (judge.Config.Outliers).
	Outliers merge.OutlierConfig
	// NoScreening leaves every check to the epochs' ends
	// (judge.Config.NoScreening).
	NoScreening bool
	// Base is the built-in base model, parsed once by the process (nil:
	// the daemon uses basemodel.Builtin).
	Base *basemodel.Base
	// Chain, when set, is the chain ledger hanzod mirrors its rewards,
	// slashes, publications and job locks onto, and checks a node's stake
	// on before admitting it (cmd/hanzod --ledger evm; docs/chain.md).
	Chain *ChainLink
}

// ChainLink is what hanzod needs of a chain ledger; cmd/hanzod builds it
// (orchestrator/ledger/evm), so the daemon does not depend on an EVM
// client.
type ChainLink struct {
	Book ledger.Book
	// Staked reads an account's on-chain stake for a role.
	Staked chainsync.Staked
	// Accounts maps node ids to their chain accounts (the operator's
	// --chain-accounts).
	Accounts map[string]string
	// Bound, when set, finds the account a node bound to its key on chain
	// (evm.Ledger.NodeAccount), which takes precedence over Accounts.
	Bound chainsync.Bound
	// StakeMaxAge bounds how long an admission's stake check is reused
	// (0: one minute).
	StakeMaxAge time.Duration
}

// DefaultConfig returns the seed's ports and the embedded store.
func DefaultConfig() Config {
	return Config{
		Listen: ":9550", Metrics: ":9551", Artifacts: ":9552", Store: "embedded", ValkeyPrefix: "gym", Threads: 2,
		LeaseTTL: 6 * time.Second, TickInterval: time.Second, OrchestratorStake: orchestratorMinimum(),
		Server: server.DefaultConfig(), Engine: engine.DefaultConfig("hanzod"),
	}
}

func orchestratorMinimum() ledger.Amount {
	m, _ := ledger.MinStake(ledger.RoleOrchestrator)
	return m
}

// Validate checks the config and says what to fix.
func (c Config) Validate() error {
	switch {
	case c.DataDir == "":
		return errors.New("hanzod: --data DIR is required")
	case c.Store != "embedded" && c.Store != "valkey":
		return fmt.Errorf("hanzod: --store %q: want embedded or valkey", c.Store)
	case c.Store == "valkey" && c.ValkeyURL == "":
		return errors.New("hanzod: --store valkey needs --valkey redis://HOST:PORT/DB")
	case c.LeaseTTL < 100*time.Millisecond:
		return errors.New("hanzod: lease TTL below 100ms")
	case c.TickInterval <= 0 || c.TickInterval*2 > c.LeaseTTL:
		return errors.New("hanzod: the tick interval must be positive and at most half the lease TTL")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("hanzod: give both --tls-cert and --tls-key, or neither")
	}
	if c.IPFS != "" {
		if _, err := pin.NewClient(c.IPFS, nil); err != nil {
			return fmt.Errorf("hanzod: --ipfs: %w", err)
		}
	}
	if err := c.Server.Validate(); err != nil {
		return err
	}
	return nil
}

// Daemon is a running hanzod.
type Daemon struct {
	cfg    Config
	log    *slog.Logger
	st     store.Store
	eng    *engine.Engine
	grpc   *grpc.Server
	health *health.Server
	// serving is what health says (SERVING: this replica leads); under smu.
	smu     sync.Mutex
	serving bool
	lis     net.Listener
	mlis    net.Listener
	http    *http.Server
	judge   *judge.Judge
	srv     *server.Server
	arts    *astore.Store
	pins    *pin.Queue
	ipfs    *pin.Client
	mirror  *chainsync.Mirror
	alis    net.Listener
	ahttp   *http.Server
	key     ed25519.PrivateKey
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errOnce sync.Once
	err     error
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start opens the store, rebuilds the state and starts serving.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Holder == "" && cfg.Store == "embedded" {
		// bbolt's file lock already makes this the only process on the
		// directory: a fixed holder lets a restart take the lease at once.
		cfg.Holder = "embedded"
	}
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		var b [4]byte
		rand.Read(b[:])
		cfg.Holder = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	cfg.Engine.Holder, cfg.Engine.LeaseTTL = cfg.Holder, cfg.LeaseTTL
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: log}
	var err error
	switch cfg.Store {
	case "embedded":
		d.st, err = bolt.Open(bolt.DefaultConfig(cfg.DataDir))
	case "valkey":
		vc := valkey.DefaultConfig(cfg.ValkeyURL)
		vc.Prefix = cfg.ValkeyPrefix
		d.st, err = valkey.Open(ctx, vc)
	}
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	d.eng, err = engine.Open(ctx, cfg.Engine, d.st, time.Now)
	if err != nil {
		d.st.Close()
		return nil, err
	}
	log.Info("state rebuilt", "events_replayed", d.eng.Replayed(), "took", time.Since(t0), "store", cfg.Store, "holder", cfg.Holder)

	srv, err := server.New(cfg.Server, d.eng, time.Now)
	if err != nil {
		d.st.Close()
		return nil, err
	}
	d.srv = srv
	if err := d.openJudge(srv); err != nil {
		d.st.Close()
		return nil, err
	}
	if err := d.openPins(srv); err != nil {
		d.st.Close()
		return nil, err
	}
	if err := d.openChain(srv); err != nil {
		d.st.Close()
		return nil, err
	}
	creds, err := d.credentials()
	if err != nil {
		d.st.Close()
		return nil, err
	}
	d.grpc = grpc.NewServer(append(srv.Options(), grpc.Creds(creds))...)
	srv.Attach(d.grpc)
	d.health = health.NewServer()
	d.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(d.grpc, d.health)
	reflection.Register(d.grpc)
	if d.lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		d.st.Close()
		return nil, fmt.Errorf("hanzod: listen %s: %w", cfg.Listen, err)
	}
	d.lis = srv.Listener(d.lis)
	if cfg.Metrics != "" {
		if d.mlis, err = net.Listen("tcp", cfg.Metrics); err != nil {
			d.lis.Close()
			d.st.Close()
			return nil, fmt.Errorf("hanzod: metrics listen %s: %w", cfg.Metrics, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/metrics", d.metrics)
		d.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	}
	ctx, d.cancel = context.WithCancel(context.WithoutCancel(ctx))
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.grpc.Serve(d.lis); err != nil {
			d.fail(err)
		}
	}()
	if d.http != nil {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := d.http.Serve(d.mlis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.fail(err)
			}
		}()
	}
	if d.ahttp != nil {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := d.ahttp.Serve(d.alis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.fail(err)
			}
		}()
	}
	d.wg.Add(3)
	go func() {
		defer d.wg.Done()
		d.loop(ctx)
	}()
	go func() {
		defer d.wg.Done()
		d.watchLease(ctx)
	}()
	go func() {
		defer d.wg.Done()
		d.judgeLoop(ctx)
	}()
	if d.pins != nil {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.pinLoop(ctx)
		}()
	}
	if d.mirror != nil {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.chainLoop(ctx)
		}()
	}
	log.Info("serving", "grpc", d.lis.Addr().String(), "tls", !cfg.Insecure && (cfg.TLSCert != "" || !isLoopback(cfg.Listen)), "metrics", cfg.Metrics)
	return d, nil
}

func (d *Daemon) fail(err error) {
	d.errOnce.Do(func() { d.err = err; d.cancel() })
}

// Addr is the gRPC listen address.
func (d *Daemon) Addr() string { return d.lis.Addr().String() }

// MetricsAddr is the metrics listen address ("" when disabled).
func (d *Daemon) MetricsAddr() string {
	if d.mlis == nil {
		return ""
	}
	return d.mlis.Addr().String()
}

// loop campaigns and ticks every TickInterval.
func (d *Daemon) loop(ctx context.Context) {
	t := time.NewTicker(d.cfg.TickInterval)
	defer t.Stop()
	for {
		ok, err := d.eng.Campaign(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("campaign failed", "err", err)
		}
		d.setServing(ok, "campaign")
		if ok {
			if _, err := d.eng.Do(ctx, state.Tick{}); err != nil && ctx.Err() == nil {
				d.log.Warn("tick failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setServing makes the health service say whether this replica leads,
// logging a change.
func (d *Daemon) setServing(ok bool, why string) {
	d.smu.Lock()
	defer d.smu.Unlock()
	d.setServingLocked(ok, why)
}

func (d *Daemon) setServingLocked(ok bool, why string) {
	if ok == d.serving {
		return
	}
	d.serving = ok
	d.log.Info("leadership changed", "leader", ok, "by", why)
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	d.health.SetServingStatus("", st)
}

// watchLease says NOT_SERVING as soon as the lease runs out unrenewed on
// this replica's clock, without waiting for the renewal in progress: a
// leader cut off from the store waits for its call to time out (several
// seconds) while a standby takes the lease as soon as it expires.
func (d *Daemon) watchLease(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.smu.Lock()
		if d.serving && !d.eng.Leading() {
			d.setServingLocked(false, "lease expired unrenewed")
		}
		d.smu.Unlock()
	}
}

// Close stops serving gracefully, gives up the lease and closes the store.
func (d *Daemon) Close() error {
	d.health.Shutdown()
	stopped := make(chan struct{})
	go func() { d.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		d.grpc.Stop()
	}
	for _, h := range []*http.Server{d.http, d.ahttp} {
		if h != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			h.Shutdown(ctx)
			cancel()
		}
	}
	d.cancel()
	d.wg.Wait()
	err := d.eng.Resign(context.Background())
	return errors.Join(d.err, err, d.st.Close(), d.arts.Close())
}

// Abandon stops the daemon the way kill -9 leaves a replica: connections
// cut, loops stopped, the store closed, and the lease NOT released — the
// other replicas take over only once it expires. For in-process failover
// tests and gym up --kill-leader-at; a process is killed instead.
func (d *Daemon) Abandon() {
	d.grpc.Stop()
	for _, h := range []*http.Server{d.http, d.ahttp} {
		if h != nil {
			h.Close()
		}
	}
	d.cancel()
	d.wg.Wait()
	d.st.Close()
	d.arts.Close()
}

// credentials picks TLS 1.3 (given or self-signed files) or plaintext.
func (d *Daemon) credentials() (credentials.TransportCredentials, error) {
	cfg := d.cfg
	if cfg.Insecure || (cfg.TLSCert == "" && isLoopback(cfg.Listen)) {
		return insecure.NewCredentials(), nil
	}
	certFile, keyFile := cfg.TLSCert, cfg.TLSKey
	if certFile == "" {
		certFile, keyFile = filepath.Join(cfg.DataDir, "tls-cert.pem"), filepath.Join(cfg.DataDir, "tls-key.pem")
		if _, err := os.Stat(certFile); errors.Is(err, os.ErrNotExist) {
			if err := selfSigned(certFile, keyFile); err != nil {
				return nil, err
			}
			d.log.Warn("generated a self-signed TLS certificate; clients must pin it or use --tls-cert", "cert", certFile)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("hanzod: TLS: %w", err)
	}
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}), nil
}

func selfSigned(certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "hanzod"}, DNSNames: []string{host, "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// metrics writes the Prometheus text exposition (listed in
// docs/orchestrator.md).
func (d *Daemon) metrics(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	gauge := func(name, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
	}
	leader := 0
	if d.eng.Leading() {
		leader = 1
	}
	gauge("gym_hanzod_leader", "1 when this replica holds the lease.")
	fmt.Fprintf(&b, "gym_hanzod_leader %d\n", leader)
	nodes := map[string]int{}
	jobs := map[string]int{}
	var applied uint64
	d.eng.View(func(m *state.Machine) {
		applied = m.Applied()
		for _, id := range m.Nodes() {
			n, _ := m.Node(id)
			nodes[string(n.Status)]++
		}
		for _, id := range m.Jobs() {
			j, _ := m.Job(id)
			jobs[string(j.State)]++
		}
	})
	gauge("gym_hanzod_log_applied_index", "Index of the last event applied.")
	fmt.Fprintf(&b, "gym_hanzod_log_applied_index %d\n", applied)
	gauge("gym_hanzod_nodes", "Registered nodes by status.")
	for _, s := range []state.NodeStatus{state.StatusActive, state.StatusFailed} {
		fmt.Fprintf(&b, "gym_hanzod_nodes{status=%q} %d\n", s, nodes[string(s)])
	}
	gauge("gym_hanzod_jobs", "Jobs by state.")
	for _, s := range []state.JobState{state.Pending, state.Provisioning, state.Running, state.Aggregating, state.Published, state.Failed} {
		fmt.Fprintf(&b, "gym_hanzod_jobs{state=%q} %d\n", s, jobs[string(s)])
	}
	d.judge.WriteMetrics(&b)
	d.srv.WriteMetrics(&b)
	d.pins.WriteMetrics(&b)   // zeros when pinning is off
	d.mirror.WriteMetrics(&b) // zeros without a chain
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write([]byte(b.String()))
}

// openJudge loads (or makes) hanzod's signing key, opens the artifact store
// and its server, and attaches the validator to the gRPC server.
func (d *Daemon) openJudge(srv *server.Server) error {
	cfg := d.cfg
	keyPath := filepath.Join(cfg.DataDir, "hanzod.key")
	if cfg.KeyFile != "" {
		keyPath = cfg.KeyFile
	}
	key, err := nodekey.Load(keyPath)
	if errors.Is(err, os.ErrNotExist) && cfg.KeyFile == "" {
		if key, err = nodekey.Generate(rand.Reader); err == nil {
			err = nodekey.Save(keyPath, key, false)
		}
	}
	if err != nil {
		return fmt.Errorf("hanzod: signing key %s: %w", keyPath, err)
	}
	d.key = key
	if d.arts, err = astore.Open(astore.DefaultConfig(filepath.Join(cfg.DataDir, "artifacts"))); err != nil {
		return fmt.Errorf("hanzod: artifact store: %w", err)
	}
	threads := max(cfg.Threads, 1)
	base := cfg.Base
	if base == nil {
		if base, err = basemodel.Builtin(); err != nil {
			return err
		}
	}
	// Bases jobs name by CID come from this store (published into it with
	// gym artifact publish --kind base-model --store DATA/artifacts, or
	// by gym up), exported under DATA/bases and verified there.
	arts := d.arts
	bases, err := basecache.New(filepath.Join(cfg.DataDir, "bases"), d.arts, func(_ context.Context, root cid.Cid) error {
		if _, err := arts.Artifact(root); err != nil {
			return fmt.Errorf("hanzod's artifact store has no complete artifact %s (publish the model directory into it: gym artifact publish --kind base-model --store %s DIR): %w",
				root, arts.Dir(), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	datasets, err := basecache.NewKind(artifact.KindDataset, filepath.Join(cfg.DataDir, "datasets"), d.arts, func(_ context.Context, root cid.Cid) error {
		if _, err := arts.Artifact(root); err != nil {
			return fmt.Errorf("hanzod's artifact store has no complete dataset %s (publish it into the store: gym artifact publish --kind dataset --store %s PATH): %w",
				root, arts.Dir(), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// With replicas the bytes a merge needs live next to the log in
	// Valkey, so a standby that takes over merges the epoch; the embedded
	// store's single replica keeps them in the data directory.
	var blobs blob.Store
	if vs, ok := d.st.(*valkey.Store); ok {
		blobs = vs.Blobs()
	}
	d.judge, err = judge.New(judge.Config{DataDir: cfg.DataDir, Blobs: blobs, Key: key, MinStake: cfg.OrchestratorStake, Store: d.arts, Threads: threads, Bases: bases, Datasets: datasets,
		EpochGrace: cfg.EpochGrace, BlobRetention: cfg.BlobRetention, EvalSize: cfg.EvalSize, ShardSize: cfg.ShardSize, Outliers: cfg.Outliers, NoScreening: cfg.NoScreening, Base: base, ModelWork: cfg.ModelWork, Log: d.log.With("part", "judge")}, d.eng)
	if err != nil {
		return err
	}
	srv.Judge = serverJudge{d.judge}
	srv.ModelShape = func(ctx context.Context, model string) (*hardware.Shape, error) { return modelShape(ctx, arts, model) }
	if err := d.judge.CheckStake(); err != nil {
		d.log.Warn("hanzod will not merge, publish or settle until its key is staked", "err", err)
	} else {
		d.log.Info("orchestrator account", "account", d.judge.Account(), "minimum_gym", cfg.OrchestratorStake/ledger.GYM)
	}
	srv.Instance = key.Public().(ed25519.PublicKey)
	if cfg.Artifacts == "" {
		return nil
	}
	pub := key.Public().(ed25519.PublicKey)
	// Registered nodes read every artifact; published checkpoints are
	// public (submitters fetch their results with any key, and a
	// checkpoint is meant for IPFS and the Hugging Face Hub anyway).
	allow := func(issuer ed25519.PublicKey, root cid.Cid) bool {
		if issuer.Equal(pub) {
			return true
		}
		if rec, err := d.arts.Artifact(root); err == nil && rec.Manifest != nil && rec.Manifest.Manifest.Kind == artifact.KindCheckpoint {
			return true
		}
		ok := false
		d.eng.View(func(m *state.Machine) { _, ok = m.Node(hex.EncodeToString(issuer)) })
		return ok
	}
	as, err := transfer.NewServer(transfer.ServerConfig{Key: key, Store: d.arts, Allow: allow, Logger: d.log.With("part", "artifacts"),
		NonceLog: filepath.Join(cfg.DataDir, "artifact-nonces.log")})
	if err != nil {
		return err
	}
	if d.alis, err = net.Listen("tcp", cfg.Artifacts); err != nil {
		return fmt.Errorf("hanzod: artifacts listen %s: %w", cfg.Artifacts, err)
	}
	d.ahttp = &http.Server{Handler: as, ReadHeaderTimeout: 5 * time.Second}
	adv := cfg.ArtifactsAdvertise
	if adv == "" {
		host, port, _ := net.SplitHostPort(d.alis.Addr().String())
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		adv = net.JoinHostPort(host, port)
	}
	srv.Artifacts = hex.EncodeToString(pub) + "@" + adv
	return nil
}

// ArtifactsAddr is the artifact server's listen address ("" when off).
func (d *Daemon) ArtifactsAddr() string {
	if d.alis == nil {
		return ""
	}
	return d.alis.Addr().String()
}

// ArtifactStore is hanzod's artifact store: the checkpoints it publishes
// and the base models jobs name by CID (published into it).
func (d *Daemon) ArtifactStore() *astore.Store { return d.arts }

// Judge is the daemon's validator (for tests and embedding).
func (d *Daemon) Judge() *judge.Judge { return d.judge }

// PublicKey is hanzod's signing key (publication and settlement records).
func (d *Daemon) PublicKey() ed25519.PublicKey { return d.key.Public().(ed25519.PublicKey) }

// judgeLoop runs the validator's epoch work on the leader, and collects
// the artifact store's garbage (blocks of interrupted fetches and
// publications; every complete artifact is kept) every 10 minutes.
func (d *Daemon) judgeLoop(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	lastGC := time.Now()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !d.eng.Leading() {
			continue
		}
		if time.Since(lastGC) > 10*time.Minute {
			lastGC = time.Now()
			if st, err := d.arts.GC(ctx, astore.GCPolicy{Now: lastGC}); err != nil {
				d.log.Warn("artifact store GC failed", "err", err)
			} else if st.Blocks > 0 {
				d.log.Info("artifact store GC", "blocks", st.Blocks, "bytes", st.Bytes)
			}
		}
		if err := d.judge.Step(ctx); err != nil && ctx.Err() == nil {
			// An unstaked key is said once, not four times a second.
			if msg := err.Error(); msg != lastErr {
				d.log.Warn("validator step failed", "err", err)
				lastErr = msg
			}
		} else {
			lastErr = ""
		}
	}
}

// Pins is the IPFS pin queue (nil without Config.IPFS).
func (d *Daemon) Pins() *pin.Queue { return d.pins }

// Engine is the daemon's engine (for embedding hanzod in another process,
// as gym up does).
func (d *Daemon) Engine() *engine.Engine { return d.eng }

// serverJudge is the judge as the server sees it: its verdicts in the
// server's type (RingEvidence is the judge's own).
type serverJudge struct{ *judge.Judge }

func (j serverJudge) Preflight(ctx context.Context, u server.Upload) (server.DeltaVerdict, bool, error) {
	v, proceed, err := j.Judge.Preflight(ctx, judge.Upload(u))
	return server.DeltaVerdict(v), proceed, err
}

func (j serverJudge) Submit(ctx context.Context, u server.Upload, file, traces []byte) (server.DeltaVerdict, error) {
	v, err := j.Judge.SubmitUpload(ctx, judge.Upload(u), file, traces)
	return server.DeltaVerdict(v), err
}

// openPins opens the IPFS pin queue when cfg.IPFS is set and lets the
// server report it in job status.
func (d *Daemon) openPins(srv *server.Server) error {
	if d.cfg.IPFS == "" {
		return nil
	}
	var err error
	if d.ipfs, err = pin.NewClient(d.cfg.IPFS, nil); err != nil {
		return err
	}
	pc := pin.DefaultConfig(filepath.Join(d.cfg.DataDir, "ipfs-pins.json"))
	if d.cfg.PinMinBackoff > 0 {
		pc.MinBackoff = d.cfg.PinMinBackoff
	}
	if d.cfg.PinMaxBackoff > 0 {
		pc.MaxBackoff = d.cfg.PinMaxBackoff
	}
	pc.MaxBackoff = max(pc.MaxBackoff, pc.MinBackoff)
	if d.pins, err = pin.Open(pc); err != nil {
		return fmt.Errorf("hanzod: %w", err)
	}
	srv.Pins = func(c string) (*pb.Pin, bool) {
		e, ok := d.pins.Get(c)
		if !ok {
			return nil, false
		}
		p := &pb.Pin{Cid: e.Root, State: e.State, Attempts: int32(e.Attempts), Error: e.LastError}
		if !e.Next.IsZero() {
			p.NextMs = e.Next.UnixMilli()
		}
		return p, true
	}
	return nil
}

// pinLoop feeds the pin queue with every complete artifact of the store
// (the judge publishes each checkpoint there before it logs the
// publication, so nothing published escapes it, including what a crash
// left unlogged) and tries what is due. Pinning is idempotent at the
// node, so every replica pins what its own store holds.
func (d *Daemon) pinLoop(ctx context.Context) {
	t := time.NewTicker(min(d.cfg.TickInterval, time.Second))
	defer t.Stop()
	d.log.Info("pinning artifacts on IPFS", "rpc", d.ipfs.String())
	for {
		for _, rec := range d.arts.List() {
			root, err := cid.Decode(rec.Root)
			if err != nil {
				continue
			}
			var kind, name string
			var version uint64
			if rec.Manifest != nil {
				m := rec.Manifest.Manifest
				kind, name, version = string(m.Kind), m.Name, m.Version
			}
			if added, err := d.pins.Add(root, kind, name, version); err != nil {
				d.log.Error("IPFS pin queue", "err", err)
			} else if added {
				d.log.Info("queued for IPFS pinning", "cid", rec.Root, "kind", kind, "name", name, "version", version)
			}
		}
		before := map[string]pin.Entry{}
		for _, e := range d.pins.List() {
			before[e.Root] = e
		}
		if _, err := d.pins.Step(ctx, d.ipfs, d.arts); err != nil {
			d.log.Error("IPFS pin queue", "err", err)
		}
		for _, e := range d.pins.List() {
			if b := before[e.Root]; b.Attempts == e.Attempts {
				continue
			}
			if e.State == pin.Pinned {
				d.log.Info("pinned on IPFS", "cid", e.Root, "name", e.Name, "version", e.Version, "attempts", e.Attempts, "bytes", e.Bytes)
			} else {
				d.log.Warn("IPFS pin failed; will retry", "cid", e.Root, "name", e.Name, "attempts", e.Attempts, "next", e.Next, "err", e.LastError)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// openChain starts the chain mirror and the on-chain stake check of
// registrations when cfg.Chain is set.
func (d *Daemon) openChain(srv *server.Server) error {
	c := d.cfg.Chain
	if c == nil {
		return nil
	}
	age := c.StakeMaxAge
	if age <= 0 {
		age = time.Minute
	}
	accounts := &chainsync.Accounts{Static: c.Accounts, Bound: c.Bound, MaxAge: age}
	var err error
	d.mirror, err = chainsync.Open(chainsync.Config{Book: c.Book, Read: d.eng.Read, Lookup: accounts.Lookup,
		CursorFile: filepath.Join(d.cfg.DataDir, "chain-cursor.json"), Log: d.log})
	if err != nil {
		return fmt.Errorf("hanzod: %w", err)
	}
	stakes := &chainsync.StakeCache{Staked: c.Staked, Lookup: accounts.Lookup, MaxAge: age}
	srv.StakeCheck = stakes.Check
	return nil
}

// chainLoop mirrors the log onto the chain while this replica leads (only
// the leader sends transactions); a failed step is retried each tick, so
// an RPC outage leaves the events queued (gym_hanzod_chain_pending_events)
// until the endpoint is back.
func (d *Daemon) chainLoop(ctx context.Context) {
	t := time.NewTicker(min(d.cfg.TickInterval, time.Second))
	defer t.Stop()
	d.log.Info("mirroring the ledger onto the chain")
	failing := false
	for {
		if d.eng.Leading() {
			for {
				n, err := d.mirror.Step(ctx, 256)
				if err != nil {
					if !failing {
						d.log.Warn("chain mirror: will retry", "err", err, "pending", d.mirror.Status().Pending)
					}
					failing = true
					break
				}
				if failing {
					d.log.Info("chain mirror: caught up again", "pending", d.mirror.Status().Pending)
				}
				failing = false
				if n < 256 {
					break
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ChainStatus is the chain mirror's progress (false without a chain).
func (d *Daemon) ChainStatus() (chainsync.Status, bool) {
	if d.mirror == nil {
		return chainsync.Status{}, false
	}
	return d.mirror.Status(), true
}
