package state

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/zooai/gym/keys/edkey/edkeytest"
)

// Node ids and request signatures are refused with a reason whenever
// edkey refuses them.
func TestNodeKeysAndSignatures(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	for _, k := range edkeytest.BadKeys(pub) {
		if _, err := ParsePublicKey(hex.EncodeToString(k.Key)); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("node id %s: got %v, want ErrInvalidKey", k.Name, err)
		}
	}
	msg := []byte("request")
	sig := ed25519.Sign(priv, msg)
	if err := verifyNode("n", pub, msg, sig); err != nil {
		t.Fatal(err)
	}
	for _, s := range edkeytest.BadSignatures(sig) {
		if err := verifyNode("n", pub, msg, s.Sig); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("signature %s: got %v, want ErrUnauthenticated", s.Name, err)
		}
	}
}
