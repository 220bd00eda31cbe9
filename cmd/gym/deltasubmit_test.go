package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/delta"
	"github.com/zooai/gym/nodekey"
)

// TestDeltaSubmit sends a delta to a real hanzod, by file and by CID from
// a store: the verdict comes back (an unregistered signer is refused, as
// hanzod refuses it), and files that do not verify are never sent.
func TestDeltaSubmit(t *testing.T) {
	d := startHanzod(t, "127.0.0.1:0", plaintext, "--metrics", "")
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "node.key")
	mustGym(t, "keygen", "--out", keyPath)
	key, err := nodekey.Load(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	meta := delta.NewMetadata(delta.MetadataFields{Job: "job-00000001", Epoch: 1, Step: 2, Node: nodekey.PublicHex(key), Sequence: 1})
	var buf bytes.Buffer
	ts := []delta.Tensor{{Name: "lora.q_proj.A.weight", DType: delta.FP32, Shape: []uint64{2}, Data: make([]byte, 8)}}
	if _, err := delta.Write(context.Background(), &buf, key, ts, delta.WriteOptions{Compression: delta.Zstd, Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "a.delta")
	os.WriteFile(file, buf.Bytes(), 0o644)

	verdict := func(r result) submitResult {
		t.Helper()
		var v submitResult
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &v); err != nil {
			t.Fatalf("%v: %+v", err, r)
		}
		return v
	}
	r := gym(t, "--orchestrator", d.addr, "delta", "submit", "--json", file)
	v := verdict(r)
	if r.code != 1 || v.Accepted || v.Reason != "signature" || !strings.Contains(v.Detail, "not a registered node") || len(v.Digest) != 64 {
		t.Fatalf("unregistered signer: %+v %+v", r, v)
	}

	store := filepath.Join(dir, "artifacts")
	cid := strings.TrimSpace(mustGym(t, "artifact", "publish", "--store", store, "--key", keyPath, "--kind", "delta", file))
	r = gym(t, "--orchestrator", d.addr, "delta", "submit", "--json", "--store", store, cid)
	if w := verdict(r); r.code != 1 || w.Source != cid || w.Digest != v.Digest || w.Reason != v.Reason {
		t.Fatalf("by CID: %+v, by file: %+v", w, v)
	}

	// Not sent: a CID without a store, a file that does not verify or is signed by another key.
	if r := gym(t, "--orchestrator", d.addr, "delta", "submit", cid); r.code != 2 || !strings.Contains(r.stderr, "--store") {
		t.Fatalf("CID without --store: %+v", r)
	}
	bad := bytes.Clone(buf.Bytes())
	bad[len(bad)/2] ^= 1
	os.WriteFile(filepath.Join(dir, "bad.delta"), bad, 0o644)
	if r := gym(t, "--orchestrator", d.addr, "delta", "submit", filepath.Join(dir, "bad.delta")); r.code != 1 || r.stdout != "" {
		t.Fatalf("corrupt file: %+v", r)
	}
	other := "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	if r := gym(t, "--orchestrator", d.addr, "delta", "submit", "--pubkey", other, file); r.code != 1 || r.stdout != "" {
		t.Fatalf("other signer: %+v", r)
	}
}
