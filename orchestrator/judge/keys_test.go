package judge_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"testing"

	"github.com/zooai/gym/keys/edkey/edkeytest"
	"github.com/zooai/gym/orchestrator/judge"
)

// VerifyRecord says false, never panics, for every key and signature edkey
// refuses (crypto/ed25519 panics on a key that is not 32 bytes).
func TestVerifyRecordRefusesBadKeysAndSignatures(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	const kind, record = "settlement", `{"epoch":1}`
	sig := ed25519.Sign(priv, judge.RecordMessage(kind, []byte(record)))
	if !judge.VerifyRecord(pub, kind, record, hex.EncodeToString(sig)) {
		t.Fatal("a valid record does not verify")
	}
	for _, k := range edkeytest.BadKeys(pub) {
		if judge.VerifyRecord(k.Key, kind, record, hex.EncodeToString(sig)) {
			t.Errorf("key %s: verified", k.Name)
		}
	}
	if judge.VerifyRecord(edkeytest.Identity, kind, record, hex.EncodeToString(edkeytest.Forgery)) {
		t.Error("the small-order forgery verified")
	}
	for _, s := range edkeytest.BadSignatures(sig) {
		if judge.VerifyRecord(pub, kind, record, hex.EncodeToString(s.Sig)) {
			t.Errorf("signature %s: verified", s.Name)
		}
	}
}
