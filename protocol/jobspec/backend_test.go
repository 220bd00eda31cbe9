package jobspec_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/jobspec"
)

func TestBackendSetting(t *testing.T) {
	file := func(extra string) (*jobspec.File, error) {
		return jobspec.ParseFile("j.yaml", []byte("model: m\ndataset: d\nepochs: 1\nmin_nodes: 3\n"+extra), time.Unix(0, 0), nil)
	}
	for _, c := range []struct{ line, want, spec string }{
		{"", "go", ""}, {"backend: go\n", "go", ""}, {"backend: torch\n", "torch", "torch"}, {"backend: any\n", "any", "any"},
	} {
		f, err := file(c.line)
		if err != nil {
			t.Fatalf("%q: %v", c.line, err)
		}
		s := f.Spec()
		if f.Backend != c.want || s.Backend != c.spec || s.TrainingBackend() != c.want {
			t.Errorf("%q: file %q, spec %q (%s), want %q, %q", c.line, f.Backend, s.Backend, s.TrainingBackend(), c.want, c.spec)
		}
		back := jobspec.FromProto(jobspec.ToProto(s))
		if err := back.Normalise(); err != nil || back.Backend != c.spec {
			t.Errorf("%q: over the wire: %q, %v", c.line, back.Backend, err)
		}
	}
	if _, err := file("backend: jax\n"); err == nil || !strings.Contains(err.Error(), "backend") {
		t.Errorf("backend jax: %v", err)
	}
	s := jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3, Backend: "go"}
	if err := s.Normalise(); err != nil || s.Backend != "" {
		t.Errorf("go is written as nothing: %q, %v", s.Backend, err)
	}
	s.Backend = "cuda"
	if err := s.Normalise(); !errors.Is(err, jobspec.ErrInvalid) {
		t.Errorf("backend cuda: %v", err)
	}
}

// dtype: any is written as nothing; a torch job may ask for bfloat16 or
// float16, a go job only for float32, and the setting survives the wire.
func TestDTypeSetting(t *testing.T) {
	file := func(extra string) (*jobspec.File, error) {
		return jobspec.ParseFile("j.yaml", []byte("model: m\ndataset: d\nepochs: 1\nmin_nodes: 3\n"+extra), time.Unix(0, 0), nil)
	}
	for _, c := range []struct{ lines, want, spec string }{
		{"", "any", ""}, {"dtype: any\n", "any", ""}, {"dtype: float32\n", "float32", "float32"},
		{"backend: torch\ndtype: bfloat16\n", "bfloat16", "bfloat16"}, {"backend: any\ndtype: float16\n", "float16", "float16"},
	} {
		f, err := file(c.lines)
		if err != nil {
			t.Fatalf("%q: %v", c.lines, err)
		}
		s := f.Spec()
		if f.DType != c.want || s.DType != c.spec {
			t.Errorf("%q: file %q, spec %q, want %q, %q", c.lines, f.DType, s.DType, c.want, c.spec)
		}
		back := jobspec.FromProto(jobspec.ToProto(s))
		if err := back.Normalise(); err != nil || back.DType != c.spec {
			t.Errorf("%q: over the wire: %q, %v", c.lines, back.DType, err)
		}
	}
	for line, want := range map[string]string{
		"dtype: bfloat16\n":                "the go engine trains in float32",
		"backend: torch\ndtype: float64\n": "dtype",
	} {
		if _, err := file(line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
	s := jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3, DType: "any"}
	if err := s.Normalise(); err != nil || s.DType != "" {
		t.Errorf("any is written as nothing: %q, %v", s.DType, err)
	}
	s.DType, s.Backend = "int8", "torch"
	if err := s.Normalise(); !errors.Is(err, jobspec.ErrInvalid) {
		t.Errorf("dtype int8: %v", err)
	}
}
