// Package edkeytest lists the Ed25519 public keys and signatures every
// entry point must refuse, so each package's table test covers the same
// cases: wrong sizes, small-order and non-canonical keys, points off the
// curve, and signatures of the wrong size or with S ≥ L.
package edkeytest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"math/big"
)

// Key is a public key an entry point must refuse.
type Key struct {
	Name string
	Key  []byte
}

// Signature is a signature an entry point must refuse.
type Signature struct {
	Name string
	Sig  []byte
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Identity is the encoding of the neutral point: under it, R = identity
// and S = 0 verify for every message with crypto/ed25519 alone.
var Identity = mustHex("0100000000000000000000000000000000000000000000000000000000000000")

// Forgery is the signature R = identity, S = 0, valid for any message under
// Identity.
var Forgery = append(bytes.Clone(Identity), make([]byte, 32)...)

// BadKeys returns keys derived from good (a valid key) and fixed ones.
func BadKeys(good ed25519.PublicKey) []Key {
	return []Key{
		{"31 bytes", bytes.Clone(good[:31])},
		{"33 bytes", append(bytes.Clone(good), 0)},
		{"empty", nil},
		{"identity (small order)", bytes.Clone(Identity)},
		{"order 2", mustHex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")},
		{"order 4", mustHex("0000000000000000000000000000000000000000000000000000000000000000")},
		{"order 8", mustHex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")},
		{"identity with the sign bit (non-canonical)", mustHex("0100000000000000000000000000000000000000000000000000000000000080")},
		{"y = p + 1 (non-canonical)", mustHex("eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")},
		{"not on the curve", mustHex("0200000000000000000000000000000000000000000000000000000000000000")},
	}
}

// order is the group order L.
var order = new(big.Int).SetBytes(reverse(mustHex("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")))

func reverse(b []byte) []byte {
	r := make([]byte, len(b))
	for i, c := range b {
		r[len(b)-1-i] = c
	}
	return r
}

// BadSignatures returns signatures derived from good (a valid signature):
// the wrong sizes and the same signature with S + L (which verifies by the
// group law, so only the canonical-S rule refuses it).
func BadSignatures(good []byte) []Signature {
	s := new(big.Int).SetBytes(reverse(good[32:64]))
	s.Add(s, order)
	malleable := make([]byte, 64)
	copy(malleable, good[:32])
	sb := s.Bytes()
	for i, c := range sb {
		malleable[32+len(sb)-1-i] = c
	}
	return []Signature{
		{"63 bytes", bytes.Clone(good[:63])},
		{"65 bytes", append(bytes.Clone(good), 0)},
		{"empty", nil},
		{"S + L (non-canonical)", malleable},
	}
}
