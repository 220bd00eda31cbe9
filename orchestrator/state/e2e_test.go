package state

import (
	"os"
	"testing"

	"github.com/zooai/gym/protocol/jobspec"
)

// TestApplyRefusesE2EOutOfPlace: replay refuses end-to-end events that
// contradict the state (a corrupt or foreign log), though Step never
// decides them.
func TestApplyRefusesE2EOutOfPlace(t *testing.T) {
	data, err := os.ReadFile("testdata/e2e.txt")
	if err != nil {
		t.Fatal(err)
	}
	blocks, _ := parseTranscript(t, string(data))
	h := newHarness(t)
	for _, b := range blocks {
		h.run(b.cmd)
	}
	upTo := func(i int) *Machine {
		m, _ := New(testConfig())
		for _, e := range h.log[:i] {
			if err := m.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	for _, c := range []struct {
		name   string
		kind   string
		change func(Body) Body
	}{
		{"replayed suspect sequence", "suspect_reported", func(b Body) Body { e := b.(SuspectReported); e.Seq = 1; return e }},
		{"suspect report for another configuration", "suspect_reported", func(b Body) Body { e := b.(SuspectReported); e.ConfigID = "00"; return e }},
		{"suspect report by an unknown node", "suspect_reported", func(b Body) Body { e := b.(SuspectReported); e.Reporter = "nobody"; return e }},
		{"verdict for an unknown job", "delta_judged", func(b Body) Body { e := b.(DeltaJudged); e.Job = "job-00000099"; return e }},
		{"publication of another epoch", "checkpoint_published", func(b Body) Body { e := b.(CheckpointPublished); e.Epoch++; return e }},
		{"settlement of an unknown job", "job_settled", func(b Body) Body { e := b.(JobSettled); e.Job = "job-00000099"; return e }},
		{"settlement of a pending job", "job_settled", func(b Body) Body { e := b.(JobSettled); e.Job = "job-00000003"; return e }},
	} {
		i := 0
		for i < len(h.log) && h.log[i].Body.Kind() != c.kind {
			i++
		}
		if i == len(h.log) {
			t.Fatalf("%s: no %s event in the log", c.name, c.kind)
		}
		if err := upTo(i).Apply(h.log[i]); err != nil {
			t.Fatalf("%s: the event as logged: %v", c.name, err)
		}
		ev := h.log[i]
		ev.Body = c.change(ev.Body)
		if err := upTo(i).Apply(ev); err == nil {
			t.Errorf("%s: applied %+v", c.name, ev.Body)
		}
	}
	// A job settles once.
	for i, e := range h.log {
		if _, ok := e.Body.(JobSettled); ok {
			m := upTo(i + 1)
			again := e
			again.Index = m.Applied() + 1
			if err := m.Apply(again); err == nil {
				t.Errorf("settled %s twice", e.Body.(JobSettled).Job)
			}
			break
		}
	}
}

// TestJobClone: a cloned job shares nothing with the machine's.
func TestJobClone(t *testing.T) {
	slot := jobspec.Slot{Epoch: 1, Step: 5, Node: "a"}
	j := Job{ID: "j", Ring: []string{"a", "b"}, CIDs: []string{"c1"}, Participants: []string{"a"},
		Bandwidth: map[string]map[string]uint64{"a": {"b": 1}}, Suspects: map[string][]string{"b": {"a"}},
		Slots: map[jobspec.Slot]string{slot: "d"}, Tally: map[string]*Tally{"a": {Accepted: 1}}}
	c := j.Clone()
	c.Ring[0], c.CIDs[0], c.Participants[0] = "x", "x", "x"
	c.Bandwidth["a"]["b"], c.Suspects["b"][0], c.Slots[slot] = 9, "x", "x"
	c.Tally["a"].Accepted = 9
	if j.Ring[0] != "a" || j.CIDs[0] != "c1" || j.Participants[0] != "a" || j.Bandwidth["a"]["b"] != 1 ||
		j.Suspects["b"][0] != "a" || j.Slots[slot] != "d" || j.Tally["a"].Accepted != 1 {
		t.Fatalf("the clone shares state with the original: %+v", j)
	}
}

// TestRecordedSnapshot: a snapshot written before slots were typed
// (testdata/snapshot-e2e.json, the state at the end of e2e.txt) restores
// with its slots read as jobspec.Slot and re-encodes byte for byte, and the
// replayed transcript still encodes to the same bytes (but for the jobs'
// log indices, which the recording predates).
func TestRecordedSnapshot(t *testing.T) {
	want, err := os.ReadFile("testdata/snapshot-e2e.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Restore(testConfig(), want)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Marshal(); string(got) != string(want) {
		t.Fatalf("re-encoded snapshot differs:\n got %s\nwant %s", got, want)
	}
	slots := 0
	for _, id := range m.Jobs() {
		j, _ := m.Job(id)
		for s, d := range j.Slots {
			if s.Epoch != 1 || (s.Step != 50 && s.Step != 100) || len(s.Node) != 64 || len(d) != 64 {
				t.Errorf("job %s: slot %+v → %s", id, s, d)
			}
			slots++
		}
	}
	if slots != 2 {
		t.Fatalf("%d slots, want 2", slots)
	}
	data, err := os.ReadFile("testdata/e2e.txt")
	if err != nil {
		t.Fatal(err)
	}
	blocks, _ := parseTranscript(t, string(data))
	h := newHarness(t)
	for _, b := range blocks {
		h.run(b.cmd)
	}
	// The recorded snapshot predates jobs' log indices; they are the only
	// difference allowed.
	for _, j := range h.m.jobs {
		if j.LogIndex == 0 {
			t.Errorf("job %s replayed without its log index", j.ID)
		}
		j.LogIndex = 0
	}
	if got := h.m.Marshal(); string(got) != string(want) {
		t.Fatalf("the transcript's final state encodes differently:\n got %s\nwant %s", got, want)
	}
}

// TestRetainFrom: the log is needed from the oldest unsettled job's
// submission on; with every job settled, from the next event; a job
// restored from a snapshot older than log indices keeps the whole log.
func TestRetainFrom(t *testing.T) {
	m, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.RetainFrom(); got != 1 {
		t.Fatalf("empty machine: %d", got)
	}
	m.applied = 100
	m.jobs = map[string]*Job{
		"a": {ID: "a", LogIndex: 10, Settled: true},
		"b": {ID: "b", LogIndex: 40},
		"c": {ID: "c", LogIndex: 70},
	}
	if got := m.RetainFrom(); got != 40 {
		t.Fatalf("RetainFrom = %d, want 40 (job b)", got)
	}
	m.jobs["b"].Settled = true
	m.jobs["c"].Settled = true
	if got := m.RetainFrom(); got != 101 {
		t.Fatalf("all settled: RetainFrom = %d, want 101", got)
	}
	m.jobs["old"] = &Job{ID: "old"}
	if got := m.RetainFrom(); got != 1 {
		t.Fatalf("an unsettled job without a log index: RetainFrom = %d, want 1", got)
	}
}
