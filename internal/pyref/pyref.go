// Package pyref embeds the Python reference writer and verifier for the delta format, used by compatibility tests and the benchmark.
package pyref

import (
	"bytes"
	"context"
	_ "embed" // for //go:embed
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Python is the interpreter the scripts are run with.
const Python = "/usr/bin/python3"

// Writer is writer.py, the reference writer from the protocol paper,
// generalised over compression and flags.
//
//	writer.py --spec SPEC.json --out OUT.delta [--time]
//
// With --time it prints {"seconds": float, "bytes": int} on stdout.
//
//go:embed writer.py
var Writer string

// Verifier is verify.py, an independent strict reader and verifier.
//
//	verify.py FILE [--pubkey HEX]
//
// It prints one JSON object {"valid", "error", "compression", "flags",
// "pubkey", "tensors": [{"name", "dtype", "shape", "sha256"}], "metadata"}
// and exits 0 when the file is valid, 1 otherwise.
//
//go:embed verify.py
var Verifier string

// requiredModules maps each module the scripts import to the Debian package
// that provides it.
var requiredModules = []struct{ module, pkg string }{
	{"nacl.signing", "python3-nacl"},
	{"lz4.frame", "python3-lz4"},
	{"zstandard", "python3-zstandard"},
	{"numpy", "python3-numpy"},
}

// Available reports whether /usr/bin/python3 exists and can import every
// module the scripts need. The error names what is missing and the apt
// package that provides it.
func Available() error {
	if _, err := os.Stat(Python); err != nil {
		return fmt.Errorf("pyref: %s not found (apt-get install python3): %w", Python, err)
	}
	var prog strings.Builder
	prog.WriteString("import importlib\nfor m in [")
	for _, m := range requiredModules {
		fmt.Fprintf(&prog, "%q, ", m.module)
	}
	prog.WriteString("]:\n    try:\n        importlib.import_module(m)\n    except Exception:\n        print(m)\n")
	out, err := exec.Command(Python, "-c", prog.String()).Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = strings.TrimSpace(string(ee.Stderr))
		}
		return fmt.Errorf("pyref: running %s: %w: %s", Python, err, stderr)
	}
	missing := map[string]bool{}
	for _, line := range strings.Fields(string(out)) {
		missing[line] = true
	}
	var msgs, pkgs []string
	for _, m := range requiredModules {
		if missing[m.module] {
			msgs = append(msgs, fmt.Sprintf("%s (package %s)", m.module, m.pkg))
			pkgs = append(pkgs, m.pkg)
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("pyref: %s cannot import %s; install with: apt-get install %s",
			Python, strings.Join(msgs, ", "), strings.Join(pkgs, " "))
	}
	return nil
}

// Run writes script (Writer or Verifier) to a temporary file, runs it with
// /usr/bin/python3 and the given arguments, and returns its stdout. On
// failure, including a non-zero exit status (verify.py exits 1 for an
// invalid file), stdout is still returned and the error includes stderr.
func Run(ctx context.Context, script string, args ...string) ([]byte, error) {
	f, err := os.CreateTemp("", "pyref-*.py")
	if err != nil {
		return nil, fmt.Errorf("pyref: %w", err)
	}
	path := f.Name()
	defer os.Remove(path)
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return nil, fmt.Errorf("pyref: writing script: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("pyref: writing script: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, Python, append([]string{path}, args...)...)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("pyref: %s %s: %w; stderr: %s",
			Python, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Tensor is one tensor for writer.py: dtype is the delta code (0 fp32,
// 1 fp16, 2 bf16, 3 int8) and Data its raw little-endian bytes.
type Tensor struct {
	Name  string
	DType int
	Shape []uint64
	Data  []byte
}

// WriteSpec writes the tensors' bytes and a writer.py spec into dir and
// returns the spec's path. seed is the 32-byte Ed25519 seed to sign with.
func WriteSpec(dir string, seed []byte, compression, flags int, ts []Tensor) (string, error) {
	type spec struct {
		Name     string   `json:"name"`
		DType    int      `json:"dtype"`
		Shape    []uint64 `json:"shape"`
		DataFile string   `json:"data_file"`
		Offset   int      `json:"offset"`
		Length   int      `json:"length"`
	}
	raw, err := os.CreateTemp(dir, "tensors-*.bin")
	if err != nil {
		return "", err
	}
	defer raw.Close()
	specs := make([]spec, 0, len(ts))
	off := 0
	for _, t := range ts {
		if _, err := raw.Write(t.Data); err != nil {
			return "", err
		}
		shape := append([]uint64{}, t.Shape...) // [] for a scalar, never null
		specs = append(specs, spec{t.Name, t.DType, shape, raw.Name(), off, len(t.Data)})
		off += len(t.Data)
	}
	js, err := json.Marshal(map[string]any{"seed_hex": hex.EncodeToString(seed), "compression": compression, "flags": flags, "tensors": specs})
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "spec-*.json")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(js); err != nil {
		return "", err
	}
	return f.Name(), raw.Close()
}
