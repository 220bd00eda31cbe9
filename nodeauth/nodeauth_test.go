package nodeauth_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"testing"

	"github.com/zooai/gym/nodeauth"
)

// The signed bytes and signatures of each request, recorded from the
// orchestrator state's encoding before it moved here: the wire format must
// not change (nodes and hanzod of different builds verify each other).
var golden = []string{
	"7a6f6f2d67796d2f68616e7a6f642f76312f726567697374657200000000403362366132376263636562366134326436326133613864303261366630643733363533323135373731646532343361363361633034386131386235396461323900000000000000070000019b76daa87b0000000d31302e302e302e313a39303030000000026575000000044831303000000000000140000000000201020000000d31302e302e302e313a39303031",
	"2f648d2274f879960220b69682fa4718192caea862b1e2ac23e1560cc2bce604b110aeb88fa4559e77ffdb92fac18b3cddbd14713eae7828dfb938bb71a72400",
	"7a6f6f2d67796d2f68616e7a6f642f76312f68656172746265617400000000403362366132376263636562366134326436326133613864303261366630643733363533323135373731646532343361363361633034386131386235396461323900000000000000070000019b76daa87b",
	"7a5969b5580df850b3af1ad3e6e4f24d609318f20b81fe979961a8e64c93143103df6849374e0ef51d99353b3dbfa80b4cbed4fc2673054bab3cb6d5fc99f901",
	"7a6f6f2d67796d2f68616e7a6f642f76312f62616e64776964746800000000403362366132376263636562366134326436326133613864303261366630643733363533323135373731646532343361363361633034386131386235396461323900000000000000070000019b76daa87b0000000c6a6f622d303030303030303100000000000000020000000170000000000000000500000001710000000000000006",
	"541e46df76e53b3416c63f69039f9c94eeb073e051e34d33a84f0b5da1cbbee325ee9541cde33db4de8221e1b38283223919928021d2379d7ffbe7529109b201",
	"7a6f6f2d67796d2f68616e7a6f642f76312f7375737065637400000000403362366132376263636562366134326436326133613864303261366630643733363533323135373731646532343361363361633034386131386235396461323900000000000000070000019b76daa87b0000000c6a6f622d30303030303030310000000363666700000001730000000774696d656f7574000000026576",
	"d0c5a253d6f0562191a7eb8369dd9e2280bffcdd4ddaf0b7c624ebe83bebcc3246ccafb175f0dcd5aa1781535440ac2f81f8013381e02b46a4f0b6bc95bf740e",
}

func TestSignedBytesGolden(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	a := nodeauth.Auth{Seq: 7, Timestamp: 1767225600123}
	r := nodeauth.Register{Auth: a, Address: "10.0.0.1:9000", Region: "eu", GPUModel: "H100", VRAMMiB: 81920, Report: []byte{1, 2}, ProbeAddress: "10.0.0.1:9001"}
	nodeauth.SignRegister(key, &r)
	h := nodeauth.Heartbeat{Auth: a}
	nodeauth.SignHeartbeat(key, &h)
	b := nodeauth.ReportBandwidth{Auth: a, Job: "job-00000001", Links: []nodeauth.Link{{Peer: "p", Kbps: 5}, {Peer: "q", Kbps: 6}}}
	nodeauth.SignBandwidth(key, &b)
	s := nodeauth.ReportSuspect{Auth: a, Job: "job-00000001", ConfigID: "cfg", Suspect: "s", Kind: "timeout", Evidence: []byte("ev")}
	nodeauth.SignSuspect(key, &s)
	got := [][]byte{r.SignedBytes(), r.Sig, h.SignedBytes(), h.Sig, b.SignedBytes(), b.Sig, s.SignedBytes(), s.Sig}
	for i, x := range got {
		if hex.EncodeToString(x) != golden[i] {
			t.Errorf("%d: %x\nwant %s", i, x, golden[i])
		}
	}
	pub := key.Public().(ed25519.PublicKey)
	if r.Node != hex.EncodeToString(pub) || !ed25519.Verify(pub, r.SignedBytes(), r.Sig) {
		t.Fatal("register: node id or signature")
	}
	// A register without a probe address signs the older, shorter form.
	r.ProbeAddress = ""
	if len(r.SignedBytes()) != len(got[0])-4-len("10.0.0.1:9001") {
		t.Fatal("probe address signed when empty")
	}
}

// A job submission signs its own kind and the spec bytes as sent: a node
// request's signature never verifies as a submission, and a changed spec
// breaks the signature.
func TestSubmitJobSignedBytes(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	pub := key.Public().(ed25519.PublicKey)
	a := nodeauth.Auth{Seq: 7, Timestamp: 1767225600123}
	s := nodeauth.SubmitJob{Auth: a, Spec: []byte{0x0a, 0x01, 'm'}}
	nodeauth.SignSubmitJob(key, &s)
	want := "7a6f6f2d67796d2f68616e7a6f642f76312f7375626d69746a6f6200"
	if got := hex.EncodeToString(s.SignedBytes()); got[:len(want)] != want || !ed25519.Verify(pub, s.SignedBytes(), s.Sig) {
		t.Fatalf("signed bytes %s", got)
	}
	h := nodeauth.Heartbeat{Auth: a}
	nodeauth.SignHeartbeat(key, &h)
	if ed25519.Verify(pub, s.SignedBytes(), h.Sig) {
		t.Fatal("a heartbeat signature verifies as a submission")
	}
	s.Spec = []byte{0x0a, 0x01, 'n'}
	if ed25519.Verify(pub, s.SignedBytes(), s.Sig) {
		t.Fatal("a changed spec still verifies")
	}
}
