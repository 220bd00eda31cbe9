// Package chainsync mirrors hanzod's ledger decisions onto a ledger.Book
// kept outside it (the chain ledger of orchestrator/ledger/evm): it follows
// the event log and, for every epoch's rewards, slash, checkpoint
// publication and job membership, sends the matching transaction, once.
// It also checks a node's on-chain stake before hanzod admits it, with a
// cache of bounded age.
//
// Idempotency comes from the chain's own records, so a restart, a change
// of leader or an RPC outage never pays or slashes twice: a payment or
// publication the chain already holds is refused with ErrAlreadyPaid or
// ErrAlreadyPublished (and counts as done), and a slash whose evidence hash
// the account's on-chain record already holds is skipped. The cursor (the
// last event mirrored, and the accounts locked per job) is a file; a
// failed step leaves it where it was and is retried: the pending events
// are the queue, reported in Status.
package chainsync

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store"
)

// Config is what a Mirror needs.
type Config struct {
	Book ledger.Book
	// Read reads the event log (engine.Engine.Read).
	Read func(ctx context.Context, from uint64, max int) ([]store.Record, uint64, error)
	// Account maps a node id (or ledger account) to its Book account;
	// false: it has none, and what it is owed on chain is skipped (logged,
	// counted in Status.Unbound).
	Account func(node string) (string, bool)
	// Lookup, when set, replaces Account: it may ask the chain (a node's
	// own binding, Accounts.Lookup), and its error fails the step, which
	// is retried (the event stays queued).
	Lookup func(ctx context.Context, node string) (string, bool, error)
	// CursorFile keeps the progress across restarts.
	CursorFile string
	Log        *slog.Logger
}

// Status is what the mirror has done and has left.
type Status struct {
	Cursor    uint64 `json:"cursor"`  // last event mirrored
	Last      uint64 `json:"last"`    // last event of the log
	Pending   uint64 `json:"pending"` // events not mirrored yet (the queue)
	Failures  uint64 `json:"failures"`
	LastError string `json:"last_error,omitempty"`
	Paid      uint64 `json:"paid"`
	Slashed   uint64 `json:"slashed"`
	Published uint64 `json:"published"`
	Locked    uint64 `json:"locked"`
	Unbound   uint64 `json:"unbound"`
}

type cursor struct {
	Index  uint64              `json:"index"`
	Locked map[string][]string `json:"locked"` // job → accounts locked on chain
}

// Mirror follows the log onto the Book.
type Mirror struct {
	cfg Config
	mu  sync.Mutex
	cur cursor
	st  Status
}

// maxCursorFile bounds the cursor file read.
const maxCursorFile = 64 << 20

// Open reads the cursor file (absent: from the start).
func Open(cfg Config) (*Mirror, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := &Mirror{cfg: cfg, cur: cursor{Locked: map[string][]string{}}}
	b, err := os.ReadFile(cfg.CursorFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	case len(b) > maxCursorFile:
		return nil, fmt.Errorf("chainsync: cursor file of %d bytes", len(b))
	default:
		if err := json.Unmarshal(b, &m.cur); err != nil {
			return nil, fmt.Errorf("chainsync: cursor file %s: %w", cfg.CursorFile, err)
		}
		if m.cur.Locked == nil {
			m.cur.Locked = map[string][]string{}
		}
	}
	m.st.Cursor = m.cur.Index
	return m, nil
}

// Status reports the mirror's progress.
func (m *Mirror) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

func (m *Mirror) save() error {
	b, err := json.Marshal(m.cur)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(m.cfg.CursorFile, 0o600, true, b)
}

// Step mirrors the events after the cursor, up to max of them, and saves
// the cursor after each; it stops at the first failure (retried by the
// next Step). It returns how many events it mirrored.
func (m *Mirror) Step(ctx context.Context, max int) (int, error) {
	recs, last, err := m.cfg.Read(ctx, m.cur.Index+1, max)
	m.mu.Lock()
	m.st.Last = max64(last, m.st.Last)
	m.mu.Unlock()
	if err != nil {
		return 0, m.failed(err)
	}
	n := 0
	for _, r := range recs {
		ev, err := state.DecodeEvent(r.Data)
		if err != nil {
			return n, m.failed(fmt.Errorf("chainsync: event %d: %w", r.Index, err))
		}
		if err := m.apply(ctx, ev); err != nil {
			return n, m.failed(fmt.Errorf("chainsync: event %d (%s): %w", r.Index, ev.Body.Kind(), err))
		}
		m.cur.Index = r.Index
		if err := m.save(); err != nil {
			return n, m.failed(err)
		}
		n++
		m.mu.Lock()
		m.st.Cursor = r.Index
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.st.Pending = m.st.Last - min(m.st.Last, m.st.Cursor)
	if n > 0 || len(recs) == 0 {
		m.st.LastError = ""
	}
	m.mu.Unlock()
	return n, nil
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

func (m *Mirror) failed(err error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.Failures++
	m.st.LastError = err.Error()
	m.st.Pending = m.st.Last - min(m.st.Last, m.st.Cursor)
	return err
}

func (m *Mirror) count(f func(*Status)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(&m.st)
}

func (m *Mirror) account(ctx context.Context, node string) (string, bool, error) {
	var (
		a   string
		ok  bool
		err error
	)
	if m.cfg.Lookup != nil {
		a, ok, err = m.cfg.Lookup(ctx, node)
	} else {
		a, ok = m.cfg.Account(node)
	}
	if err != nil {
		return "", false, fmt.Errorf("chainsync: chain account of %s: %w", node, err)
	}
	if !ok {
		m.cfg.Log.Warn("chain: node has no chain account; skipped", "node", node)
		m.count(func(s *Status) { s.Unbound++ })
	}
	return a, ok, nil
}

func (m *Mirror) apply(ctx context.Context, ev state.Event) error {
	switch e := ev.Body.(type) {
	case state.RewardsPaid:
		var payouts []ledger.Payout
		for _, p := range e.Payouts {
			a, ok, err := m.account(ctx, p.ID)
			if err != nil {
				return err
			}
			if ok {
				payouts = append(payouts, ledger.Payout{ID: a, Amount: p.Amount})
			}
		}
		err := m.cfg.Book.PayEpoch(ctx, e.Job, uint64(e.Epoch), payouts)
		if errors.Is(err, ledger.ErrAlreadyPaid) {
			return nil
		}
		if err == nil {
			m.count(func(s *Status) { s.Paid++ })
			m.cfg.Log.Info("chain: epoch paid", "job", e.Job, "epoch", e.Epoch, "workers", len(payouts), "total", e.Total)
		}
		return err
	case state.Slashed:
		a, ok, err := m.account(ctx, e.Account)
		if err != nil || !ok {
			return err
		}
		pos, err := m.cfg.Book.Position(ctx, a)
		if err != nil {
			return err
		}
		h := ledger.Keccak256(e.Evidence)
		for _, s := range pos.Slashes {
			if s.EvidenceHash == h {
				return nil // done before a restart
			}
		}
		if pos.Banned {
			return nil
		}
		rec, err := m.cfg.Book.Slash(ctx, a, e.Evidence)
		if errors.Is(err, ledger.ErrNothing) {
			m.cfg.Log.Warn("chain: slashed node has no stake on chain", "node", e.Account)
			return nil
		}
		if err == nil {
			m.count(func(s *Status) { s.Slashed++ })
			m.cfg.Log.Info("chain: slashed", "node", e.Account, "offence", rec.Offence, "pct", rec.Pct, "amount", rec.Amount,
				"evidence_keccak", hex.EncodeToString(rec.EvidenceHash[:]))
		}
		return err
	case state.CheckpointPublished:
		if e.Record == "" {
			return nil // published by the operator without a signed record
		}
		p, err := Publication(e)
		if err != nil {
			m.cfg.Log.Warn("chain: publication record not recorded", "job", e.Job, "epoch", e.Epoch, "err", err)
			return nil
		}
		err = m.cfg.Book.Publish(ctx, p)
		if errors.Is(err, ledger.ErrAlreadyPublished) {
			return nil
		}
		if err == nil {
			m.count(func(s *Status) { s.Published++ })
			m.cfg.Log.Info("chain: publication recorded", "job", e.Job, "epoch", e.Epoch, "cid", e.CID)
		}
		return err
	case state.MemberChanged:
		if !e.Added {
			return nil
		}
		return m.lock(ctx, e.Job, []string{e.Node})
	case state.JobTransitioned:
		if len(e.Members) > 0 {
			if err := m.lock(ctx, e.Job, e.Members); err != nil {
				return err
			}
		}
		if e.To == state.Failed {
			return m.unlock(ctx, e.Job)
		}
	case state.JobSettled:
		return m.unlock(ctx, e.Job)
	}
	return nil
}

func (m *Mirror) lock(ctx context.Context, job string, nodes []string) error {
	have := map[string]bool{}
	for _, a := range m.cur.Locked[job] {
		have[a] = true
	}
	var add []string
	for _, n := range nodes {
		a, ok, err := m.account(ctx, n)
		if err != nil {
			return err
		}
		if ok && !have[a] {
			add = append(add, a)
			have[a] = true
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := m.cfg.Book.Lock(ctx, job, add); err != nil {
		return err
	}
	all := append(m.cur.Locked[job], add...)
	sort.Strings(all)
	m.cur.Locked[job] = all
	m.count(func(s *Status) { s.Locked += uint64(len(add)) })
	return nil
}

func (m *Mirror) unlock(ctx context.Context, job string) error {
	if len(m.cur.Locked[job]) == 0 {
		return nil
	}
	if err := m.cfg.Book.Unlock(ctx, job, m.cur.Locked[job]); err != nil {
		return err
	}
	delete(m.cur.Locked, job)
	return nil
}

// publicationRecord is what Publication reads of the judge's signed
// publication record (canonical JSON; other fields are ignored here).
type publicationRecord struct {
	Job        string `json:"job"`
	Epoch      uint64 `json:"epoch"`
	CID        string `json:"cid"`
	WeightsCID string `json:"weights_cid"`
	HubRepo    string `json:"hub_repo"`
	Hanzod     string `json:"hanzod"` // hex Ed25519 public key
}

// maxRecord bounds a publication record parsed.
const maxRecord = 64 << 10

// Publication turns a CheckpointPublished event into the chain's record:
// the signer is the record's hanzod key and the signature is hanzod's over
// the record (judge.RecordMessage("publication", record)).
func Publication(e state.CheckpointPublished) (ledger.Publication, error) {
	if len(e.Record) > maxRecord {
		return ledger.Publication{}, fmt.Errorf("record of %d bytes", len(e.Record))
	}
	var r publicationRecord
	if err := json.Unmarshal([]byte(e.Record), &r); err != nil {
		return ledger.Publication{}, err
	}
	if r.Job != e.Job || r.Epoch != uint64(e.Epoch) || r.CID != e.CID {
		return ledger.Publication{}, fmt.Errorf("record names %s epoch %d %s, the event %s epoch %d %s", r.Job, r.Epoch, r.CID, e.Job, e.Epoch, e.CID)
	}
	key, err := hex.DecodeString(r.Hanzod)
	if err != nil {
		return ledger.Publication{}, fmt.Errorf("record's hanzod key: %w", err)
	}
	sig, err := hex.DecodeString(e.Signature)
	if err != nil {
		return ledger.Publication{}, fmt.Errorf("signature: %w", err)
	}
	p := ledger.Publication{Job: e.Job, Epoch: uint64(e.Epoch), CID: e.CID, WeightsCID: r.WeightsCID, HubRepo: r.HubRepo, Signer: key, Signature: sig}
	return p, p.Check()
}

// Staked says whether a node's chain account is staked for a role.
type Staked func(ctx context.Context, account string, role ledger.Role) (bool, error)

// StakeCache checks nodes' on-chain stake with answers cached for at most
// MaxAge (a refusal is not cached: a node that just staked is let in at
// once).
type StakeCache struct {
	Staked  Staked
	Account func(node string) (string, bool)
	// Lookup, when set, replaces Account (Accounts.Lookup).
	Lookup func(ctx context.Context, node string) (string, bool, error)
	MaxAge time.Duration
	Now    func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time
}

// ErrNotStaked is StakeCache.Check's refusal.
var ErrNotStaked = errors.New("chainsync: node not staked on chain")

// Check returns nil when node's account holds at least the node minimum
// staked as a node and is not banned.
func (c *StakeCache) Check(ctx context.Context, node string) error {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	c.mu.Lock()
	at, ok := c.seen[node]
	c.mu.Unlock()
	if ok && now().Sub(at) < c.MaxAge {
		return nil
	}
	var (
		a   string
		err error
	)
	if c.Lookup != nil {
		a, ok, err = c.Lookup(ctx, node)
		if err != nil {
			return fmt.Errorf("chainsync: chain account of %s: %w", node, err)
		}
	} else {
		a, ok = c.Account(node)
	}
	if !ok {
		return fmt.Errorf("%w: %s has no chain account (bind one: gym chain bind; or the operator's --chain-accounts)", ErrNotStaked, node)
	}
	staked, err := c.Staked(ctx, a, ledger.RoleNode)
	if err != nil {
		return fmt.Errorf("chainsync: stake of %s: %w", node, err)
	}
	if !staked {
		return fmt.Errorf("%w: %s (account %s) has less than the node minimum staked as a node, or is banned", ErrNotStaked, node, a)
	}
	c.mu.Lock()
	if c.seen == nil {
		c.seen = map[string]time.Time{}
	}
	c.seen[node] = now()
	c.mu.Unlock()
	return nil
}

// WriteMetrics writes the mirror's Prometheus metrics (docs/metrics.md);
// zeros for a nil mirror (hanzod without a chain).
func (m *Mirror) WriteMetrics(w io.Writer) {
	var st Status
	if m != nil {
		st = m.Status()
	}
	fmt.Fprintf(w, "# HELP gym_hanzod_chain_pending_events Events of the log not mirrored onto the chain yet.\n# TYPE gym_hanzod_chain_pending_events gauge\ngym_hanzod_chain_pending_events %d\n", st.Pending)
	fmt.Fprintf(w, "# HELP gym_hanzod_chain_failures_total Failed chain mirror steps (retried).\n# TYPE gym_hanzod_chain_failures_total counter\ngym_hanzod_chain_failures_total %d\n", st.Failures)
	fmt.Fprintf(w, "# HELP gym_hanzod_chain_operations_total Chain operations sent by this process.\n# TYPE gym_hanzod_chain_operations_total counter\n")
	for _, k := range []struct {
		kind string
		n    uint64
	}{{"paid", st.Paid}, {"slashed", st.Slashed}, {"published", st.Published}, {"locked", st.Locked}} {
		fmt.Fprintf(w, "gym_hanzod_chain_operations_total{kind=%q} %d\n", k.kind, k.n)
	}
}

// maxAccountsFile bounds the accounts file.
const maxAccountsFile = 16 << 20

// ParseAccounts reads the accounts file: a JSON object from node ids to
// their chain accounts (0x-addresses), strictly (each key at most 128
// bytes, each value 0x and 40 hex digits).
func ParseAccounts(b []byte) (map[string]string, error) {
	if len(b) > maxAccountsFile {
		return nil, fmt.Errorf("chainsync: accounts file of %d bytes (at most %d)", len(b), maxAccountsFile)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("chainsync: accounts file: %w", err)
	}
	if m == nil {
		return nil, errors.New("chainsync: accounts file is not an object")
	}
	for k, v := range m {
		if k == "" || len(k) > 128 {
			return nil, fmt.Errorf("chainsync: accounts file: node id %q", k)
		}
		if len(v) != 42 || v[:2] != "0x" {
			return nil, fmt.Errorf("chainsync: accounts file: %q maps to %q, not a 0x-address", k, v)
		}
		if _, err := hex.DecodeString(v[2:]); err != nil {
			return nil, fmt.Errorf("chainsync: accounts file: %q: %w", k, err)
		}
	}
	return m, nil
}
