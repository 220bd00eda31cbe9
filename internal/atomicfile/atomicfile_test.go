package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	put := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := Write(p, 0o600, false, put("one")); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, 0o600, false, put("two")); !errors.Is(err, fs.ErrExist) {
		t.Fatal("replaced without replace")
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("content %q", b)
	}
	if err := Write(p, 0o644, true, put("three")); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if b, _ := os.ReadFile(p); string(b) != "three" || st.Mode().Perm() != 0o644 {
		t.Fatalf("content %q mode %v", b, st.Mode())
	}
	boom := errors.New("boom")
	if err := Write(p, 0o644, true, func(w io.Writer) error { io.WriteString(w, "partial"); return boom }); err != boom {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "three" {
		t.Fatalf("a failed write changed the file: %q", b)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

func TestWriteBytes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := WriteBytes(p, 0o600, false, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(p, 0o600, false, []byte("y")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second write without replace: %v", err)
	}
	if err := WriteBytes(p, 0o600, true, []byte("z")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "z" {
		t.Fatalf("content %q", b)
	}
}

func TestDir(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "sub", "ckpt")
	fill := func(s string) func(string) error {
		return func(tmp string) error {
			if err := os.Mkdir(filepath.Join(tmp, "d"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(tmp, "d", "f"), []byte(s), 0o644)
		}
	}
	if err := Dir(p, 0o755, fill("one")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "d", "f")); string(b) != "one" {
		t.Fatalf("content %q", b)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v", st.Mode())
	}
	if err := Dir(p, 0o755, fill("two")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("over a non-empty directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "d", "f")); string(b) != "one" {
		t.Fatalf("a refused Dir changed the directory: %q", b)
	}
	boom := errors.New("boom")
	q := filepath.Join(root, "other")
	if err := Dir(q, 0o755, func(tmp string) error { fill("x")(tmp); return boom }); err != boom {
		t.Fatal(err)
	}
	if _, err := os.Stat(q); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed Dir left %s: %v", q, err)
	}
	empty := filepath.Join(root, "empty")
	os.Mkdir(empty, 0o700)
	if err := Dir(empty, 0o755, fill("three")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("over an empty directory: %v", err)
	}
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if e.Name()[0] == '.' {
			t.Errorf("temporary %s left behind", e.Name())
		}
	}
}
