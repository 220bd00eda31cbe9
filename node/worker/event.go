package worker

import (
	"fmt"
	"strings"
	"time"
)

// Event kinds. The set and the JSON field names are stable: a parent
// process parses them (see the package documentation).
const (
	EventRegistered       = "registered"
	EventAssigned         = "assigned"
	EventIdle             = "idle"
	EventJobRefused       = "job_refused"
	EventBaseReady        = "base_ready"
	EventDatasetReady     = "dataset_ready"
	EventBandwidth        = "bandwidth_reported"
	EventCheckpointLoaded = "checkpoint_loaded"
	EventEpochStarted     = "epoch_started"
	EventStep             = "step"
	EventDeltaSubmitted   = "delta_submitted"
	EventDeltaRejected    = "delta_rejected"
	EventRingReduced      = "ring_reduced"
	EventRingFailed       = "ring_failed"
	EventRingRecovered    = "ring_recovered"
	// EventRebased: the member continued from hanzod's rebuilt state
	// instead of a sync's all-reduce, after a cheater's ejection.
	EventRebased        = "rebased"
	EventEpochDone      = "epoch_done"
	EventEpochAbandoned = "epoch_abandoned"
	EventJobDone        = "job_done"
	// EventCheck: a validator ran (or could not run) a check.
	EventCheck = "check"
	// EventCheckStarted: a validator starts a check it was assigned.
	EventCheckStarted = "check_started"
)

// Event is one thing that happened. Fields that do not apply to a kind are
// zero and omitted from the JSON encoding (so an absent number means 0).
type Event struct {
	Time       time.Time `json:"time"`
	Kind       string    `json:"kind"`
	Node       string    `json:"node"`
	Job        string    `json:"job,omitempty"`
	State      string    `json:"state,omitempty"`
	Epoch      int       `json:"epoch,omitempty"`
	Sync       int       `json:"sync,omitempty"`
	Step       int       `json:"step,omitempty"`
	Reward     float64   `json:"reward,omitempty"`
	Loss       float64   `json:"loss,omitempty"`
	Seconds    float64   `json:"seconds,omitempty"`
	Sequence   uint64    `json:"sequence,omitempty"`
	Verdict    string    `json:"verdict,omitempty"` // accepted, duplicate or rejected
	Reason     string    `json:"reason,omitempty"`
	Suspect    string    `json:"suspect,omitempty"`
	Generation uint64    `json:"generation,omitempty"`
	Members    int       `json:"members,omitempty"`
	Adapter    string    `json:"adapter,omitempty"` // Digest of the adapter after the event
	Attack     string    `json:"attack,omitempty"`
	Detail     string    `json:"detail,omitempty"`
}

// String is a compact one-line rendering for humans.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-18s", e.Time.Format("15:04:05.000"), e.Kind)
	add := func(k string, v any) { fmt.Fprintf(&b, " %s=%v", k, v) }
	if e.Job != "" {
		add("job", e.Job)
	}
	if e.State != "" {
		add("state", e.State)
	}
	if e.Epoch != 0 {
		add("epoch", e.Epoch)
	}
	if e.Sync != 0 {
		add("sync", e.Sync)
	}
	if e.Step != 0 {
		add("step", e.Step)
	}
	if e.Kind == EventStep || e.Reward != 0 {
		add("reward", fmt.Sprintf("%.3f", e.Reward))
	}
	if e.Kind == EventStep || e.Kind == EventDeltaSubmitted || e.Loss != 0 {
		add("loss", fmt.Sprintf("%.4g", e.Loss))
	}
	if e.Seconds != 0 {
		add("seconds", fmt.Sprintf("%.3f", e.Seconds))
	}
	if e.Sequence != 0 {
		add("seq", e.Sequence)
	}
	if e.Verdict != "" {
		add("verdict", e.Verdict)
	}
	if e.Reason != "" {
		add("reason", e.Reason)
	}
	if e.Suspect != "" {
		add("suspect", short(e.Suspect))
	}
	if e.Generation != 0 {
		add("gen", e.Generation)
	}
	if e.Members != 0 {
		add("members", e.Members)
	}
	if e.Adapter != "" {
		add("adapter", short(e.Adapter))
	}
	if e.Attack != "" {
		add("attack", e.Attack)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, " (%s)", e.Detail)
	}
	return b.String()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
