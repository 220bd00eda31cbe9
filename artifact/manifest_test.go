package artifact

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32))
}

func testManifest(version uint64) Manifest {
	return Manifest{
		Format:  ManifestFormat,
		Kind:    KindCheckpoint,
		Name:    "zoo/qwen3-0.6b-gspo",
		Version: version,
		Root:    "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354",
		Size:    15,
		Files:   []File{{"config.json", 5}, {"model.safetensors", 10}},
		Created: t0,
		Expires: t0.Add(24 * time.Hour),
	}
}

func TestManifestSignParse(t *testing.T) {
	s, err := Sign(testManifest(3), testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSigned(enc)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := got.Manifest.Canonical()
	b, _ := s.Manifest.Canonical()
	if !bytes.Equal(a, b) {
		t.Fatalf("round trip changed the manifest:\n%s\n%s", a, b)
	}
	// The signature covers every field.
	for _, mutate := range []func(m *Manifest){
		func(m *Manifest) { m.Version++ },
		func(m *Manifest) { m.Root = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku" },
		func(m *Manifest) { m.Files[1].Size--; m.Size-- },
		func(m *Manifest) { m.Expires = m.Expires.Add(time.Hour) },
		func(m *Manifest) { m.Kind = KindBaseModel },
		func(m *Manifest) { m.Creator = PublicHex(testKey(2)) },
	} {
		var c Signed
		json.Unmarshal(enc, &c)
		mutate(&c.Manifest)
		bad, _ := c.Encode()
		if _, err := ParseSigned(bad); !errors.Is(err, ErrSignature) {
			t.Errorf("tampered manifest: %v", err)
		}
	}
	// Domain separation: a signature over the bare canonical bytes fails.
	raw, _ := s.Manifest.Canonical()
	c := *s
	c.Sig = hexEncode(ed25519.Sign(testKey(1), raw))
	bad, _ := c.Encode()
	if _, err := ParseSigned(bad); !errors.Is(err, ErrSignature) {
		t.Errorf("undomained signature: %v", err)
	}
}

func TestManifestValidate(t *testing.T) {
	for name, mutate := range map[string]func(m *Manifest){
		"format":        func(m *Manifest) { m.Format = 2 },
		"kind":          func(m *Manifest) { m.Kind = "weights" },
		"name":          func(m *Manifest) { m.Name = "../etc" },
		"version 0":     func(m *Manifest) { m.Version = 0 },
		"expiry":        func(m *Manifest) { m.Expires = m.Created },
		"root":          func(m *Manifest) { m.Root = "QmNotACid" },
		"traversal":     func(m *Manifest) { m.Files[0].Path = "../config.json" },
		"absolute":      func(m *Manifest) { m.Files[0].Path = "/config.json" },
		"backslash":     func(m *Manifest) { m.Files[0].Path = `a\config.json` },
		"unsorted":      func(m *Manifest) { m.Files[0], m.Files[1] = m.Files[1], m.Files[0] },
		"duplicate":     func(m *Manifest) { m.Files[1].Path = m.Files[0].Path },
		"size":          func(m *Manifest) { m.Size++ },
		"no files":      func(m *Manifest) { m.Files = nil; m.Size = 0 },
		"identity root": func(m *Manifest) { m.Root = "bafkqaaa" },
	} {
		m := testManifest(1)
		mutate(&m)
		if _, err := Sign(m, testKey(1)); !errors.Is(err, ErrManifest) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCheckUpdate(t *testing.T) {
	sign := func(v uint64, mut func(*Manifest)) *Manifest {
		m := testManifest(v)
		if mut != nil {
			mut(&m)
		}
		s, err := Sign(m, testKey(1))
		if err != nil {
			t.Fatal(err)
		}
		return &s.Manifest
	}
	v2 := sign(2, nil)
	for _, tc := range []struct {
		name  string
		known *Manifest
		next  *Manifest
		now   time.Time
		want  error
	}{
		{"first", nil, v2, t0, nil},
		{"same again", v2, sign(2, nil), t0, nil},
		{"newer", v2, sign(3, nil), t0, nil},
		{"rollback", v2, sign(1, nil), t0, ErrRollback},
		{"equivocation", v2, sign(2, func(m *Manifest) { m.Files[0].Size = 4; m.Size = 14 }), t0, ErrConflict},
		{"expired", nil, v2, t0.Add(24 * time.Hour), ErrExpired},
		{"expired newer", v2, sign(3, nil), t0.Add(25 * time.Hour), ErrExpired},
		{"future", nil, v2, t0.Add(-time.Hour), ErrNotYetValid},
		{"other artifact", v2, sign(1, func(m *Manifest) { m.Name = "zoo/other" }), t0, nil},
	} {
		if err := CheckUpdate(tc.known, tc.next, tc.now); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestManifestMatches(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, []oentry{{name: "a", file: []byte("12345")}, {name: "b", file: []byte("0123456789")}})
	bs := NewMemBlocks()
	res, err := Import(t.Context(), bs, dir)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := Walk(t.Context(), bs, res.Root, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	m := testManifest(1)
	m.Root = res.Root.String()
	m.Files = res.Files
	if err := m.Matches(ix); err != nil {
		t.Fatal(err)
	}
	m.Files = []File{{"a", 5}, {"b", 9}}
	if err := m.Matches(ix); !errors.Is(err, ErrMismatch) {
		t.Errorf("wrong size: %v", err)
	}
	m.Files = res.Files
	m.Root = "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354"
	if err := m.Matches(ix); !errors.Is(err, ErrMismatch) {
		t.Errorf("other root: %v", err)
	}
}

// The seed corpus is regenerated when it is missing so that the fuzz test
// always starts from a valid manifest.
func FuzzParseSigned(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/manifest-*.json")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	s, _ := Sign(testManifest(1), testKey(1))
	enc, _ := s.Encode()
	f.Add(enc)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"manifest":{"files":[{"path":"../x","size":1}]},"sig":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSigned(data)
		if err != nil {
			return
		}
		// Whatever parses is valid, verifies, and survives re-encoding.
		if err := s.Manifest.Validate(); err != nil {
			t.Fatalf("parsed but invalid: %v", err)
		}
		enc, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		s2, err := ParseSigned(enc)
		if err != nil {
			t.Fatalf("re-encoded manifest refused: %v", err)
		}
		a, _ := s.Manifest.Canonical()
		b, _ := s2.Manifest.Canonical()
		if !bytes.Equal(a, b) {
			t.Fatal("canonical form not stable")
		}
	})
}

func hexEncode(b []byte) string { return hex.EncodeToString(b) }
