package release_test

import (
	"bytes"
	"crypto/ed25519"
	"debug/elf"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/keys/release"
)

func key(t testing.TB, seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32))
}

func TestSignVerify(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "gym-linux-amd64"), []byte("binary one"), 0o755)
	os.WriteFile(filepath.Join(dir, "hanzod-linux-amd64"), []byte("binary two"), 0o755)
	cmd := exec.Command("sha256sum", "gym-linux-amd64", "hanzod-linux-amd64")
	cmd.Dir = dir
	sums, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, release.SumsFile), sums, 0o644)
	k := key(t, 1)
	sig, err := release.Sign(k, sums)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, release.SigFile), sig, 0o644)
	pub := k.Public().(ed25519.PublicKey)
	if list, err := release.Verify(dir, pub); err != nil || len(list) != 2 {
		t.Fatalf("Verify: %v %v", list, err)
	}
	// Another trusted key: refused, even though the file verifies under
	// the key it names.
	if _, err := release.Verify(dir, key(t, 2).Public().(ed25519.PublicKey)); !errors.Is(err, release.ErrSignature) {
		t.Errorf("other key: %v", err)
	}
	// A changed binary.
	os.WriteFile(filepath.Join(dir, "hanzod-linux-amd64"), []byte("binary 2"), 0o755)
	if _, err := release.Verify(dir, pub); !errors.Is(err, release.ErrMismatch) {
		t.Errorf("changed binary: %v", err)
	}
	// A changed SHA256SUMS.
	os.WriteFile(filepath.Join(dir, release.SumsFile), bytes.Replace(sums, []byte("hanzod"), []byte("hanzoc"), 1), 0o644)
	if _, err := release.Verify(dir, pub); !errors.Is(err, release.ErrSignature) {
		t.Errorf("changed sums: %v", err)
	}
	// The signature is domain-separated: a plain signature of the file is
	// not a release signature.
	plain := ed25519.Sign(k, sums)
	if err := release.VerifySig(pub, sums, []byte("ed25519 "+nodekey.PublicHex(k)+" "+hexs(plain)+"\n")); !errors.Is(err, release.ErrSignature) {
		t.Errorf("undomained signature accepted: %v", err)
	}
}

func hexs(b []byte) string {
	const d = "0123456789abcdef"
	var s strings.Builder
	for _, c := range b {
		s.WriteByte(d[c>>4])
		s.WriteByte(d[c&15])
	}
	return s.String()
}

func TestParseSums(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, c := range []struct {
		in string
		ok bool
	}{
		{h + "  gym\n", true},
		{h + "  gym\n" + h + "  hanzod\n", true},
		{"", false},
		{h + "  gym", false},                    // no newline
		{h + " gym\n", false},                   // one space
		{strings.ToUpper(h) + "  gym\n", false}, // uppercase
		{h[:62] + "  gym\n", false},             // short
		{h + "  ../gym\n", false},               // a path
		{h + "  a/gym\n", false},                // a directory
		{h + "  gym\n" + h + "  gym\n", false},  // twice
		{h + "  g\x1bym\n", false},              // control character
		{h + "  gym\n\n", false},                // empty line
		{"zz" + h[2:] + "  gym\n", false},       // not hex
	} {
		_, err := release.ParseSums([]byte(c.in))
		if (err == nil) != c.ok {
			t.Errorf("ParseSums(%q): %v", c.in, err)
		}
	}
}

func FuzzParseSums(f *testing.F) {
	f.Add([]byte(strings.Repeat("ab", 32) + "  gym-linux-amd64\n"))
	f.Add([]byte(strings.Repeat("0", 64) + "  a\n" + strings.Repeat("1", 64) + "  b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		list, err := release.ParseSums(b)
		if err != nil {
			return
		}
		// What parses is what sha256sum writes: format it back.
		var s strings.Builder
		for _, e := range list {
			s.WriteString(hexs(e.SHA256[:]) + "  " + e.Name + "\n")
		}
		if s.String() != string(b) {
			t.Fatalf("%q parses but formats as %q", b, s.String())
		}
	})
}

func FuzzParseSig(f *testing.F) {
	k := ed25519.NewKeyFromSeed(make([]byte, 32))
	sums := []byte(strings.Repeat("ab", 32) + "  gym\n")
	sig, _ := release.Sign(k, sums)
	f.Add(sig)
	f.Add([]byte("ed25519 00 00\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pub, s, err := release.ParseSig(b)
		if err != nil {
			return
		}
		if len(pub) != 32 || len(s) != 64 {
			t.Fatalf("parsed a %d-byte key and a %d-byte signature", len(pub), len(s))
		}
		if release.VerifySig(pub, sums, b) == nil && !bytes.Equal(b, sig) {
			// ed25519 signatures are not unique in general, but ours are
			// deterministic and S is canonical: another verifying file for
			// the same key and message would be a forgery.
			if pub.Equal(k.Public().(ed25519.PublicKey)) {
				t.Fatalf("a second signature verifies: %q", b)
			}
		}
	})
}

// TestReleaseScript builds a release the way an operator does
// (scripts/release.sh, amd64 only here) and checks it: static binaries
// (no ELF interpreter, no shared libraries; file(1) agrees when
// installed), sums and signature verify with gym release verify, and
// gym version --json names the commit.
func TestReleaseScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two static binaries")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	commit, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	out := t.TempDir()
	k := key(t, 7)
	keyFile := filepath.Join(t.TempDir(), "release.key")
	if err := nodekey.Save(keyFile, k, false); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "../../scripts/release.sh")
	cmd.Env = append(os.Environ(), "OUT="+out, "ARCHES=amd64", "RELEASE_KEY="+keyFile)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"gym-linux-amd64", "hanzod-linux-amd64"} {
		p := filepath.Join(out, name)
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s has an ELF interpreter: dynamically linked", name)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) != 0 {
			t.Errorf("%s needs %v", name, libs)
		}
		f.Close()
		if fileCmd, err := exec.LookPath("file"); err == nil {
			b, _ := exec.Command(fileCmd, p).Output()
			if !strings.Contains(string(b), "statically linked") {
				t.Errorf("file %s: %s", name, b)
			}
		}
	}
	gym := filepath.Join(out, "gym-linux-amd64")
	b, err := exec.Command(gym, "release", "verify", "--pub", nodekey.PublicHex(k), out).CombinedOutput()
	if err != nil || strings.Count(string(b), ": OK\n") != 2 {
		t.Fatalf("gym release verify: %v\n%s", err, b)
	}
	if _, err := release.Verify(out, k.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []string{"gym", "hanzod"} {
		b, err = exec.Command(filepath.Join(out, prog+"-linux-amd64"), "version", "--json").Output()
		if err != nil {
			t.Fatalf("%s version --json: %v", prog, err)
		}
		var v struct{ Program, Version, Commit, Go string }
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s version --json: %v\n%s", prog, err, b)
		}
		if v.Program != prog || v.Commit != strings.TrimSpace(string(commit)) || v.Version == "" || v.Version == "(devel)" || !strings.HasPrefix(v.Go, "go1.") {
			t.Errorf("%s version --json: %+v, want commit %s", prog, v, commit)
		}
	}
}
