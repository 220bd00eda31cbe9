// Package release signs and verifies the checksums of a release: the
// SHA256SUMS file scripts/release.sh writes next to the binaries (the
// format of sha256sum: 64 lowercase hex digits, two spaces, a file name;
// one line each), and SHA256SUMS.sig, an Ed25519 signature over it made
// with a release key in the node key format (gym keygen).
//
// The signature covers a domain-separated message, so it can never be
// taken for a node request, a delta or a manifest signed by the same key:
//
//	"zoo-gym/release/v1" ‖ 0x00 ‖ SHA-256(SHA256SUMS)
//
// SHA256SUMS.sig is one line: "ed25519 " ‖ hex(public key) ‖ " " ‖
// hex(signature) ‖ "\n". The key in the file is only a label: Verify
// checks the signature under the key the verifier trusts and refuses a
// file naming another.
package release

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/zooai/gym/keys/edkey"
)

// File names in a release directory.
const (
	SumsFile = "SHA256SUMS"
	SigFile  = "SHA256SUMS.sig"
)

// Errors.
var (
	ErrSums      = errors.New("release: bad SHA256SUMS")
	ErrSignature = errors.New("release: bad signature")
	ErrMismatch  = errors.New("release: checksum mismatch")
)

// Limits on untrusted input.
const (
	MaxSums  = 1 << 20 // SHA256SUMS bytes
	MaxFiles = 1024    // lines of SHA256SUMS
	maxSig   = 8 + 64 + 1 + 128 + 1
)

// Sum is one line of SHA256SUMS.
type Sum struct {
	SHA256 [32]byte
	Name   string
}

// ParseSums parses SHA256SUMS strictly: every line "HEX  NAME\n" with 64
// lowercase hex digits, NAME a plain file name (no directory, no
// control characters), each name once, at least one line.
func ParseSums(b []byte) ([]Sum, error) {
	if len(b) > MaxSums {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrSums, len(b), MaxSums)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return nil, fmt.Errorf("%w: empty, or no newline at the end", ErrSums)
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	if len(lines) > MaxFiles {
		return nil, fmt.Errorf("%w: %d lines, at most %d", ErrSums, len(lines), MaxFiles)
	}
	seen := map[string]bool{}
	out := make([]Sum, 0, len(lines))
	for i, l := range lines {
		h, name, ok := strings.Cut(l, "  ")
		if !ok || len(h) != 64 || strings.ToLower(h) != h {
			return nil, fmt.Errorf("%w: line %d: want 64 lowercase hex digits, two spaces, a file name", ErrSums, i+1)
		}
		var s Sum
		if _, err := hex.Decode(s.SHA256[:], []byte(h)); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrSums, i+1, err)
		}
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrSums, i+1, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: line %d: %s listed twice", ErrSums, i+1, name)
		}
		seen[name] = true
		s.Name = name
		out = append(out, s)
	}
	return out, nil
}

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\\") {
		return fmt.Errorf("file name %q is not a plain name", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("file name %q has a control character", name)
		}
	}
	return nil
}

// Message is what the release key signs for sums.
func Message(sums []byte) []byte {
	h := sha256.Sum256(sums)
	return append([]byte("zoo-gym/release/v1\x00"), h[:]...)
}

// Sign returns the SHA256SUMS.sig content for sums (which must parse).
func Sign(key ed25519.PrivateKey, sums []byte) ([]byte, error) {
	if _, err := ParseSums(sums); err != nil {
		return nil, err
	}
	sig := ed25519.Sign(key, Message(sums))
	return fmt.Appendf(nil, "ed25519 %s %s\n", hex.EncodeToString(key.Public().(ed25519.PublicKey)), hex.EncodeToString(sig)), nil
}

// ParseSig parses SHA256SUMS.sig strictly and returns the key it names
// and the signature.
func ParseSig(b []byte) (ed25519.PublicKey, []byte, error) {
	if len(b) != maxSig {
		return nil, nil, fmt.Errorf("%w: %d bytes, want %d", ErrSignature, len(b), maxSig)
	}
	f := strings.Split(strings.TrimSuffix(string(b), "\n"), " ")
	if len(f) != 3 || f[0] != "ed25519" || !strings.HasSuffix(string(b), "\n") {
		return nil, nil, fmt.Errorf("%w: want \"ed25519 KEYHEX SIGHEX\" and a newline", ErrSignature)
	}
	if strings.ToLower(f[1]) != f[1] || strings.ToLower(f[2]) != f[2] {
		return nil, nil, fmt.Errorf("%w: hex must be lowercase", ErrSignature)
	}
	pub, err := edkey.ParseHex(f[1])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: key: %v", ErrSignature, err)
	}
	sig, err := hex.DecodeString(f[2])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: signature: %v", ErrSignature, err)
	}
	if err := edkey.CheckSignature(sig); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	return pub, sig, nil
}

// VerifySig checks that sigFile signs sums under trusted.
func VerifySig(trusted ed25519.PublicKey, sums, sigFile []byte) error {
	pub, sig, err := ParseSig(sigFile)
	if err != nil {
		return err
	}
	if !pub.Equal(trusted) {
		return fmt.Errorf("%w: signed by %x, not by the trusted release key %x", ErrSignature, pub, trusted)
	}
	if err := edkey.Verify(trusted, Message(sums), sig); err != nil {
		return fmt.Errorf("%w: %v", ErrSignature, err)
	}
	return nil
}

// Verify checks a release directory: SHA256SUMS.sig signs SHA256SUMS under
// trusted, and every file SHA256SUMS lists has its checksum. It returns
// the files checked.
func Verify(dir string, trusted ed25519.PublicKey) ([]Sum, error) {
	sums, err := readLimited(filepath.Join(dir, SumsFile), MaxSums)
	if err != nil {
		return nil, err
	}
	sig, err := readLimited(filepath.Join(dir, SigFile), maxSig)
	if err != nil {
		return nil, err
	}
	if err := VerifySig(trusted, sums, sig); err != nil {
		return nil, err
	}
	list, err := ParseSums(sums)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, s := range list {
		f, err := root.Open(s.Name)
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(h.Sum(nil), s.SHA256[:]) {
			return nil, fmt.Errorf("%w: %s", ErrMismatch, s.Name)
		}
	}
	return list, nil
}

func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("release: %s is larger than %d bytes", path, max)
	}
	return b, nil
}
