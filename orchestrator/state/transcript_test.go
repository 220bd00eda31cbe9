package state

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/nodeauth"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of transcript tests")

// Transcript tests run scripts from testdata/*.txt. A block is a directive
// line, a "----" line and the expected output, ended by a blank line;
// lines starting with # between blocks are comments. See harness.run for
// the directives. Run with -rewrite to regenerate the expected output (and
// then read the diff).
func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no transcripts")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runTranscript(t, f) })
	}
}

type block struct {
	cmd      string
	want     string
	line     int
	comments []string
}

func parseTranscript(t *testing.T, data string) ([]block, []string) {
	var blocks []block
	var comments []string
	lines := strings.Split(data, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			comments = append(comments, l)
			continue
		}
		b := block{cmd: l, line: i + 1, comments: comments}
		comments = nil
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("line %d: want ---- after %q", i+1, l)
		}
		var out []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		b.want = strings.Join(out, "\n")
		blocks = append(blocks, b)
	}
	return blocks, comments
}

func runTranscript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks, trailing := parseTranscript(t, string(data))
	h := newHarness(t)
	var rewritten strings.Builder
	for _, b := range blocks {
		got := h.run(b.cmd)
		if *rewrite {
			for _, c := range b.comments {
				rewritten.WriteString(c + "\n")
			}
			rewritten.WriteString(b.cmd + "\n----\n")
			if got != "" {
				rewritten.WriteString(got + "\n")
			}
			rewritten.WriteString("\n")
			continue
		}
		if got != b.want {
			t.Errorf("%s:%d: %s\n got:\n%s\nwant:\n%s", path, b.line, b.cmd, got, b.want)
		}
	}
	if *rewrite {
		out := strings.TrimRight(rewritten.String(), "\n") + "\n"
		for _, c := range trailing {
			if c != "" {
				out += c + "\n"
			}
		}
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.checkReplay()
}

// harness drives a Machine with a fake clock and named node keys.
type harness struct {
	t     *testing.T
	m     *Machine
	now   int64
	keys  map[string]ed25519.PrivateKey
	names map[string]string // hex id → name
	seq   map[string]uint64
	log   []Event
}

const epoch0 = 1_767_225_600_000 // 2026-01-01T00:00:00Z

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.UptimeWindow = time.Hour
	cfg.PenaltyPeriod = time.Hour
	cfg.UnbondingPeriod = time.Hour
	cfg.AgingTau = time.Minute
	cfg.CheckTimeout = time.Minute
	return cfg
}

func newHarness(t *testing.T) *harness {
	m, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, m: m, now: epoch0, keys: map[string]ed25519.PrivateKey{}, names: map[string]string{}, seq: map[string]uint64{}}
	h.log = append(h.log, m.Start(h.now)...)
	return h
}

func (h *harness) key(name string) ed25519.PrivateKey {
	k, ok := h.keys[name]
	if !ok {
		seed := sha256.Sum256([]byte("node:" + name))
		k = ed25519.NewKeyFromSeed(seed[:])
		h.keys[name] = k
		h.names[hex.EncodeToString(k.Public().(ed25519.PublicKey))] = name
	}
	return k
}

// subject is a check's subject: a node by name, or an evaluation's
// @eval/DIGEST as written.
func (h *harness) subject(name string) string {
	if strings.HasPrefix(name, EvalSubject) {
		return name
	}
	return h.id(name)
}

func (h *harness) id(name string) string {
	return hex.EncodeToString(h.key(name).Public().(ed25519.PublicKey))
}

func (h *harness) auth(name string, kv map[string]string) Auth {
	h.key(name)
	h.seq[name]++
	a := Auth{Node: h.id(name), Seq: h.seq[name], Timestamp: h.now}
	if v, ok := kv["seq"]; ok {
		a.Seq = mustU(v)
	}
	if v, ok := kv["skew"]; ok {
		a.Timestamp += mustDur(v)
	}
	return a
}

// longReport matches a long hardware report in an event's JSON: the
// transcript shows its length instead.
var longReport = regexp.MustCompile(`"report":"[^"]{65,}"`)

// step runs one command and renders what happened.
func (h *harness) step(cmd Command) string {
	evs, err := h.m.Step(h.now, cmd)
	if err != nil {
		return "error: " + h.names2(err.Error())
	}
	h.log = append(h.log, evs...)
	if err := h.m.CheckLedger(); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if _, ok := e.Body.(Ticked); ok {
			continue
		}
		b, _ := json.Marshal(e.Body)
		b = longReport.ReplaceAllFunc(b, func(m []byte) []byte {
			return fmt.Appendf(nil, `"report":"(%d base64 bytes)"`, len(m)-len(`"report":""`))
		})
		out = append(out, e.Body.Kind()+" "+h.names2(string(b)))
	}
	return strings.Join(out, "\n")
}

func (h *harness) names2(s string) string {
	ids := make([]string, 0, len(h.names))
	for id := range h.names {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s = strings.ReplaceAll(s, id, h.names[id])
	}
	return s
}

func parseArgs(fields []string) ([]string, map[string]string) {
	var pos []string
	kv := map[string]string{}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, f)
		}
	}
	return pos, kv
}

func mustU(s string) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return v
}

func mustInt(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return v
}

// sig is a well-formed orchestrator signature in hex, or a short one
// with sig=short.
func sig(kv map[string]string) string {
	if kv["sig"] == "short" {
		return "abcd"
	}
	return strings.Repeat("ab", 64)
}

// configID is the job's ring configuration id of generation "genN" (from
// the log), or v itself.
func (h *harness) configID(job, v string) string {
	g, ok := strings.CutPrefix(v, "gen")
	if !ok {
		return v
	}
	for _, e := range h.log {
		if rc, ok := e.Body.(RingConfigured); ok && rc.Job == job && rc.Generation == mustU(g) {
			return rc.ConfigID
		}
	}
	h.t.Fatalf("job %s has no generation %s", job, g)
	return ""
}

func mustDur(s string) int64 {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d.Milliseconds()
}

// run executes one directive:
//
//	register NAME vram=MiB [addr=H:P] [probe=H:P] [region=R] [gpu=G] [seq=N] [skew=DUR] [report=BYTES]
//	heartbeat NAME [seq=N] [skew=DUR] [badsig=1]
//	bandwidth NAME JOB PEER=KBPS...
//	advance DUR [beat=A,B,...]   tick once a second; listed nodes heartbeat every 10 s
//	jump DUR                     move the wall clock without ticking (may be negative)
//	submit key=value...          model dataset epochs min max vram utility submitter deadline=DUR
//	                             aggregation steps prompts seed byzantine spotcheck
//	                             by=NAME [seq=N] [skew=DUR]: signed by NAME's key (else the operator's)
//	                             gspo.KEY=VALUE (any jobspec.GSPO json key; the others keep their defaults)
//	spec JOB                     the job's spec as JSON
//	end-epoch JOB EPOCH / fail JOB REASON
//	publish JOB EPOCH CID [record=TEXT [sig=short]]   with a signed publication record
//	settle JOB [sig=short]
//	suspect REPORTER JOB SUSPECT KIND|- (no kind) [config=genN|ID] [evidence=TEXT] [seq=N] [badsig=1]
//	                             the config id defaults to the job's current one
//	judge JOB NODE|- (unregistered) EPOCH STEP SEQ accept|reject [reason=R] [samples=N] [digest=HEX]
//	eject JOB NODE REASON
//	detail JOB                   suspects, slots, tallies, participants, settled
//	node NAME                    status, job, removed_from, probe address
//	deposit ACCT GYM / bond ACCT GYM / unbond ACCT GYM / withdraw ACCT / slash NODE REASON
//	                             (the first four take req=ID, the operation's request id)
//	pay JOB EPOCH TOTAL NAME=COMPUTE,QUALITY,PARTICIPATION...
//	nodes / jobs / account NAME / priority
func (h *harness) run(line string) string {
	f := strings.Fields(line)
	pos, kv := parseArgs(f[1:])
	acct := func(s string) string {
		if s == ledger.Treasury || strings.HasPrefix(s, "@") {
			return strings.TrimPrefix(s, "@")
		}
		return h.id(s)
	}
	switch f[0] {
	case "register":
		r := Register{Address: "10.0.0.1:9560", Region: "eu", GPUModel: "RTX 4090", VRAMMiB: 24576}
		if v, ok := kv["vram"]; ok {
			r.VRAMMiB = mustU(v)
		}
		if v, ok := kv["addr"]; ok {
			r.Address = v
		}
		if v, ok := kv["gpu"]; ok {
			r.GPUModel = v
		}
		r.ProbeAddress, r.Role = kv["probe"], kv["role"]
		if v, ok := kv["report"]; ok {
			r.Report = bytes.Repeat([]byte{'r'}, mustInt(v))
		}
		r.Auth = h.auth(pos[0], kv)
		r.Sign(h.key(pos[0]), r.SignedBytes())
		if v, ok := kv["node"]; ok { // claim a different key than the signer's
			r.Node = v
		}
		return h.step(r)
	case "heartbeat":
		hb := Heartbeat{Auth: h.auth(pos[0], kv)}
		hb.Sign(h.key(pos[0]), hb.SignedBytes())
		if kv["badsig"] == "1" {
			hb.Sig[0] ^= 1
		}
		return h.step(hb)
	case "bandwidth":
		b := ReportBandwidth{Auth: h.auth(pos[0], kv), Job: pos[1]}
		var peers []string
		for k := range kv {
			if k != "seq" && k != "skew" {
				peers = append(peers, k)
			}
		}
		sort.Strings(peers)
		for _, p := range peers {
			b.Links = append(b.Links, Link{Peer: h.id(p), Kbps: mustU(kv[p])})
		}
		b.Sign(h.key(pos[0]), b.SignedBytes())
		return h.step(b)
	case "advance":
		d := mustDur(pos[0])
		var beat []string
		if v := kv["beat"]; v != "" {
			beat = strings.Split(v, ",")
		}
		var out []string
		for s := int64(1000); s <= d; s += 1000 {
			h.now += 1000
			if s%10_000 == 0 {
				for _, n := range beat {
					hb := Heartbeat{Auth: h.auth(n, nil)}
					hb.Sign(h.key(n), hb.SignedBytes())
					if r := h.step(hb); strings.HasPrefix(r, "error") {
						out = append(out, r)
					}
				}
			}
			if r := h.step(Tick{}); r != "" {
				out = append(out, r)
			}
		}
		return strings.Join(out, "\n")
	case "jump":
		h.now += mustDur(pos[0])
		return ""
	case "submit":
		s := jobspec.Spec{Model: "zoo/eco-1b", Dataset: "gsm8k", Epochs: 1, MinNodes: 3}
		for k, v := range kv {
			if key, ok := strings.CutPrefix(k, "gspo."); ok {
				if s.GSPO == (jobspec.GSPO{}) {
					s.GSPO = jobspec.DefaultGSPO()
				}
				setGSPO(h.t, &s.GSPO, key, v)
				continue
			}
			switch k {
			case "model":
				s.Model = v
			case "epochs":
				s.Epochs = int(mustU(v))
			case "min":
				s.MinNodes = int(mustU(v))
			case "max":
				s.MaxNodes = int(mustU(v))
			case "vram":
				s.MinVRAMMiB = mustU(v)
			case "utility":
				s.Utility = mustU(v)
			case "submitter":
				s.Submitter = h.id(v)
			case "deadline":
				s.Deadline = h.now + mustDur(v)
			case "aggregation":
				s.Aggregation = v
			case "steps":
				s.StepsPerEpoch = mustInt(v)
			case "prompts":
				s.PromptsPerStep = mustInt(v)
			case "seed":
				s.Seed = mustU(v)
			case "byzantine":
				s.Byzantine = mustInt(v)
			case "spotcheck":
				s.SpotCheckBP = mustInt(v)
			case "validators":
				s.Validators = mustInt(v)
			}
		}
		c := SubmitJob{Spec: s}
		if by, ok := kv["by"]; ok {
			a := h.auth(by, kv)
			c.By, c.Seq, c.Timestamp = a.Node, a.Seq, a.Timestamp
		}
		return h.step(c)
	case "spec":
		j, ok := h.m.Job(pos[0])
		if !ok {
			return "no job " + pos[0]
		}
		b, _ := json.Marshal(j.Spec)
		return h.names2(string(b))
	case "end-epoch":
		return h.step(EndEpoch{Job: pos[0], Epoch: int(mustU(pos[1]))})
	case "publish":
		c := PublishCheckpoint{Job: pos[0], Epoch: int(mustU(pos[1])), CID: pos[2]}
		if v, ok := kv["record"]; ok {
			c.Record, c.Signature = v, sig(kv)
		}
		return h.step(c)
	case "settle":
		return h.step(Settle{Job: pos[0], Record: `{"job":"` + pos[0] + `"}`, Signature: sig(kv)})
	case "refuse":
		r := RefuseJob{Auth: h.auth(pos[0], kv), Job: pos[1], Reason: strings.Join(pos[2:], " ")}
		r.Sign(h.key(pos[0]), r.SignedBytes())
		if kv["badsig"] == "1" {
			r.Sig[0] ^= 1
		}
		return h.step(r)
	case "suspect":
		r := ReportSuspect{Auth: h.auth(pos[0], kv), Job: pos[1], Suspect: h.id(pos[2]), Kind: strings.TrimPrefix(pos[3], "-"), Evidence: []byte(kv["evidence"])}
		if j, ok := h.m.Job(pos[1]); ok {
			r.ConfigID = j.ConfigID
		}
		if v, ok := kv["config"]; ok {
			r.ConfigID = h.configID(pos[1], v)
		}
		r.Sign(h.key(pos[0]), r.SignedBytes())
		if kv["badsig"] == "1" {
			r.Sig[0] ^= 1
		}
		return h.step(r)
	case "judge":
		v := DeltaJudged{Job: pos[0], Node: "nobody", Epoch: mustInt(pos[2]), Step: mustU(pos[3]), Sequence: mustU(pos[4]), Accepted: pos[5] == "accept", Reason: kv["reason"]}
		if pos[1] != "-" {
			v.Node = h.id(pos[1])
		}
		if s, ok := kv["samples"]; ok {
			v.Samples = mustU(s)
		}
		d := sha256.Sum256([]byte(pos[0] + jobspec.Slot{Epoch: v.Epoch, Step: v.Step, Node: v.Node}.String() + pos[4]))
		v.Digest = hex.EncodeToString(d[:])
		if s, ok := kv["digest"]; ok {
			v.Digest = s
		}
		return h.step(JudgeDelta{Verdict: v})
	case "eject":
		return h.step(Eject{Job: pos[0], Node: h.id(pos[1]), Reason: strings.Join(pos[2:], " ")})
	case "rebase":
		// rebase JOB EPOCH SYNC STEP REASON...
		return h.step(SetRebase{Job: pos[0], Epoch: mustInt(pos[1]), Sync: mustInt(pos[2]), Step: mustU(pos[3]), Reason: strings.Join(pos[4:], " ")})
	case "rebase-publish":
		// rebase-publish JOB EPOCH SYNC CID DIGEST
		return h.step(PublishRebase{Job: pos[0], Epoch: mustInt(pos[1]), Sync: mustInt(pos[2]), CID: pos[3], Digest: pos[4]})
	case "assign":
		// assign JOB NODE EPOCH STEP VALIDATOR [pkg=CID] [digest=D]: the
		// slot's accepted digest unless given.
		// An evaluation's subject is @eval/DIGEST (its digest too); k=N
		// asks N verdicts.
		sl := jobspec.Slot{Epoch: mustInt(pos[2]), Step: mustU(pos[3]), Node: h.subject(pos[1])}
		c := AssignCheck{Job: pos[0], Slot: sl, Package: "pkg-1", Validator: h.id(pos[4])}
		if j, ok := h.m.Job(pos[0]); ok {
			c.Digest = j.Slots[sl]
		}
		if d, ok := strings.CutPrefix(pos[1], EvalSubject); ok {
			c.Digest = d
		}
		if v, ok := kv["k"]; ok {
			c.K = mustInt(v)
		}
		if v, ok := kv["pkg"]; ok {
			c.Package = v
		}
		if v, ok := kv["digest"]; ok {
			c.Digest = v
		}
		return h.step(c)
	case "verdict":
		// verdict VALIDATOR JOB NODE EPOCH STEP OUTCOME [check=C] [pkg=CID] [badsig=1]
		v := SubmitVerdict{Auth: h.auth(pos[0], kv), Job: pos[1], Subject: h.subject(pos[2]), Epoch: mustU(pos[3]), Step: mustU(pos[4]),
			Package: "pkg-1", Outcome: pos[5], Check: kv["check"], Figures: `{"update_rel_l2":0}`}
		if j, ok := h.m.Job(pos[1]); ok {
			v.Digest = j.Slots[jobspec.Slot{Epoch: int(v.Epoch), Step: v.Step, Node: v.Subject}]
		}
		if d, ok := strings.CutPrefix(pos[2], EvalSubject); ok {
			v.Digest = d
		}
		if p, ok := kv["pkg"]; ok {
			v.Package = p
		}
		v.Sign(h.key(pos[0]), v.SignedBytes())
		if kv["badsig"] == "1" {
			v.Sig[0] ^= 1
		}
		return h.step(v)
	case "checks":
		// The job's delegated checks: slot, asks and where each stands.
		j, ok := h.m.Job(pos[0])
		if !ok {
			return "no job " + pos[0]
		}
		var out []string
		for _, key := range slices.Sorted(maps.Keys(j.Checks)) {
			c := j.Checks[key]
			line := h.names2(key) + " k=" + strconv.Itoa(c.K)
			for _, a := range c.Asks {
				st := "open"
				switch {
				case a.Verdict != nil:
					st = a.Verdict.Outcome
				case a.Expired:
					st = "expired"
				}
				line += " " + h.names2(a.Validator) + "=" + st
			}
			d := c.Decision()
			line += fmt.Sprintf(" decided=%v outcome=%q need=%d false=%v", d.Decided, d.Outcome, d.Need, d.False)
			out = append(out, line)
		}
		if len(j.Watch) > 0 {
			b, _ := json.Marshal(j.Watch)
			out = append(out, "watch "+h.names2(string(b)))
		}
		return strings.Join(out, "\n")
	case "validators":
		return h.names2(strings.Join(h.m.Validators(pos[0]), " "))
	case "watch":
		var nodes []string
		for _, n := range pos[3:] {
			nodes = append(nodes, h.id(n))
		}
		return h.step(WatchNodes{Job: pos[0], Epoch: mustInt(pos[1]), Until: mustInt(pos[2]), Nodes: nodes})
	case "list-checks":
		l := nodeauth.ListChecks{Auth: h.auth(pos[0], kv)}
		l.Sign(h.key(pos[0]), l.SignedBytes())
		if err := h.m.AuthorizeValidator(h.now, l.Auth, l.SignedBytes()); err != nil {
			return "error: " + h.names2(err.Error())
		}
		var out []string
		for _, o := range h.m.OpenChecks(l.Node) {
			out = append(out, o.Job+" "+h.names2(o.Check.Slot().String())+" "+o.Check.Package+fmt.Sprintf(" in %dms", o.Deadline))
		}
		return strings.Join(out, "\n")
	case "detail":
		// The job's end-to-end bookkeeping, with node names.
		j, ok := h.m.Job(pos[0])
		if !ok {
			return "no job " + pos[0]
		}
		b, _ := json.Marshal(struct {
			EpochSize    int                     `json:"epoch_size"`
			Suspects     map[string][]string     `json:"suspects,omitempty"`
			Slots        map[jobspec.Slot]string `json:"slots,omitempty"`
			Tally        map[string]*Tally       `json:"tally,omitempty"`
			Participants []string                `json:"participants,omitempty"`
			Settled      bool                    `json:"settled"`
			Refusals     map[string]string       `json:"refusals,omitempty"`
		}{j.EpochSize, j.Suspects, j.Slots, j.Tally, j.Participants, j.Settled, j.Refusals})
		return h.names2(string(b))
	case "node":
		n, ok := h.m.Node(h.id(pos[0]))
		if !ok {
			return "no node " + pos[0]
		}
		return h.names2(fmt.Sprintf("%s job=%q removed_from=%v probe=%q last_seq=%d", n.Status, n.Job, n.RemovedFrom, n.ProbeAddress, n.LastSeq))
	case "fail":
		return h.step(FailJob{Job: pos[0], Reason: strings.Join(pos[1:], " ")})
	case "deposit":
		return h.step(Deposit{Account: acct(pos[0]), Amount: ledger.Amount(mustU(pos[1])) * ledger.GYM, Request: kv["req"]})
	case "bond":
		return h.step(Bond{Account: acct(pos[0]), Amount: ledger.Amount(mustU(pos[1])) * ledger.GYM, Request: kv["req"]})
	case "unbond":
		return h.step(Unbond{Account: acct(pos[0]), Amount: ledger.Amount(mustU(pos[1])) * ledger.GYM, Request: kv["req"]})
	case "withdraw":
		return h.step(Withdraw{Account: acct(pos[0]), Request: kv["req"]})
	case "slash":
		return h.step(Slash{Node: acct(pos[0]), Reason: strings.Join(pos[1:], " "), Evidence: []byte("evidence:" + pos[0])})
	case "pay":
		c := PayRewards{Job: pos[0], Epoch: int(mustU(pos[1])), Total: ledger.Amount(mustU(pos[2])) * ledger.GYM}
		var names []string
		for k := range kv {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, n := range names {
			p := strings.Split(kv[n], ",")
			c.Contributions = append(c.Contributions, ledger.Contribution{ID: acct(n), Compute: mustU(p[0]), Quality: mustU(p[1]), Participation: mustU(p[2])})
		}
		return h.step(c)
	case "nodes":
		var out []string
		for _, id := range h.m.Nodes() {
			n, _ := h.m.Node(id)
			why := h.m.Ineligible(&n, 0, h.now)
			if why == "" {
				why = "eligible"
			}
			out = append(out, fmt.Sprintf("%s %s job=%q uptime=%d %s", h.names[id], n.Status, n.Job, h.m.UptimeBP(&n), why))
		}
		return strings.Join(out, "\n")
	case "jobs":
		var out []string
		for _, id := range h.m.Jobs() {
			j, _ := h.m.Job(id)
			ring := make([]string, len(j.Ring))
			for k, r := range j.Ring {
				ring[k] = h.names[r]
			}
			out = append(out, fmt.Sprintf("%s %s epoch=%d ring=%s gen=%d paused=%v cids=%v reason=%q",
				id, j.State, j.Epoch, strings.Join(ring, ","), j.Generation, j.Paused, j.CIDs, j.Reason))
		}
		return strings.Join(out, "\n")
	case "account":
		if pos[0] == ledger.Treasury {
			return fmt.Sprintf("treasury=%d", h.m.ledger.TreasuryBalance()/ledger.GYM)
		}
		a := h.m.Account(acct(pos[0]))
		out := fmt.Sprintf("free=%d bonded=%d unbonding=%d slashes=%d banned=%v", a.Free/ledger.GYM, a.Bonded/ledger.GYM, a.Unbonded()/ledger.GYM, len(a.Slashes), a.Banned)
		if a.Escrowed > 0 {
			out += fmt.Sprintf(" escrowed=%d", a.Escrowed/ledger.GYM)
		}
		return out
	case "priority":
		var out []string
		for _, id := range h.m.Jobs() {
			j := h.m.jobs[id]
			if j.State == Pending {
				out = append(out, fmt.Sprintf("%s %s", id, h.m.Priority(j)))
			}
		}
		return strings.Join(out, "\n")
	}
	h.t.Fatalf("unknown directive %q", line)
	return ""
}

// setGSPO sets the jobspec.GSPO field whose json key is key, through the
// JSON encoding, so every key of the encoding can be given.
func setGSPO(t *testing.T, g *jobspec.GSPO, key, value string) {
	var m map[string]any
	b, _ := json.Marshal(g)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m[key]; !ok {
		t.Fatalf("no GSPO key %q", key)
	}
	switch m[key].(type) {
	case string:
		m[key] = value
	case bool:
		m[key] = value == "true"
	default:
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("gspo.%s=%s: %v", key, value, err)
		}
		m[key] = f
	}
	b, _ = json.Marshal(m)
	*g = jobspec.GSPO{}
	if err := json.Unmarshal(b, g); err != nil {
		t.Fatalf("gspo.%s=%s: %v", key, value, err)
	}
}

// checkReplay rebuilds the state from the log, whole and from a snapshot
// taken half way, through the event encoding, and compares bytes.
func (h *harness) checkReplay() {
	t := h.t
	want := h.m.Marshal()
	replay := func(from *Machine, evs []Event) *Machine {
		for _, e := range evs {
			b, err := e.Encode()
			if err != nil {
				t.Fatal(err)
			}
			d, err := DecodeEvent(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := from.Apply(d); err != nil {
				t.Fatal(err)
			}
		}
		return from
	}
	fresh, _ := New(testConfig())
	if got := replay(fresh, h.log).Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("replay differs:\n got %s\nwant %s", got, want)
	}
	half, _ := New(testConfig())
	replay(half, h.log[:len(h.log)/2])
	snap, err := Restore(testConfig(), half.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if got := replay(snap, h.log[len(h.log)/2:]).Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("snapshot + tail differs:\n got %s\nwant %s", got, want)
	}
	// The canonical bytes agree; check also that what they hold is what
	// was submitted: every job's spec, field by field, after a restore of
	// the final state and after a replay of the whole log.
	whole, _ := New(testConfig())
	replay(whole, h.log)
	final, err := Restore(testConfig(), want)
	if err != nil {
		t.Fatal(err)
	}
	submitted := map[string]jobspec.Spec{}
	for _, e := range h.log {
		if s, ok := e.Body.(JobSubmitted); ok {
			submitted[s.Job] = s.Spec
		}
	}
	for _, id := range h.m.Jobs() {
		live, _ := h.m.Job(id)
		if live.Spec != submitted[id] {
			t.Fatalf("job %s: spec %+v, the job_submitted event says %+v", id, live.Spec, submitted[id])
		}
		if live.Spec.GSPO == (jobspec.GSPO{}) {
			t.Fatalf("job %s was accepted without a GSPO config", id)
		}
		for name, m := range map[string]*Machine{"replay": whole, "restore": final} {
			if j, _ := m.Job(id); j.Spec != live.Spec {
				t.Fatalf("job %s after %s: spec %+v, want %+v", id, name, j.Spec, live.Spec)
			}
		}
	}
}
