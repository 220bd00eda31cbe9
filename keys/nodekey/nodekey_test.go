package nodekey

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	k, err := Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "node.key")
	if err := Save(p, k, false); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	got, err := Load(p)
	if err != nil || !bytes.Equal(got, k) {
		t.Fatalf("load: %v", err)
	}
	if err := Save(p, k, false); err == nil {
		t.Fatal("overwrote an existing key")
	}
	k2, _ := Generate(nil)
	if err := Save(p, k2, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := Load(p); !bytes.Equal(got, k2) {
		t.Fatal("overwrite did not take")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".key-*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

// A key made by OpenSSL loads, and one we write is read by OpenSSL.
func TestOpenSSLInterop(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "ossl.pem")
	if out, err := exec.Command("openssl", "genpkey", "-algorithm", "ed25519", "-out", p).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	k, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("openssl", "pkey", "-in", p, "-pubout", "-outform", "DER").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(out, []byte(k.Public().(ed25519.PublicKey))) {
		t.Fatal("public key differs from openssl's")
	}
	ours := filepath.Join(dir, "ours.pem")
	Save(ours, k, false)
	out2, err := exec.Command("openssl", "pkey", "-in", ours, "-pubout", "-outform", "DER").Output()
	if err != nil || !bytes.Equal(out, out2) {
		t.Fatalf("openssl reads our key differently: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(ec)
	k, _ := Generate(nil)
	good, _ := Marshal(k)
	cases := map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("hello"),
		"ecdsa":     pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		"encrypted": pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}),
		"pkcs1":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}),
		"bad der":   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}),
		"trailing":  append(good, "junk"...),
	}
	for name, data := range cases {
		if _, err := Parse(data); !errors.Is(err, ErrKey) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestPublicHex(t *testing.T) {
	k, _ := Generate(nil)
	pub, err := ParsePublicHex(PublicHex(k))
	if err != nil || !bytes.Equal(pub, []byte(k.Public().(ed25519.PublicKey))) {
		t.Fatal(err)
	}
	for _, s := range []string{"", "zz", "abcd", PublicHex(k) + "00"} {
		if _, err := ParsePublicHex(s); !errors.Is(err, ErrKey) {
			t.Errorf("%q: got %v", s, err)
		}
	}
}

// Keys of the wrong size and keys edkey refuses are refused with a reason.
func TestParsePublicHexRefuses(t *testing.T) {
	k, _ := Generate(nil)
	good := PublicHex(k)
	for _, c := range []struct{ name, hex, mention string }{
		{"31 bytes", good[:62], "31 bytes"},
		{"33 bytes", good + "00", "33 bytes"},
		{"identity (small order)", "01" + strings.Repeat("00", 31), "small order"},
		{"order 8", "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", "small order"},
		{"identity, sign bit set", "01" + strings.Repeat("00", 30) + "80", "canonical"},
		{"y = p + 1", "ee" + strings.Repeat("ff", 30) + "7f", "canonical"},
	} {
		_, err := ParsePublicHex(c.hex)
		if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: got %v, want ErrKey mentioning %q", c.name, err, c.mention)
		}
	}
}
