package tcp

import (
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/zooai/gym/keys/edkey/edkeytest"
)

// certFor makes a certificate for pub signed by signer: what a peer could
// present (with a small-order pub it can even forge the TLS handshake's
// signature).
func certFor(t *testing.T, pub ed25519.PublicKey, signer ed25519.PrivateKey) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Unix(0, 0), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestPeerKeyRefusesBadKeys(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	if k, err := peerKey([][]byte{certFor(t, pub, priv)}); err != nil || !k.Equal(pub) {
		t.Fatalf("a valid certificate: %v", err)
	}
	for _, k := range edkeytest.BadKeys(pub) {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Unix(0, 0), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(nil, tmpl, tmpl, ed25519.PublicKey(k.Key), priv)
		if err != nil {
			continue // x509 cannot even encode it
		}
		if _, err := peerKey([][]byte{der}); !errors.Is(err, ErrPeerKey) {
			t.Errorf("certificate key %s: got %v, want ErrPeerKey", k.Name, err)
		}
	}
}
