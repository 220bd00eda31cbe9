package nodeclient

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/keys/edkey/edkeytest"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/nodeauth"
)

// strictHanzod checks Register and Heartbeat as hanzod does: signed for
// its key (the audience), timestamp within 60 s of its clock, sequence
// above the last accepted and not beyond nodeauth.SeqLimit (lead 1 h). A
// refusal carries its time and key in the trailers, as hanzod's do.
type strictHanzod struct {
	key ed25519.PublicKey
	now func() time.Time

	mu       sync.Mutex
	last     uint64
	accepted []uint64
	refused  []string
	// registered is the last Register request, as sent.
	registered *pb.RegisterRequest
}

func (f *strictHanzod) Invoke(_ context.Context, method string, req, _ any, opts ...grpc.CallOption) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	for _, o := range opts {
		if tr, ok := o.(grpc.TrailerCallOption); ok {
			*tr.TrailerAddr = metadata.Pairs(TimeTrailer, strconv.FormatInt(now.UnixMilli(), 10), KeyTrailer, hex.EncodeToString(f.key))
		}
	}
	var a nodeauth.Auth
	var msg []byte
	switch r := req.(type) {
	case *pb.RegisterRequest:
		a = nodeauth.Auth{Node: r.Auth.Node, Seq: r.Auth.Seq, Timestamp: r.Auth.TimestampMs, Audience: f.key}
		hw := hardware.Report{Backends: r.Backends, DTypes: r.Dtypes}
		for _, x := range r.Accelerators {
			hw.Accelerators = append(hw.Accelerators, hardware.Accelerator{Name: x.Name, TotalMiB: x.TotalMib, FreeMiB: x.FreeMib, Compute: x.Compute})
		}
		msg = nodeauth.Register{Auth: a, Address: r.Address, Region: r.Region, GPUModel: r.GpuModel, VRAMMiB: r.VramMib, Report: r.AttestationReport, ProbeAddress: r.ProbeAddress, Role: r.Role,
			Hardware: hw}.SignedBytes()
		f.registered = r
	case *pb.HeartbeatRequest:
		a = nodeauth.Auth{Node: r.Auth.Node, Seq: r.Auth.Seq, Timestamp: r.Auth.TimestampMs, Audience: f.key}
		msg = nodeauth.Heartbeat{Auth: a}.SignedBytes()
	default:
		return status.Error(codes.Unimplemented, method)
	}
	pub, _ := hex.DecodeString(a.Node)
	sig := req.(interface{ GetAuth() *pb.Auth }).GetAuth().Signature
	refuse := func(why string) error {
		f.refused = append(f.refused, why)
		return status.Error(codes.Unauthenticated, why)
	}
	switch {
	case !ed25519.Verify(pub, msg, sig):
		return refuse("signature")
	case now.UnixMilli()-a.Timestamp > 60_000 || a.Timestamp-now.UnixMilli() > 60_000:
		return refuse("stale")
	case a.Seq > nodeauth.SeqLimit(now.UnixMilli(), time.Minute, time.Hour):
		return refuse("ahead")
	case a.Seq <= f.last:
		return refuse("replay")
	}
	f.last = a.Seq
	f.accepted = append(f.accepted, a.Seq)
	return nil
}

func (f *strictHanzod) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("no streams")
}

// TestLearnsHanzodKey: a node that does not know hanzod's key learns it
// from the first refusal, signs for it, and keeps it: restarted, it signs
// for that key at once.
func TestLearnsHanzodKey(t *testing.T) {
	dir := t.TempDir()
	f := &strictHanzod{key: pub(key(200)), now: time.Now}
	c, err := New(Config{Key: key(9), Conn: f, Dir: dir})
	must(t, err)
	must(t, c.Register(context.Background(), "10.0.0.1:9000", ""))
	if !c.Hanzod().Equal(f.key) || len(f.accepted) != 1 || strings.Join(f.refused, ",") != "signature" {
		t.Fatalf("key %x, accepted %v, refused %v", c.Hanzod(), f.accepted, f.refused)
	}
	b, err := os.ReadFile(filepath.Join(dir, HanzodKeyFile))
	must(t, err)
	if strings.TrimSpace(string(b)) != hex.EncodeToString(f.key) {
		t.Fatalf("%s holds %q", HanzodKeyFile, b)
	}
	must(t, c.Close())
	c, err = New(Config{Key: key(9), Conn: f, Dir: dir})
	must(t, err)
	defer c.Close()
	_, err = c.Heartbeat(context.Background())
	must(t, err)
	if len(f.refused) != 1 || len(f.accepted) != 2 {
		t.Fatalf("restarted: accepted %v, refused %v", f.accepted, f.refused)
	}
}

// TestOtherHanzodRefused: a node that signs for one hanzod does not start
// signing for another that names a different key: it says so.
func TestOtherHanzodRefused(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		dir := t.TempDir()
		cfg := Config{Key: key(9), Conn: &strictHanzod{key: pub(key(201)), now: time.Now}, Dir: dir}
		if pinned {
			cfg.Hanzod = pub(key(200))
		} else {
			must(t, os.WriteFile(filepath.Join(dir, HanzodKeyFile), []byte(hex.EncodeToString(pub(key(200)))+"\n"), 0o644))
		}
		c, err := New(cfg)
		must(t, err)
		err = c.Register(context.Background(), "10.0.0.1:9000", "")
		if err == nil || !strings.Contains(err.Error(), "different hanzod") {
			t.Fatalf("pinned=%v: %v", pinned, err)
		}
		if !c.Hanzod().Equal(pub(key(200))) {
			t.Fatalf("pinned=%v: the node now signs for %x", pinned, c.Hanzod())
		}
		c.Close()
	}
}

// TestSeqStaysNearHanzodsClock: sequence numbers stay within the lead
// hanzod allows ahead of its clock (nodeauth.SeqLimit) when the node
// restarts again and again (the high-water mark on disk must not run
// ahead by its reserve on each restart), and when its clock is hours
// ahead of hanzod's (the numbers of refused requests are given back).
func TestSeqStaysNearHanzodsClock(t *testing.T) {
	hz := time.Unix(1_767_225_600, 0)
	dir := t.TempDir()
	f := &strictHanzod{key: pub(key(200)), now: func() time.Time { return hz }}
	for i := range 20 { // a worker restarting in a loop, within a second
		c, err := New(Config{Key: key(9), Conn: f, Dir: dir, Now: func() time.Time { return hz }})
		must(t, err)
		if i == 0 {
			must(t, c.Register(context.Background(), "10.0.0.1:9000", ""))
		} else if _, err := c.Heartbeat(context.Background()); err != nil {
			t.Fatalf("restart %d: %v (refused %v)", i, err, f.refused)
		}
		must(t, c.Close())
		hz = hz.Add(50 * time.Millisecond)
	}
	// A node whose clock is 3 hours ahead of hanzod's, first run.
	dir = t.TempDir()
	f = &strictHanzod{key: pub(key(200)), now: func() time.Time { return hz }}
	ahead := func() time.Time { return hz.Add(3 * time.Hour) }
	c, err := New(Config{Key: key(10), Conn: f, Dir: dir, Now: ahead})
	must(t, err)
	must(t, c.Register(context.Background(), "10.0.0.1:9000", ""))
	must(t, c.Close())
	hz = hz.Add(2 * time.Second)
	c, err = New(Config{Key: key(10), Conn: f, Dir: dir, Now: ahead}) // restarted: its mark on disk
	must(t, err)
	defer c.Close()
	if _, err := c.Heartbeat(context.Background()); err != nil {
		t.Fatalf("restarted with the clock ahead: %v (refused %v)", err, f.refused)
	}
}

// TestBadHanzodKeyRefused: a trailer or a file naming a key edkey refuses
// (wrong length, small order, not canonical, off the curve) is not
// signed for.
func TestBadHanzodKeyRefused(t *testing.T) {
	for _, bad := range edkeytest.BadKeys(pub(key(200))) {
		if _, err := parseKey(hex.EncodeToString(bad.Key)); err == nil {
			t.Errorf("%s: accepted", bad.Name)
		}
		dir := t.TempDir()
		must(t, os.WriteFile(filepath.Join(dir, HanzodKeyFile), []byte(hex.EncodeToString(bad.Key)), 0o644))
		if c, err := New(Config{Key: key(9), Conn: &strictHanzod{key: pub(key(200)), now: time.Now}, Dir: dir}); err == nil {
			c.Close()
			t.Errorf("%s: a node started with it in %s", bad.Name, HanzodKeyFile)
		}
	}
	if _, err := parseKey(hex.EncodeToString(pub(key(200)))); err != nil {
		t.Fatal(err)
	}
}
