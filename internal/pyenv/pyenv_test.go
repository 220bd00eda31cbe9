package pyenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFindWalksUp(t *testing.T) {
	root := t.TempDir()
	py := filepath.Join(root, ".venv", "bin", "python")
	if err := os.MkdirAll(filepath.Dir(py), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(py, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deep)
	t.Setenv("GYM_PYTHON", "")
	if got, err := Find(); err != nil || got != py {
		t.Fatalf("Find = %q, %v; want %q", got, err, py)
	}
	t.Setenv("GYM_PYTHON", "/opt/py")
	if got, _ := Find(); got != "/opt/py" {
		t.Fatalf("Find with GYM_PYTHON = %q", got)
	}
	t.Setenv("GYM_PYTHON", "")
	t.Chdir(t.TempDir())
	if _, err := Find(); !errors.Is(err, ErrNoVenv) {
		t.Fatalf("Find outside = %v", err)
	}
}
