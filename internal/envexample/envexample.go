// Package envexample starts the repository's example environment server
// (python -m gym_protocol.env.example, docs/environments.md) for tests.
package envexample

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/internal/pyenv"
)

// Start runs the example server from this checkout's python/ on a free
// port as a separate process and returns its URL and the process (killed
// when the test ends). It skips t without a Python environment (or fails
// it with GYM_REQUIRE_PYTHON=1, as pyenv.Require).
func Start(t testing.TB) (string, *exec.Cmd) {
	t.Helper()
	py := pyenv.Require(t)
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "python")
	cmd := exec.Command(py, "-m", "gym_protocol.env.example", "--port", "0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		u, ok := strings.CutPrefix(strings.TrimSpace(s), "listening on ")
		if !ok {
			t.Fatalf("example server said %q", s)
		}
		return u, cmd
	case <-time.After(60 * time.Second): // a bound, not synchronisation: Python's start on a loaded machine
		t.Fatal("example server did not start in 60 s")
	}
	return "", nil
}
