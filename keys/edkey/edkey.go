// Package edkey checks Ed25519 public keys and signatures strictly, before
// anything is trusted because it verified.
//
// crypto/ed25519 follows RFC 8032 loosely where keys are concerned: it
// accepts a public key of small order (the identity 01 00…00 among them), and
// under such a key a signature with R = identity and S = 0 verifies for every
// message. It also accepts non-canonical point encodings, and it panics on a
// key that is not 32 bytes. Every place where a key or a signature comes from
// outside (a file trailer, a flag, a wire message, a certificate) goes through
// this package instead:
//
//   - [CheckPublicKey] refuses keys that are not 32 bytes, not a point on the
//     curve, not the canonical encoding of their point, or of small order
//     (the point times the cofactor 8 is the identity).
//   - [CheckSignature] refuses signatures that are not 64 bytes or whose S is
//     not below the group order L (S ≥ L is the malleable form).
//   - [Verify] does both and then the Ed25519 verification.
//
// The check is the one libsodium's crypto_sign_verify_detached applies to
// keys (ge25519_has_small_order plus canonical encoding).
package edkey

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"filippo.io/edwards25519"
)

// Sentinel errors; every error of the package wraps one of them.
var (
	ErrKey       = errors.New("edkey: bad Ed25519 public key")
	ErrSignature = errors.New("edkey: bad Ed25519 signature")
)

// Sizes, as crypto/ed25519 has them.
const (
	PublicKeySize = ed25519.PublicKeySize
	SignatureSize = ed25519.SignatureSize
)

var identity = edwards25519.NewIdentityPoint()

// CheckPublicKey returns nil if b is a usable Ed25519 public key: 32 bytes,
// the canonical encoding of a point on the curve, and not of small order.
func CheckPublicKey(b []byte) error {
	if len(b) != PublicKeySize {
		return fmt.Errorf("%w: has %d bytes, want %d", ErrKey, len(b), PublicKeySize)
	}
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		return fmt.Errorf("%w: is not a point on the curve (%x)", ErrKey, b)
	}
	// SetBytes accepts y ≥ p and x = 0 with the sign bit set; re-encoding
	// tells them apart from the one canonical encoding.
	if !bytes.Equal(p.Bytes(), b) {
		return fmt.Errorf("%w: is not the canonical encoding of its point (%x)", ErrKey, b)
	}
	if new(edwards25519.Point).MultByCofactor(p).Equal(identity) == 1 {
		return fmt.Errorf("%w: is of small order, signatures under it prove nothing (%x)", ErrKey, b)
	}
	return nil
}

// PublicKey checks b and returns a copy of it as a key.
func PublicKey(b []byte) (ed25519.PublicKey, error) {
	if err := CheckPublicKey(b); err != nil {
		return nil, err
	}
	return ed25519.PublicKey(bytes.Clone(b)), nil
}

// ParseHex decodes a key written as 64 hex characters (either case) and
// checks it.
func ParseHex(s string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not hex: %v", ErrKey, err)
	}
	if len(b) != PublicKeySize {
		return nil, fmt.Errorf("%w: has %d bytes (%d hex characters), want %d", ErrKey, len(b), len(s), PublicKeySize)
	}
	return PublicKey(b)
}

// CheckSignature returns nil if sig is 64 bytes and its S half is a
// canonical scalar (below the group order L).
func CheckSignature(sig []byte) error {
	if len(sig) != SignatureSize {
		return fmt.Errorf("%w: has %d bytes, want %d", ErrSignature, len(sig), SignatureSize)
	}
	if _, err := new(edwards25519.Scalar).SetCanonicalBytes(sig[32:]); err != nil {
		return fmt.Errorf("%w: has S ≥ L, the non-canonical (malleable) form", ErrSignature)
	}
	return nil
}

// Verify checks pub and sig and then that sig signs msg under pub. The error
// wraps ErrKey or ErrSignature.
func Verify(pub, msg, sig []byte) error {
	if err := CheckPublicKey(pub); err != nil {
		return err
	}
	if err := CheckSignature(sig); err != nil {
		return err
	}
	if !ed25519.Verify(ed25519.PublicKey(pub), msg, sig) {
		return fmt.Errorf("%w: does not verify under key %x", ErrSignature, pub)
	}
	return nil
}

// Reason is err's message without the package's sentinel prefix, a
// predicate for callers that wrap it under a sentinel of their own:
// fmt.Errorf("%w: trailer key %s", ErrKey, edkey.Reason(err)) reads
// "…: trailer key is of small order, …".
func Reason(err error) string {
	s := err.Error()
	for _, p := range []error{ErrKey, ErrSignature} {
		if t, ok := strings.CutPrefix(s, p.Error()+": "); ok {
			return t
		}
	}
	return s
}
