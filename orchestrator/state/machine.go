// Package state is the orchestrator's pure, event-sourced state machine:
// node registry and liveness, eligibility, the job state machine and its
// scheduler, ring construction and repair, and the stake ledger.
//
// A Command is validated by Step into Events, which Step applies and
// returns; the caller persists them before acting on them. The state is a
// pure function of the event log: Apply replays a log into the same state
// on any machine, and Marshal serialises it canonically so two replicas can
// compare bytes. Nothing here reads a clock, starts a goroutine or does
// I/O: time arrives as the now argument of Step (unix milliseconds) and is
// recorded in every event.
//
// Two clocks are kept apart. Calendar rules (deadlines, unbonding,
// penalties) use the wall time carried by events. Liveness (heartbeat
// timeouts, uptime) uses observed time: the sum of the gaps between
// consecutive events, each capped at Params.MaxStepMs, so a wall-clock jump
// or an orchestrator outage never counts as node silence.
package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/ringplan"
)

// Sentinel errors. A refused command changes nothing. The API maps them to
// gRPC codes: ErrInvalid → InvalidArgument, ErrUnauthenticated →
// Unauthenticated, ErrPermission → PermissionDenied, ErrPrecondition →
// FailedPrecondition, ErrExhausted → ResourceExhausted, ErrNotFound →
// NotFound.
var (
	ErrInvalid         = errors.New("state: invalid request")
	ErrInvalidKey      = fmt.Errorf("%w: bad public key", ErrInvalid)
	ErrUnauthenticated = errors.New("state: unauthenticated")
	ErrStale           = fmt.Errorf("%w: stale timestamp", ErrUnauthenticated)
	ErrReplay          = fmt.Errorf("%w: replayed sequence number", ErrUnauthenticated)
	ErrPermission      = errors.New("state: permission denied")
	ErrPrecondition    = errors.New("state: failed precondition")
	ErrExhausted       = errors.New("state: resource exhausted")
	ErrNotFound        = errors.New("state: not found")
	ErrCorrupt         = errors.New("state: corrupt log")
)

// Config holds the rules. Fields that Apply depends on are copied into the
// Genesis event, so changing them later does not change how an existing
// log replays.
type Config struct {
	HeartbeatInterval time.Duration // nodes heartbeat this often (10 s)
	FailAfter         time.Duration // silent this long (observed) → failed (30 s)
	MinHeartbeatGap   time.Duration // heartbeats closer than this are refused (1 s)
	MaxStep           time.Duration // cap on observed time per event (5 s)
	MaxSkew           time.Duration // node timestamp vs orchestrator clock (60 s)
	UptimeWindow      time.Duration // uptime is measured over this (24 h)
	MinUptimeBP       int           // eligibility: uptime in basis points (9500)
	MinStake          ledger.Amount // eligibility: bonded stake (10,000 GYM)
	// MinValidatorStake is a validator's bonded stake (25,000 GYM);
	// CheckTimeout how long a validator has for a check (10 min).
	MinValidatorStake ledger.Amount
	CheckTimeout      time.Duration
	PenaltyPeriod     time.Duration // a slash makes a node ineligible this long (7 days)
	UnbondingPeriod   time.Duration // unbonded stake waits this long (14 days)
	AgingTau          time.Duration // priority aging constant τ (10 min)
	ProvisionTimeout  time.Duration // members must report bandwidth within this (60 s)
	MaxNodes          int           // registry bound
	MaxJobs           int           // bound on non-terminal jobs
	// Signed submissions (SubmitJob.By set): at most MaxOpenPerSubmitter
	// non-terminal jobs per submitter (8), and utility at most
	// 1 + bonded stake / UtilityUnit (1,000 GYM).
	MaxOpenPerSubmitter int
	UtilityUnit         ledger.Amount
	// Rewards (docs/threat-model.md, "Economics"): an epoch pays
	// RewardPerSample (0.025 GYM) for every sample its accepted deltas
	// that survived the checks trained, at most EpochReward (100 GYM); 0
	// for either pays nothing. A signed submitter escrows what its job
	// can pay at submission (Machine.JobEscrow), the operator's jobs are
	// paid by the treasury. MinEpochSamples (128) is the least a worker's
	// epoch may train (jobspec.Spec.EpochSamples); 0: no minimum. Step
	// alone reads them: what they decide is recorded in the events.
	EpochReward     ledger.Amount
	RewardPerSample ledger.Amount
	MinEpochSamples uint64
	Ring            ringplan.Config
	// Verifier checks hardware reports; nil means NoVerifier.
	Verifier Verifier
	// MaxSeqLead bounds how far a signed request's sequence number may be
	// ahead of the orchestrator's clock: at most (now + MaxSkew) in
	// nanoseconds plus MaxSeqLead (1 h). Node clients take sequence
	// numbers from hanzod's clock in nanoseconds (nodeclient), so an
	// honest node stays far below; a number far ahead (2^64 - 1) would
	// lock its key out for good, and is refused.
	MaxSeqLead time.Duration
	// Registration that costs something (a key is "staked" when its
	// bonded stake reaches its role's minimum: MinStake, or
	// MinValidatorStake for a validator). An unstaked key's hardware
	// report is at most MaxUnstakedReport bytes (4 KiB; 64 KiB once
	// staked); at most MaxUnstakedNodes (10,000) unstaked nodes are
	// registered at once, so unstaked keys never fill the registry
	// (MaxNodes) for staked ones; and an unstaked node in no job is
	// expired from the registry UnstakedTTL (1 h, observed time) after it
	// first registered (node_expired; it may register again).
	MaxUnstakedReport int
	MaxUnstakedNodes  int
	UnstakedTTL       time.Duration
}

// DefaultConfig returns the rules of SPEC.md.
func DefaultConfig() Config {
	return Config{
		HeartbeatInterval:   10 * time.Second,
		FailAfter:           30 * time.Second,
		MinHeartbeatGap:     time.Second,
		MaxStep:             5 * time.Second,
		MaxSkew:             60 * time.Second,
		UptimeWindow:        24 * time.Hour,
		MinUptimeBP:         9500,
		MinStake:            10_000 * ledger.GYM,
		MinValidatorStake:   25_000 * ledger.GYM,
		CheckTimeout:        10 * time.Minute,
		PenaltyPeriod:       7 * 24 * time.Hour,
		UnbondingPeriod:     14 * 24 * time.Hour,
		AgingTau:            10 * time.Minute,
		ProvisionTimeout:    60 * time.Second,
		MaxNodes:            100_000,
		MaxJobs:             10_000,
		MaxOpenPerSubmitter: 8,
		UtilityUnit:         1_000 * ledger.GYM,
		EpochReward:         100 * ledger.GYM,
		RewardPerSample:     ledger.GYM / 40,
		MinEpochSamples:     128,
		Ring:                ringplan.DefaultConfig(),
		MaxSeqLead:          time.Hour,
		MaxUnstakedReport:   4 << 10,
		MaxUnstakedNodes:    10_000,
		UnstakedTTL:         time.Hour,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.HeartbeatInterval <= 0:
		return fmt.Errorf("%w: HeartbeatInterval must be positive", ErrInvalid)
	case c.FailAfter < c.HeartbeatInterval:
		return fmt.Errorf("%w: FailAfter %v is shorter than HeartbeatInterval %v", ErrInvalid, c.FailAfter, c.HeartbeatInterval)
	case c.MinHeartbeatGap < 0 || c.MinHeartbeatGap >= c.HeartbeatInterval:
		return fmt.Errorf("%w: MinHeartbeatGap must be in [0, HeartbeatInterval)", ErrInvalid)
	case c.MaxStep < time.Millisecond || c.MaxStep >= c.FailAfter:
		return fmt.Errorf("%w: MaxStep must be in [1ms, FailAfter)", ErrInvalid)
	case c.MaxSkew <= 0:
		return fmt.Errorf("%w: MaxSkew must be positive", ErrInvalid)
	case c.UptimeWindow < time.Minute:
		return fmt.Errorf("%w: UptimeWindow must be at least a minute", ErrInvalid)
	case c.MinUptimeBP < 0 || c.MinUptimeBP > 10_000:
		return fmt.Errorf("%w: MinUptimeBP must be in 0..10000", ErrInvalid)
	case c.PenaltyPeriod < 0 || c.UnbondingPeriod < 0:
		return fmt.Errorf("%w: negative period", ErrInvalid)
	case c.AgingTau <= 0:
		return fmt.Errorf("%w: AgingTau must be positive", ErrInvalid)
	case c.ProvisionTimeout <= 0:
		return fmt.Errorf("%w: ProvisionTimeout must be positive", ErrInvalid)
	case c.CheckTimeout <= 0:
		return fmt.Errorf("%w: CheckTimeout must be positive", ErrInvalid)
	case c.MaxNodes < 1 || c.MaxJobs < 1:
		return fmt.Errorf("%w: MaxNodes and MaxJobs must be positive", ErrInvalid)
	case c.MaxOpenPerSubmitter < 1 || c.UtilityUnit < 1:
		return fmt.Errorf("%w: MaxOpenPerSubmitter and UtilityUnit must be positive", ErrInvalid)
	case c.MaxSeqLead < 0:
		return fmt.Errorf("%w: MaxSeqLead must not be negative", ErrInvalid)
	case c.MaxUnstakedReport < 0 || c.MaxUnstakedReport > maxReport:
		return fmt.Errorf("%w: MaxUnstakedReport must be in 0..%d", ErrInvalid, maxReport)
	case c.MaxUnstakedNodes < 0 || c.MaxUnstakedNodes > c.MaxNodes:
		return fmt.Errorf("%w: MaxUnstakedNodes must be in 0..MaxNodes (%d)", ErrInvalid, c.MaxNodes)
	case c.UnstakedTTL <= 0:
		return fmt.Errorf("%w: UnstakedTTL must be positive", ErrInvalid)
	}
	return c.Ring.Validate()
}

func (c Config) params() Params {
	return Params{MaxStepMs: c.MaxStep.Milliseconds(), UptimeWindowMs: c.UptimeWindow.Milliseconds()}
}

// Machine is the orchestrator state. It is not safe for concurrent use.
type Machine struct {
	cfg      Config
	params   Params
	started  bool
	applied  uint64
	lastAt   int64
	observed int64
	nextJob  uint64
	nodes    map[string]*Node
	ids      []string // node ids, sorted
	jobs     map[string]*Job
	ledger   *ledger.Ledger
	// submitSeq is each signing submitter's last sequence number;
	// requests the ledger request ids carried out, oldest first
	// (at most maxRequests).
	submitSeq map[string]uint64
	requests  []LedgerRequest
	requested map[string]int // id → index in requests + dropped
	dropped   int            // request ids forgotten
	out       []Event        // events emitted by the current Step
}

// New returns an empty machine: replay a log into it with Apply, or start a
// new log with Start.
func New(cfg Config) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Verifier == nil {
		cfg.Verifier = NoVerifier{}
	}
	return &Machine{cfg: cfg, nodes: map[string]*Node{}, jobs: map[string]*Job{}, ledger: ledger.New(),
		submitSeq: map[string]uint64{}, requested: map[string]int{}}, nil
}

// Applied is the index of the last applied event.
func (m *Machine) Applied() uint64 { return m.applied }

// Observed is the observed time in milliseconds since genesis.
func (m *Machine) Observed() int64 { return m.observed }

// Start returns the Genesis event of a new log (applied), or nothing when
// the log has already started.
func (m *Machine) Start(now int64) []Event {
	if m.started {
		return nil
	}
	m.out = nil
	m.emit(now, Genesis{Params: m.cfg.params()})
	return m.take()
}

// Step validates cmd at wall time now into events, applies them and
// returns them for the caller to persist. On error nothing changed.
func (m *Machine) Step(now int64, cmd Command) ([]Event, error) {
	if !m.started {
		return nil, fmt.Errorf("%w: the log has not started", ErrPrecondition)
	}
	m.out = nil
	var err error
	switch c := cmd.(type) {
	case Register:
		err = m.register(now, c)
	case Heartbeat:
		err = m.heartbeat(now, c)
	case ReportBandwidth:
		err = m.reportBandwidth(now, c)
	case Tick:
		m.tick(now)
	case SubmitJob:
		err = m.submit(now, c)
	case EndEpoch:
		err = m.endEpoch(now, c)
	case PublishCheckpoint:
		err = m.publish(now, c)
	case FailJob:
		err = m.failJob(now, c)
	case Deposit, Bond, Unbond, Withdraw, Slash, PayRewards:
		err = m.ledgerCommand(now, c)
	case ReportSuspect:
		err = m.reportSuspect(now, c)
	case RefuseJob:
		err = m.refuseJob(now, c)
	case JudgeDelta:
		err = m.judge(now, c)
	case Eject:
		err = m.eject(now, c)
	case Settle:
		err = m.settle(now, c)
	case AssignCheck:
		err = m.assignCheck(now, c)
	case SubmitVerdict:
		err = m.submitVerdict(now, c)
	case WatchNodes:
		err = m.watchNodes(now, c)
	case SetRebase:
		err = m.setRebase(now, c)
	case PublishRebase:
		err = m.publishRebase(now, c)
	default:
		err = fmt.Errorf("%w: unknown command %T", ErrInvalid, cmd)
	}
	if err != nil {
		if len(m.out) > 0 {
			panic(fmt.Sprintf("state: %T emitted events and then failed: %v", cmd, err))
		}
		return nil, err
	}
	return m.take(), nil
}

func (m *Machine) take() []Event {
	out := m.out
	m.out = nil
	return out
}

// emit applies a decided event and records it for the caller. A decided
// event that does not apply is a bug in the deciding code.
func (m *Machine) emit(now int64, b Body) {
	ev := Event{Index: m.applied + 1, At: now, Body: b}
	if err := m.Apply(ev); err != nil {
		panic(fmt.Sprintf("state: decided event does not apply: %v", err))
	}
	m.out = append(m.out, ev)
}

// Apply applies one event of the log. It refuses an event out of sequence
// or one that contradicts the state (a corrupt or foreign log); on error
// the machine must be discarded.
func (m *Machine) Apply(ev Event) error {
	if ev.Index != m.applied+1 {
		return fmt.Errorf("%w: event %d after %d", ErrCorrupt, ev.Index, m.applied)
	}
	if _, ok := ev.Body.(Genesis); ok != !m.started {
		return fmt.Errorf("%w: genesis must be the first event and only the first (event %d)", ErrCorrupt, ev.Index)
	}
	if g, ok := ev.Body.(Genesis); ok {
		if g.Params.MaxStepMs < 1 || g.Params.UptimeWindowMs < 1 {
			return fmt.Errorf("%w: genesis params %+v", ErrCorrupt, g.Params)
		}
		m.params, m.started, m.lastAt = g.Params, true, ev.At
	} else {
		m.advance(ev.At)
	}
	if err := m.apply(ev.At, ev.Body); err != nil {
		return fmt.Errorf("%w: event %d (%s): %v", ErrCorrupt, ev.Index, ev.Body.Kind(), err)
	}
	m.applied = ev.Index
	return nil
}

// advance moves observed time by the wall-clock gap since the previous
// event, clamped to [0, MaxStep].
func (m *Machine) advance(at int64) {
	d := at - m.lastAt
	d = max(0, min(d, m.params.MaxStepMs))
	m.observed += d
	m.lastAt = at
}

// observedAt is the observed time an event at wall time now would have.
func (m *Machine) observedAt(now int64) int64 {
	return m.observed + max(0, min(now-m.lastAt, m.params.MaxStepMs))
}

func (m *Machine) apply(at int64, b Body) error {
	switch e := b.(type) {
	case Genesis, Ticked:
		return nil
	case NodeRegistered:
		return m.applyRegistered(e)
	case HeartbeatReceived:
		return m.applyHeartbeat(e)
	case NodeFailed:
		return m.applyFailed(e)
	case NodeExpired:
		return m.applyExpired(e)
	case BandwidthReported:
		return m.applyBandwidth(e)
	case JobSubmitted:
		return m.applySubmitted(e)
	case JobTransitioned:
		return m.applyTransition(e)
	case MemberChanged:
		return m.applyMember(e)
	case RingConfigured:
		return m.applyRing(e)
	case JobPaused:
		return m.applyPause(e.Job, true)
	case JobResumed:
		return m.applyPause(e.Job, false)
	case Minted:
		return m.applyLedger(LedgerRequest{ID: e.Request, Kind: "deposit", Account: e.Account, Amount: e.Amount},
			func() error { return m.ledger.Mint(e.Account, e.Amount) })
	case Bonded:
		return m.applyLedger(LedgerRequest{ID: e.Request, Kind: "bond", Account: e.Account, Amount: e.Amount},
			func() error { return m.ledger.Bond(e.Account, e.Amount) })
	case Unbonded:
		return m.applyLedger(LedgerRequest{ID: e.Request, Kind: "unbond", Account: e.Account, Amount: e.Amount},
			func() error { return m.ledger.Unbond(e.Account, e.Amount, e.ReleaseAt) })
	case Withdrawn:
		return m.applyLedger(LedgerRequest{ID: e.Request, Kind: "withdraw", Account: e.Account, Amount: e.Amount}, func() error {
			got, err := m.ledger.Withdraw(e.Account, at)
			if err == nil && got != e.Amount {
				err = fmt.Errorf("withdrew %d, event says %d", got, e.Amount)
			}
			return err
		})
	case Slashed:
		return m.ledger.ApplySlash(e.Account, ledger.SlashPlan{Offence: e.Offence, Amount: e.Amount, Ban: e.Ban}, at, e.Reason, e.Evidence)
	case RewardsPaid:
		return m.applyRewards(e)
	case EscrowReleased:
		return m.applyReleased(e)
	case SuspectReported:
		return m.applySuspect(e)
	case DeltaJudged:
		return m.applyJudged(e)
	case JobRefused:
		return m.applyRefused(e)
	case CheckpointPublished:
		return m.applyPublished(e)
	case JobSettled:
		return m.applySettled(e)
	case CheckAssigned:
		return m.applyCheckAssigned(e)
	case VerdictRecorded:
		return m.applyVerdict(e)
	case CheckExpired:
		return m.applyCheckExpired(e)
	case NodesWatched:
		return m.applyWatched(e)
	case RebaseSet:
		return m.applyRebaseSet(e)
	case RebasePublished:
		return m.applyRebasePublished(e)
	}
	return fmt.Errorf("unknown event body %T", b)
}
