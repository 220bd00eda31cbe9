package state

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// randomRun drives a harness with random commands (valid and not) and
// returns the encoded log.
func randomRun(t *testing.T, seed uint64, steps int) (*harness, [][]byte) {
	h := newHarness(t)
	r := rand.New(rand.NewPCG(seed, 99))
	g := rand.New(rand.NewPCG(seed, 7)) // GSPO settings of submitted jobs
	names := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	pick := func() string { return names[r.IntN(len(names))] }
	for _, n := range names {
		h.run("register " + n + " vram=24576")
		h.run("deposit " + n + " 20000")
		h.run("bond " + n + " 10000")
	}
	for i := range steps {
		before := h.m.Marshal()
		var line string
		switch k := r.IntN(25); {
		case k < 1: // rare: a ring member that registers again leaves its ring
			line = fmt.Sprintf("register %s vram=%d", pick(), 8192*(1+r.IntN(4)))
		case k < 8:
			line = "heartbeat " + pick()
		case k < 10:
			// advance with most nodes beating
			var beat []string
			for _, n := range names {
				if r.IntN(30) > 0 {
					beat = append(beat, n)
				}
			}
			line = fmt.Sprintf("advance %ds beat=%s", 1+r.IntN(20), strings.Join(beat, ","))
		case k == 10:
			line = fmt.Sprintf("deposit %s %d", pick(), 5000+r.IntN(20000))
		case k == 11:
			line = fmt.Sprintf("bond %s %d", pick(), 1000+r.IntN(15000))
		case k == 12:
			line = fmt.Sprintf("submit min=3 max=%d epochs=%d vram=%d utility=%d", 3+r.IntN(3), 1+r.IntN(2), 8192*r.IntN(3), r.IntN(5))
			if g.IntN(2) == 0 {
				// arbitrary float64s must survive the log and snapshots bit
				// for bit (g, not r: the history stays the one it was)
				line += fmt.Sprintf(" gspo.beta=%s gspo.learning_rate=%s gspo.lora_alpha=%s gspo.group_size=%d gspo.importance_sampling_level=%s gspo.use_4bit=%v",
					strconv.FormatFloat(g.Float64()*10, 'g', -1, 64), strconv.FormatFloat(1-g.Float64(), 'g', -1, 64),
					strconv.FormatFloat(math.Ldexp(1-g.Float64(), g.IntN(40)-20), 'g', -1, 64), 2+g.IntN(16), []string{"sequence", "token"}[g.IntN(2)], g.IntN(2) == 0)
			}
		case k == 13:
			// a member of a provisioning job reports bandwidth to the others
			for _, id := range h.m.Jobs() {
				j := h.m.jobs[id]
				if j.State != Provisioning || len(j.Members) == 0 {
					continue
				}
				me := h.names[j.Members[r.IntN(len(j.Members))]]
				var links []string
				for _, p := range j.Members {
					if h.names[p] != me {
						links = append(links, fmt.Sprintf("%s=%d", h.names[p], 1+r.IntN(1000)))
					}
				}
				line = fmt.Sprintf("bandwidth %s %s %s", me, id, strings.Join(links, " "))
				break
			}
		case k == 14:
			if r.IntN(10) == 0 {
				line = "slash " + pick() + " random"
			}
		case k == 15:
			for _, id := range h.m.Jobs() {
				if j := h.m.jobs[id]; j.State == Running {
					line = fmt.Sprintf("end-epoch %s %d", id, j.Epoch)
				} else if j.State == Aggregating {
					line = fmt.Sprintf("publish %s %d cid-%d", id, j.Epoch, i)
					if r.IntN(2) == 0 {
						line += fmt.Sprintf(" record=epoch-%d", j.Epoch)
					}
				}
			}
		case k == 16:
			line = fmt.Sprintf("unbond %s %d", pick(), 1+r.IntN(5000))
		case k == 17:
			line = "withdraw " + pick()
		case k == 18:
			line = "deposit treasury 1000"
		case k == 19:
			for _, id := range h.m.Jobs() {
				if j := h.m.jobs[id]; j.Epoch > 1 || j.State == Published {
					line = fmt.Sprintf("pay %s 1 %d %s=1,1,1 %s=2,0,1", id, 1+r.IntN(500), pick(), pick())
				}
			}
		case k == 20 || k == 21:
			// a ring member reports a neighbour (now and then a stranger
			// or an old configuration)
			if id, j := running(h); j != nil {
				at := r.IntN(len(j.Ring))
				rep, sus := h.names[j.Ring[at]], h.names[j.Ring[(at+1)%len(j.Ring)]]
				if r.IntN(2) == 0 {
					rep, sus = sus, rep
				}
				if r.IntN(8) == 0 {
					rep = pick()
				}
				line = fmt.Sprintf("suspect %s %s %s %s", rep, id, sus, []string{"timeout", "broken", "misbehaved", "norm"}[r.IntN(4)])
				if r.IntN(8) == 0 && j.Generation > 1 {
					line += fmt.Sprintf(" config=gen%d", j.Generation-1)
				}
			}
		case k == 22:
			// the validator's verdict on a member's delta, now and then late
			if id, j := running(h); j != nil {
				verdict := []string{"accept", "accept", "reject"}[r.IntN(3)]
				line = fmt.Sprintf("judge %s %s %d %d %d %s samples=%d reason=r", id, h.names[j.Ring[r.IntN(len(j.Ring))]],
					j.Epoch-r.IntN(2), 50*(1+r.IntN(4)), 1+r.IntN(12), verdict, r.IntN(100))
			}
		case k == 23:
			if id, j := running(h); j != nil && r.IntN(4) == 0 {
				line = fmt.Sprintf("eject %s %s proven", id, h.names[j.Ring[r.IntN(len(j.Ring))]])
			}
		case k == 24:
			for _, id := range h.m.Jobs() {
				if j := h.m.jobs[id]; j.State.Terminal() && (!j.Settled || r.IntN(4) == 0) {
					line = "settle " + id
					break
				}
			}
		}
		if line == "" {
			continue
		}
		out := h.run(line)
		if !strings.HasPrefix(line, "advance") && strings.HasPrefix(out, "error:") && !bytes.Equal(before, h.m.Marshal()) {
			t.Fatalf("step %d: refused %q changed the state", i, line)
		}
	}
	var enc [][]byte
	for _, e := range h.log {
		b, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		enc = append(enc, b)
	}
	return h, enc
}

// running is the first Running or Aggregating job with a ring, if any.
func running(h *harness) (string, *Job) {
	for _, id := range h.m.Jobs() {
		if j := h.m.jobs[id]; (j.State == Running || j.State == Aggregating) && len(j.Ring) > 0 {
			return id, j
		}
	}
	return "", nil
}

// TestRandomReplay checks on random histories that a refused command
// changes nothing, that the same commands give the same log, and that
// replay (whole, and from a snapshot) gives byte-identical state.
func TestRandomReplay(t *testing.T) {
	kinds := map[string]int{}
	for seed := range uint64(4) {
		h, log1 := randomRun(t, seed, 1500)
		_, log2 := randomRun(t, seed, 1500)
		if len(log1) != len(log2) {
			t.Fatalf("seed %d: logs of %d and %d events", seed, len(log1), len(log2))
		}
		for i := range log1 {
			if !bytes.Equal(log1[i], log2[i]) {
				t.Fatalf("seed %d: event %d differs:\n%s\n%s", seed, i, log1[i], log2[i])
			}
		}
		for _, e := range h.log {
			kinds[e.Body.Kind()]++
		}
		h.checkReplay()
	}
	// Together the runs must reach every part of the machine.
	for _, k := range []string{"ring_configured", "node_failed", "job_transitioned", "suspect_reported", "delta_judged", "checkpoint_published", "job_settled"} {
		if kinds[k] == 0 {
			t.Fatalf("random runs too shallow (no %s): %v", k, kinds)
		}
	}
}

func TestReplayRefusesForeignLog(t *testing.T) {
	h, _ := randomRun(t, 1, 300)
	m, _ := New(testConfig())
	if err := m.Apply(h.log[1]); err == nil {
		t.Fatal("applied event 2 first")
	}
	m, _ = New(testConfig())
	for _, e := range h.log[:len(h.log)-1] {
		if err := m.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	last := h.log[len(h.log)-1]
	if reg, ok := last.Body.(HeartbeatReceived); ok {
		reg.Seq = 0
		last.Body = reg
		if err := m.Apply(last); err == nil {
			t.Fatal("applied a heartbeat that replays a sequence number")
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	h, log := randomRun(&testing.T{}, 3, 200)
	_ = h
	for _, b := range log {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEvent(data)
		if err != nil {
			return
		}
		b, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		e2, err := DecodeEvent(b)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		b2, _ := e2.Encode()
		if !bytes.Equal(b, b2) {
			t.Fatalf("encoding not stable:\n%s\n%s", b, b2)
		}
		// Applying any decoded event to a fresh machine must not panic.
		m, _ := New(testConfig())
		_ = m.Apply(e)
	})
}

func FuzzRestore(f *testing.F) {
	h, _ := randomRun(&testing.T{}, 4, 20)
	f.Add(h.m.Marshal())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Restore(testConfig(), data)
		if err != nil {
			return
		}
		if !bytes.Equal(m.Marshal(), data) {
			t.Fatal("restored snapshot does not re-marshal to itself")
		}
	})
}
