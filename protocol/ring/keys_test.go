package ring_test

import (
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/zooai/gym/keys/edkey/edkeytest"
	"github.com/zooai/gym/protocol/ring"
)

// A ring configuration refuses member keys edkey refuses: a small-order
// member key would let anyone sign frames as that member.
func TestConfigRefusesBadMemberKeys(t *testing.T) {
	good := keyFor(1).Public().(ed25519.PublicKey)
	other := keyFor(2).Public().(ed25519.PublicKey)
	cfg := func(k []byte) ring.Config {
		return ring.Config{Job: "j", Epoch: 1, Members: []ring.Member{{ID: "a", PublicKey: other, Addr: "a:1"}, {ID: "b", PublicKey: k, Addr: "b:1"}}}
	}
	if c := cfg(good); c.Validate() != nil {
		t.Fatal(c.Validate())
	}
	for _, k := range edkeytest.BadKeys(good) {
		c := cfg(k.Key)
		if err := c.Validate(); !errors.Is(err, ring.ErrConfig) {
			t.Errorf("member key %s: got %v, want ErrConfig", k.Name, err)
		}
	}
}

// Evidence is refused, with a reason and without a panic, for every key and
// signature edkey refuses, the small-order forgery among them.
func TestOpenEvidenceRefusesBadKeysAndSignatures(t *testing.T) {
	key := keyFor(3)
	pub := key.Public().(ed25519.PublicKey)
	payload := []byte{0, 0, 128, 63, 0, 0, 0, 64}
	h := ring.Header{Wire: ring.FP32, Count: 2, Total: 2, Epoch: 4, Hash: ring.PayloadHash(payload)}
	sb := ring.SignedBytes("job", ring.EncodeFrame(h, payload))
	sig := ed25519.Sign(key, sb)
	if _, err := ring.OpenEvidence(pub, sb, sig, payload); err != nil {
		t.Fatal(err)
	}
	for _, k := range edkeytest.BadKeys(pub) {
		if _, err := ring.OpenEvidence(k.Key, sb, sig, payload); !errors.Is(err, ring.ErrEvidence) {
			t.Errorf("signer key %s: got %v, want ErrEvidence", k.Name, err)
		}
	}
	if _, err := ring.OpenEvidence(edkeytest.Identity, sb, edkeytest.Forgery, payload); !errors.Is(err, ring.ErrEvidence) {
		t.Errorf("the small-order forgery: got %v, want ErrEvidence", err)
	}
	for _, s := range edkeytest.BadSignatures(sig) {
		if _, err := ring.OpenEvidence(pub, sb, s.Sig, payload); !errors.Is(err, ring.ErrEvidence) {
			t.Errorf("signature %s: got %v, want ErrEvidence", s.Name, err)
		}
	}
}
