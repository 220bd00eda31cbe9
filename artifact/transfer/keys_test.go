package transfer

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/keys/edkey/edkeytest"
)

// authHeader encodes an authorization from issuer with the given signature.
func authHeader(t *testing.T, issuer []byte, sign func(payload []byte) []byte) string {
	t.Helper()
	a := Authorization{Format: 1, Artifact: "bafkqaaa", Audience: strings.Repeat("11", 32), Issuer: hex.EncodeToString(issuer),
		Expires: time.Now().Add(time.Minute).Unix(), Nonce: strings.Repeat("ab", 16)}
	payload, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return AuthScheme + " " + enc.EncodeToString(payload) + "." + enc.EncodeToString(sign(payload))
}

// Authorizations are refused for every issuer key and signature edkey
// refuses; the small-order forgery verified with crypto/ed25519 alone.
func TestAuthorizationRefusesBadKeysAndSignatures(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	sign := func(p []byte) []byte { return ed25519.Sign(priv, append([]byte(authDomain), p...)) }
	if _, _, err := ParseAuthorization(authHeader(t, pub, sign)); err != nil {
		t.Fatal(err)
	}
	forged := authHeader(t, edkeytest.Identity, func([]byte) []byte { return edkeytest.Forgery })
	if _, _, err := ParseAuthorization(forged); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("the small-order forgery: got %v, want ErrUnauthorized", err)
	}
	for _, k := range edkeytest.BadKeys(pub) {
		if _, _, err := ParseAuthorization(authHeader(t, k.Key, sign)); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("issuer key %s: got %v, want ErrUnauthorized", k.Name, err)
		}
	}
	var good []byte
	authHeader(t, pub, func(p []byte) []byte { good = sign(p); return good })
	for _, s := range edkeytest.BadSignatures(good) {
		h := authHeader(t, pub, func([]byte) []byte { return s.Sig })
		if _, _, err := ParseAuthorization(h); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("signature %s: got %v, want ErrUnauthorized", s.Name, err)
		}
	}
}

// Peer keys given as KEYHEX@host:port are checked like any other key.
func TestParsePeerRefusesBadKeys(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	if p, err := ParsePeer(hex.EncodeToString(pub) + "@127.0.0.1:1"); err != nil || !p.Key.Equal(pub) {
		t.Fatalf("a valid peer: %v", err)
	}
	for _, k := range edkeytest.BadKeys(pub) {
		if _, err := ParsePeer(hex.EncodeToString(k.Key) + "@127.0.0.1:1"); err == nil {
			t.Errorf("peer key %s accepted", k.Name)
		}
	}
}
