// Package nodekey loads, saves and generates a node's Ed25519 identity key.
//
// Keys are stored as PKCS#8 PEM ("PRIVATE KEY"), the format of
// `openssl genpkey -algorithm ed25519`, so a key made by either tool works
// with both. Public keys travel as 64 hex characters.
package nodekey

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/keys/edkey"
)

// ErrKey is wrapped by every error about a key's content.
var ErrKey = errors.New("nodekey: bad key")

// maxKeyFile bounds what Load reads: a PEM Ed25519 key is about 120 bytes.
const maxKeyFile = 64 << 10

// Generate returns a new key from rand (crypto/rand when nil).
func Generate(r io.Reader) (ed25519.PrivateKey, error) {
	if r == nil {
		r = rand.Reader
	}
	_, priv, err := ed25519.GenerateKey(r)
	return priv, err
}

// Marshal encodes key as PKCS#8 PEM.
func Marshal(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Parse decodes a PKCS#8 PEM Ed25519 private key.
func Parse(data []byte) (ed25519.PrivateKey, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block found (want a PKCS#8 \"PRIVATE KEY\", as made by `gym keygen` or `openssl genpkey -algorithm ed25519`)", ErrKey)
	}
	if strings.TrimSpace(string(rest)) != "" {
		return nil, fmt.Errorf("%w: data after the PEM block", ErrKey)
	}
	switch block.Type {
	case "PRIVATE KEY":
	case "ENCRYPTED PRIVATE KEY":
		return nil, fmt.Errorf("%w: the key is encrypted; decrypt it first (openssl pkey -in KEY -out PLAIN)", ErrKey)
	default:
		return nil, fmt.Errorf("%w: PEM block is %q, want \"PRIVATE KEY\" (PKCS#8)", ErrKey, block.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T, want an Ed25519 key (make one with `gym keygen --out FILE`)", ErrKey, k)
	}
	return priv, nil
}

// Load reads a private key file.
func Load(path string) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes: not a key file", ErrKey, path, maxKeyFile)
	}
	k, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Save writes key to path with mode 0600, atomically. It refuses to replace
// an existing file unless overwrite is set.
func Save(path string, key ed25519.PrivateKey, overwrite bool) error {
	data, err := Marshal(key)
	if err != nil {
		return err
	}
	err = atomicfile.Write(path, 0o600, overwrite, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("nodekey: %w; refusing to replace a key (pass --force to gym keygen)", err)
	}
	return err
}

// PublicHex returns the public half of key as 64 hex characters.
func PublicHex(key ed25519.PrivateKey) string {
	return hex.EncodeToString(key.Public().(ed25519.PublicKey))
}

// ParsePublicHex decodes a public key written as 64 hex characters and
// refuses keys package edkey refuses (not on the curve, not canonical, of
// small order).
func ParsePublicHex(s string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: public key is not hex: %v", ErrKey, err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: public key of %d bytes, want %d (64 hex characters)", ErrKey, len(b), ed25519.PublicKeySize)
	}
	if err := edkey.CheckPublicKey(b); err != nil {
		return nil, fmt.Errorf("%w: public key %s", ErrKey, edkey.Reason(err))
	}
	return ed25519.PublicKey(b), nil
}
