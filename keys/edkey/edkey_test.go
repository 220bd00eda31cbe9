package edkey

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"math/big"
	"testing"

	"filippo.io/edwards25519"
)

// smallOrder are the canonical encodings of the eight points of order
// dividing 8 (libsodium's blocklist, canonical half).
var smallOrder = []string{
	"0100000000000000000000000000000000000000000000000000000000000000", // identity
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
	"0000000000000000000000000000000000000000000000000000000000000000", // order 4
	"0000000000000000000000000000000000000000000000000000000000000080", // order 4
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// le encodes n as 32 little-endian bytes.
func le(n *big.Int) []byte {
	b := make([]byte, 32)
	be := n.Bytes()
	for i, c := range be {
		b[len(be)-1-i] = c
	}
	return b
}

// nonCanonical returns y = p + k (k < 19) encoded, for the first k whose
// point is on the curve and not of small order: a usable point in a
// non-canonical encoding that SetBytes accepts.
func nonCanonical(t *testing.T) []byte {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	for k := int64(2); k < 19; k++ {
		b := le(new(big.Int).Add(p, big.NewInt(k)))
		pt, err := new(edwards25519.Point).SetBytes(b)
		if err == nil && new(edwards25519.Point).MultByCofactor(pt).Equal(edwards25519.NewIdentityPoint()) == 0 {
			return b
		}
	}
	t.Fatal("no non-canonical encoding of a large-order point found")
	return nil
}

func notOnCurve(t *testing.T) []byte {
	for y := int64(2); y < 1000; y++ {
		b := le(big.NewInt(y))
		if _, err := new(edwards25519.Point).SetBytes(b); err != nil {
			return b
		}
	}
	t.Fatal("every small y is on the curve?")
	return nil
}

func TestCheckPublicKey(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	cases := []struct {
		name string
		key  []byte
		ok   bool
	}{
		{"generated", pub, true},
		{"31 bytes", pub[:31], false},
		{"33 bytes", append(append([]byte{}, pub...), 0), false},
		{"empty", nil, false},
		{"not on the curve", notOnCurve(t), false},
		{"non-canonical y", nonCanonical(t), false},
		{"identity with the sign bit", unhex("0100000000000000000000000000000000000000000000000000000000000080"), false},
		{"y = p + 1 (identity)", unhex("eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), false},
	}
	for i, s := range smallOrder {
		cases = append(cases, struct {
			name string
			key  []byte
			ok   bool
		}{"small order " + string(rune('0'+i)), unhex(s), false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckPublicKey(c.key)
			if (err == nil) != c.ok {
				t.Fatalf("CheckPublicKey(%x) = %v, want ok=%v", c.key, err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrKey) {
				t.Fatalf("error %v does not wrap ErrKey", err)
			}
			if _, err := ParseHex(hex.EncodeToString(c.key)); (err == nil) != c.ok {
				t.Fatalf("ParseHex: %v", err)
			}
		})
	}
}

// The forgery crypto/ed25519 accepts: under a small-order key, R = identity
// and S = 0 verify for any message.
func TestSmallOrderForgery(t *testing.T) {
	key := unhex(smallOrder[0])
	sig := append(unhex(smallOrder[0]), make([]byte, 32)...)
	msg := []byte("nobody signed this")
	if !ed25519.Verify(key, msg, sig) {
		t.Skip("crypto/ed25519 refuses the forgery by itself now")
	}
	if err := Verify(key, msg, sig); !errors.Is(err, ErrKey) {
		t.Fatalf("Verify accepted a forgery under the identity key: %v", err)
	}
}

// l is the group order, little-endian.
var l = unhex("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")

func TestSignatures(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	msg := []byte("message")
	sig := ed25519.Sign(priv, msg)
	// S + L: the same signature in its malleable form.
	s := new(big.Int).SetBytes(reverse(sig[32:]))
	s.Add(s, new(big.Int).SetBytes(reverse(l)))
	malleable := append(append([]byte{}, sig[:32]...), le(s)...)
	flipped := append([]byte{}, sig...)
	flipped[3] ^= 1
	cases := []struct {
		name string
		sig  []byte
		want error
	}{
		{"valid", sig, nil},
		{"63 bytes", sig[:63], ErrSignature},
		{"65 bytes", append(append([]byte{}, sig...), 0), ErrSignature},
		{"S + L", malleable, ErrSignature},
		{"S = L", append(append([]byte{}, sig[:32]...), l...), ErrSignature},
		{"flipped bit", flipped, ErrSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Verify(pub, msg, c.sig)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
	// Keys of the wrong size are errors, not crypto/ed25519's panic.
	for _, k := range [][]byte{pub[:31], append(append([]byte{}, pub...), 0), nil} {
		if err := Verify(k, msg, sig); !errors.Is(err, ErrKey) {
			t.Fatalf("Verify with a %d-byte key: %v", len(k), err)
		}
	}
}

func reverse(b []byte) []byte {
	r := make([]byte, len(b))
	for i, c := range b {
		r[len(b)-1-i] = c
	}
	return r
}
