package ring_test

import (
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/zooai/gym/protocol/ring"
)

// FuzzOpenEvidence: arbitrary evidence never panics, and whatever is
// accepted really is signed by the key, for a payload that matches.
func FuzzOpenEvidence(f *testing.F) {
	key := keyFor(3)
	payload := []byte{0, 0, 128, 63, 0, 0, 0, 64} // 1.0, 2.0
	h := ring.Header{Wire: ring.FP32, Count: 2, Total: 2, Epoch: 4, Hash: ring.PayloadHash(payload)}
	frame := ring.EncodeFrame(h, payload)
	sb := ring.SignedBytes("job", frame)
	f.Add(sb, ed25519.Sign(key, sb), payload)
	f.Add(sb[:10], ed25519.Sign(key, sb), payload)
	f.Fuzz(func(t *testing.T, sb, sig, payload []byte) {
		got, err := ring.OpenEvidence(key.Public().(ed25519.PublicKey), sb, sig, payload)
		if err != nil {
			if !errors.Is(err, ring.ErrEvidence) {
				t.Fatalf("error %v does not wrap ErrEvidence", err)
			}
			return
		}
		if !ed25519.Verify(key.Public().(ed25519.PublicKey), sb, sig) || ring.PayloadHash(payload) != got.Header.Hash {
			t.Fatal("accepted evidence that does not verify")
		}
	})
}
