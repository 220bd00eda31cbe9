package artifact

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/zooai/gym/keys/edkey/edkeytest"
)

// A manifest's creator key and signature are refused whenever edkey
// refuses them; the small-order forgery (identity creator, R = identity,
// S = 0) verified with crypto/ed25519 alone.
func TestManifestRefusesBadKeysAndSignatures(t *testing.T) {
	s, err := Sign(testManifest(1), testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	parse := func(creator []byte, sig []byte) error {
		c := *s
		c.Manifest.Creator = hex.EncodeToString(creator)
		c.Sig = hex.EncodeToString(sig)
		enc, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseSigned(enc)
		return err
	}
	pub := testKey(1).Public().(ed25519.PublicKey)
	sig, _ := hex.DecodeString(s.Sig)
	if err := parse(pub, sig); err != nil {
		t.Fatal(err)
	}
	if err := parse(edkeytest.Identity, edkeytest.Forgery); !errors.Is(err, ErrManifest) {
		t.Errorf("the small-order forgery: got %v, want ErrManifest", err)
	}
	for _, k := range edkeytest.BadKeys(pub) {
		if err := parse(k.Key, sig); !errors.Is(err, ErrManifest) {
			t.Errorf("creator key %s: got %v, want ErrManifest", k.Name, err)
		}
	}
	for _, bs := range edkeytest.BadSignatures(sig) {
		if err := parse(pub, bs.Sig); !errors.Is(err, ErrSignature) {
			t.Errorf("signature %s: got %v, want ErrSignature", bs.Name, err)
		}
	}
}
