package nodeauth_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/nodeauth"
)

// The signed bytes and signatures of each request: the wire format must
// not change by accident (nodes and hanzod of different builds verify
// each other). Recorded anew for v2, which signs the audience (hanzod's
// key; here the key of seed 1).
var golden = []string{
	"7a6f6f2d67796d2f68616e7a6f642f76322f72656769737465720000000020cecc1507dc1ddd7295951c290888f095adb9044d1b73d696e6df065d683bd4fc000000403362366132376263636562366134326436326133613864303261366630643733363533323135373731646532343361363361633034386131386235396461323900000000000000070000019b76daa87b0000000d31302e302e302e313a39303030000000026575000000044831303000000000000140000000000201020000000d31302e302e302e313a39303031",
	"41a32af6466c24dae510b0e6dd1293a94ee278b6c11c4ae6288019f407d265796ffa67d2208efc4c520bf0f77f49b8ac4cce051b12f55ab10f6cf039afd19a06",
	"7a6f6f2d67796d2f68616e7a6f642f76322f6865617274626561740000000020cecc1507dc1ddd7295951c290888f095adb9044d1b73d696e6df065d683bd4fc000000403362366132376263636562366134326436326133613864303261366630643733363533323135373731646532343361363361633034386131386235396461323900000000000000070000019b76daa87b",
	"d8148f5949fed0d7ce5f229b76362e69e118cc4ec2549ee01b474900f7668827d1903a09e57f8cbc409f4f49b420f4e35bfe26c35ff0e98d76180465fbf75b04",
	"7a6f6f2d67796d2f68616e7a6f642f76322f62616e6477696474680000000020cecc1507dc1ddd7295951c290888f095adb9044d1b73d696e6df065d683bd4fc000000403362366132376263636562366134326436326133613864303261366630643733363533323135373731646532343361363361633034386131386235396461323900000000000000070000019b76daa87b0000000c6a6f622d303030303030303100000000000000020000000170000000000000000500000001710000000000000006",
	"93175170761c8426f2f05efa7acb476c9b62ed67983bc3faedfd871c3423d2c9cfc280367c00065c880547c5788c20475845f97bc5749e1cd222852ed5b58d0c",
	"7a6f6f2d67796d2f68616e7a6f642f76322f737573706563740000000020cecc1507dc1ddd7295951c290888f095adb9044d1b73d696e6df065d683bd4fc000000403362366132376263636562366134326436326133613864303261366630643733363533323135373731646532343361363361633034386131386235396461323900000000000000070000019b76daa87b0000000c6a6f622d30303030303030310000000363666700000001730000000774696d656f7574000000026576",
	"72ed739f7b01acce54cff315cdde50cedd58dcf772a16c948846aaed476336f8cc7ca80bad1891b38898c60774982c8552f0a28c8746140d1a6843f203b3b501",
}

func TestSignedBytesGolden(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	a := nodeauth.Auth{Seq: 7, Timestamp: 1767225600123, Audience: hanzod(1)}
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
	// A register without a probe address signs the shorter form.
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
	want := "7a6f6f2d67796d2f68616e7a6f642f76322f7375626d69746a6f6200"
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

func hanzod(seed byte) ed25519.PublicKey {
	s := make([]byte, 32)
	s[0] = seed
	return ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey)
}

// TestAudience: every request kind signs its audience, so a request signed
// for one hanzod does not verify at another (nor at one that fills in no
// key).
func TestAudience(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	pub := key.Public().(ed25519.PublicKey)
	a := nodeauth.Auth{Seq: 7, Timestamp: 1767225600123, Audience: hanzod(1)}
	type req interface{ SignedBytes() []byte }
	with := func(a nodeauth.Auth) []req {
		return []req{
			nodeauth.Register{Auth: a, Address: "10.0.0.1:9000", GPUModel: "H100", VRAMMiB: 1},
			nodeauth.Heartbeat{Auth: a},
			nodeauth.ReportBandwidth{Auth: a, Job: "j"},
			nodeauth.ReportSuspect{Auth: a, Job: "j"},
			nodeauth.RefuseJob{Auth: a, Job: "j", Reason: "r"},
			nodeauth.ListChecks{Auth: a},
			nodeauth.SubmitVerdict{Auth: a, Job: "j"},
			nodeauth.SubmitJob{Auth: a, Spec: []byte{1}},
		}
	}
	other, none := a, a
	other.Audience, none.Audience = hanzod(2), nil
	signed, atOther, atNone := with(a), with(other), with(none)
	for i, r := range signed {
		sig := ed25519.Sign(key, r.SignedBytes())
		if !ed25519.Verify(pub, r.SignedBytes(), sig) {
			t.Fatalf("%T: does not verify for its own audience", r)
		}
		if ed25519.Verify(pub, atOther[i].SignedBytes(), sig) || ed25519.Verify(pub, atNone[i].SignedBytes(), sig) {
			t.Fatalf("%T: a signature for one hanzod verifies for another", r)
		}
	}
}

// TestSeqLimit: (now + skew) in nanoseconds plus the lead, saturating
// instead of wrapping.
func TestSeqLimit(t *testing.T) {
	if got := nodeauth.SeqLimit(1767225600000, time.Minute, time.Hour); got != 1767229260000000000 {
		t.Fatalf("limit %d", got)
	}
	if got := nodeauth.SeqLimit(math.MaxInt64-time.Minute.Milliseconds(), time.Minute, time.Hour); got != math.MaxUint64 {
		t.Fatalf("far future: %d, want saturation", got)
	}
	if got := nodeauth.SeqLimit(-time.Hour.Milliseconds(), time.Minute, time.Hour); got != uint64(time.Hour) {
		t.Fatalf("before 1970: %d", got)
	}
}

// TestRegisterHardwareSigned: the hardware report is signed after the
// other fields (the golden bytes above are the form without one, which
// still verifies), every part of it is covered, and the encoding is the one
// docs/orchestrator.md spells out.
func TestRegisterHardwareSigned(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	a := nodeauth.Auth{Seq: 7, Timestamp: 1767225600123, Audience: hanzod(1)}
	base := nodeauth.Register{Auth: a, Address: "10.0.0.1:9000", GPUModel: "L4", VRAMMiB: 23034}
	r := base
	r.Hardware = hardware.Report{
		Accelerators: []hardware.Accelerator{{Name: "L4", TotalMiB: 23034, FreeMiB: 22000, Compute: "8.9"}, {Name: "cpu", TotalMiB: 64000, FreeMiB: 60000}},
		Backends:     []string{"torch"}, DTypes: []string{"bfloat16", "nf4"},
	}
	nodeauth.SignRegister(key, &r)
	pub := key.Public().(ed25519.PublicKey)
	if !ed25519.Verify(pub, r.SignedBytes(), r.Sig) {
		t.Fatal("does not verify")
	}
	// The tail after the legacy form: probe address and role (empty), then
	// the lists.
	base.Auth = r.Auth
	tail := hex.EncodeToString(r.SignedBytes()[len(base.SignedBytes()):])
	want := "00000000" + "00000000" + "0000000000000002" +
		"000000024c34" + "00000000000059fa" + "00000000000055f0" + "00000003382e39" +
		"00000003637075" + "000000000000fa00" + "000000000000ea60" + "00000000" +
		"0000000000000001" + "00000005746f726368" +
		"0000000000000002" + "0000000862666c6f61743136" + "000000036e6634"
	if tail != want {
		t.Fatalf("hardware tail %s\nwant %s", tail, want)
	}
	for name, change := range map[string]func(*nodeauth.Register){
		"free memory": func(r *nodeauth.Register) { r.Hardware.Accelerators[0].FreeMiB++ },
		"compute":     func(r *nodeauth.Register) { r.Hardware.Accelerators[0].Compute = "9.0" },
		"host memory": func(r *nodeauth.Register) { r.Hardware.Accelerators[1].TotalMiB *= 2 },
		"backend":     func(r *nodeauth.Register) { r.Hardware.Backends = []string{"go"} },
		"dtype":       func(r *nodeauth.Register) { r.Hardware.DTypes = r.Hardware.DTypes[:1] },
		"dropped":     func(r *nodeauth.Register) { r.Hardware = hardware.Report{} },
	} {
		c := r
		c.Hardware = hardware.Report{Accelerators: slices.Clone(r.Hardware.Accelerators), Backends: slices.Clone(r.Hardware.Backends), DTypes: slices.Clone(r.Hardware.DTypes)}
		change(&c)
		if ed25519.Verify(pub, c.SignedBytes(), r.Sig) {
			t.Errorf("%s changed, the signature still verifies", name)
		}
	}
}
