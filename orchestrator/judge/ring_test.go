package judge_test

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/ring"
)

// ringReport is node signer's ring frame of the job, as a receiver reports
// it (worker.SuspectEvidence's JSON): phase/round, every element v, and
// the signature by key.
func (e *env) ringReport(key ed25519.PrivateKey, job string, epoch uint64, ph ring.Phase, round uint32, v float32, n int) []byte {
	payload := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(payload[4*i:], math.Float32bits(v))
	}
	h := ring.Header{Wire: ring.FP32, Phase: ph, Round: round, Count: uint32(n), Total: uint64(n), Epoch: epoch, Step: 1,
		Sender: 1, Receiver: 2, Hash: ring.PayloadHash(payload)}
	fr := ring.EncodeFrame(h, payload)
	sb := ring.SignedBytes(job, fr)
	rep := worker.SuspectReport{Error: "norm", Evidence: []worker.EvidenceRecord{{Kind: ring.NormExceeded.String(), Signed: true,
		SignedBytes: hex.EncodeToString(sb), Signature: hex.EncodeToString(ed25519.Sign(key, sb)), Payload: payload}}}
	b, _ := json.Marshal(rep)
	return b
}

// A signed ring frame above what honest partial sums can reach is proof:
// the signer is slashed for "norm" and ejected, the frame kept as
// evidence. Frames within the bound, not signed by the suspect, for
// another job or altered prove nothing.
func TestRingEvidence(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	C := e.bound()
	const n = 64
	at := func(mult float64) float32 { return float32(mult * C / math.Sqrt(n)) } // element giving norm mult·C
	suspect := e.ring()[0]
	key := e.keys[suspect]
	for name, rep := range map[string][]byte{
		"within the bound, round 0":    e.ringReport(key, e.job, 1, ring.ScatterReduce, 0, at(0.99), n),
		"within the bound, round 1":    e.ringReport(key, e.job, 1, ring.ScatterReduce, 1, at(1.9), n),
		"within the bound, gathering":  e.ringReport(key, e.job, 1, ring.AllGather, 0, at(2.9), n),
		"signed by another node":       e.ringReport(e.keys[e.ring()[1]], e.job, 1, ring.ScatterReduce, 0, at(50), n),
		"for another job":              e.ringReport(key, "job-other", 1, ring.ScatterReduce, 0, at(50), n),
		"for an epoch not reached yet": e.ringReport(key, e.job, 9, ring.ScatterReduce, 0, at(50), n),
		"altered payload":              []byte(strings.Replace(string(e.ringReport(key, e.job, 1, ring.ScatterReduce, 0, at(50), n)), `"payload":"`, `"payload":"AAAA`, 1)),
		"not a worker's report":        []byte("connection reset"),
	} {
		if punished, err := e.j.RingEvidence(e.ctx, e.job, e.ids[suspect], rep); err != nil || punished {
			t.Fatalf("%s: punished %v, %v", name, punished, err)
		}
	}
	e.expectNotSlashed(suspect)
	// Round 1 of the scatter-reduce holds two contributions: 2.5 C is proof.
	rep := e.ringReport(key, e.job, 1, ring.ScatterReduce, 1, at(2.5), n)
	if punished, err := e.j.RingEvidence(e.ctx, e.job, e.ids[suspect], rep); err != nil || !punished {
		t.Fatalf("a frame at 2.5 C in round 1: punished %v, %v", punished, err)
	}
	e.expectSlashed(suspect, "norm")
	ev := evidence(t, e.slashes(e.ids[suspect])[0])
	if len(ev.Frames) != 1 {
		t.Fatalf("evidence holds %d ring frames, want 1", len(ev.Frames))
	}
	// The kept frame verifies for anyone with the suspect's key.
	sb, _ := hex.DecodeString(ev.Frames[0].SignedBytes)
	sig, _ := hex.DecodeString(ev.Frames[0].Signature)
	if !ed25519.Verify(key.Public().(ed25519.PublicKey), sb, sig) {
		t.Fatal("kept frame does not verify")
	}
	// The same frame reported again is not a second slash.
	if _, err := e.j.RingEvidence(e.ctx, e.job, e.ids[suspect], rep); err != nil {
		t.Fatal(err)
	}
	if sl := e.slashes(e.ids[suspect]); len(sl) != 1 {
		t.Fatalf("%d slashes after the same report twice", len(sl))
	}
}
