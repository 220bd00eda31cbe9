// Package pyenv finds the project's Python virtual environment (.venv at the
// repository root, made and filled by scripts/test.sh from
// python/requirements-test.txt) for tests that compare with the reference
// implementations: transformers, PEFT, tokenizers, torch autograd.
//
// GYM_PYTHON names another interpreter. Tests call Require, which skips
// when there is none — or, with GYM_REQUIRE_PYTHON=1 (the test script sets
// it), fails.
package pyenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ErrNoVenv reports that no interpreter was found.
var ErrNoVenv = errors.New("pyenv: no Python environment (run ./scripts/test.sh once, or set GYM_PYTHON)")

// Find returns the interpreter: $GYM_PYTHON, or .venv/bin/python in the
// working directory or the nearest parent that has one.
func Find() (string, error) {
	if p := os.Getenv("GYM_PYTHON"); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, ".venv", "bin", "python")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", ErrNoVenv
		}
		dir = up
	}
}

// Require returns the interpreter after checking that it imports every
// module in modules; otherwise it skips t, or fails it when
// GYM_REQUIRE_PYTHON=1.
func Require(t testing.TB, modules ...string) string {
	t.Helper()
	py, err := Find()
	if err == nil {
		args := []string{"-c", "import sys\nfor m in sys.argv[1:]: __import__(m)"}
		out, cerr := exec.Command(py, append(args, modules...)...).CombinedOutput()
		if cerr != nil {
			err = fmt.Errorf("pyenv: %s cannot import %v: %v\n%s", py, modules, cerr, out)
		}
	}
	if err != nil {
		if os.Getenv("GYM_REQUIRE_PYTHON") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return py
}
