package edkeytest

import (
	"crypto/ed25519"
	"testing"

	"github.com/zooai/gym/keys/edkey"
)

func TestCasesAreRefused(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	for _, k := range BadKeys(pub) {
		if edkey.CheckPublicKey(k.Key) == nil {
			t.Errorf("key %s passes", k.Name)
		}
	}
	sig := ed25519.Sign(priv, []byte("m"))
	for _, s := range BadSignatures(sig) {
		if edkey.Verify(pub, []byte("m"), s.Sig) == nil {
			t.Errorf("signature %s passes", s.Name)
		}
	}
	if !ed25519.Verify(Identity, []byte("anything"), Forgery) {
		t.Error("the forgery no longer verifies with crypto/ed25519; the tests that use it prove less")
	}
}
