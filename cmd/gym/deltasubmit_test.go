package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/protocol/delta"
)

// TestDeltaSubmit sends a delta to a real hanzod, by file and by CID from
// a store: an unregistered signer's upload is refused from its
// announcement, and files that do not verify, or are not --key's, are never
// sent.
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

	r := gym(t, "--orchestrator", d.addr, "delta", "submit", "--key", keyPath, "--json", file)
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "not registered") {
		t.Fatalf("unregistered signer: %+v", r)
	}
	store := filepath.Join(dir, "artifacts")
	cid := strings.TrimSpace(mustGym(t, "artifact", "publish", "--store", store, "--key", keyPath, "--kind", "delta", file))
	if r := gym(t, "--orchestrator", d.addr, "delta", "submit", "--key", keyPath, "--json", "--store", store, cid); r.code != 1 || !strings.Contains(r.stderr, "not registered") {
		t.Fatalf("by CID: %+v", r)
	}
	if r := gym(t, "--orchestrator", d.addr, "delta", "submit", file); r.code != 2 || !strings.Contains(r.stderr, "--key") {
		t.Fatalf("without --key: %+v", r)
	}

	// Not sent: a CID without a store, a file that does not verify or is signed by another key.
	if r := gym(t, "--orchestrator", d.addr, "delta", "submit", "--key", keyPath, cid); r.code != 2 || !strings.Contains(r.stderr, "--store") {
		t.Fatalf("CID without --store: %+v", r)
	}
	bad := bytes.Clone(buf.Bytes())
	bad[len(bad)/2] ^= 1
	os.WriteFile(filepath.Join(dir, "bad.delta"), bad, 0o644)
	if r := gym(t, "--orchestrator", d.addr, "delta", "submit", "--key", keyPath, filepath.Join(dir, "bad.delta")); r.code != 1 || r.stdout != "" {
		t.Fatalf("corrupt file: %+v", r)
	}
	other := "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	if r := gym(t, "--orchestrator", d.addr, "delta", "submit", "--key", keyPath, "--pubkey", other, file); r.code != 2 || r.stdout != "" {
		t.Fatalf("other signer: %+v", r)
	}
}
