package jobspec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/zooai/gym/protocol/jobspec"
)

func TestModelCID(t *testing.T) {
	// The empty directory's CID (docs/artifacts.md) and the same block's
	// other spellings.
	const dir = "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354"
	for _, tc := range []struct {
		model string
		cid   bool
		err   string
	}{
		{"builtin", false, ""},
		{dir, true, ""},
		{"Qwen/Qwen3-0.6B", false, "not a CID"},
		{"", false, "not a CID"},
		{"bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", false, "not a CIDv1 of a directory"}, // a raw file
		{"QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn", false, "not a CIDv1"},                             // CIDv0 of the same directory
		{"B" + strings.ToUpper(dir[1:]), false, "canonical"},
		{"Builtin", false, "not a CID"},
		{strings.Repeat("b", 300), false, "300 bytes"},
	} {
		c, ok, err := jobspec.ModelCID(tc.model)
		if tc.err == "" {
			if err != nil || ok != tc.cid || (ok && c.String() != tc.model) {
				t.Errorf("%q: %v %v %v", tc.model, c, ok, err)
			}
			continue
		}
		if !errors.Is(err, jobspec.ErrModel) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: err %v, want %q", tc.model, err, tc.err)
		}
	}
}

// FuzzModelCID: whatever is accepted names one CID in canonical form (the
// model string is that CID's string) or is builtin; nothing panics.
func FuzzModelCID(f *testing.F) {
	for _, s := range []string{"builtin", "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354",
		"bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", "QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn",
		"Qwen/Qwen3-0.6B", "", "b", "z", "f01701220"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, model string) {
		c, ok, err := jobspec.ModelCID(model)
		switch {
		case err != nil:
			if ok || !errors.Is(err, jobspec.ErrModel) {
				t.Fatalf("%q: ok %v with %v", model, ok, err)
			}
		case !ok:
			if model != jobspec.BuiltinModel {
				t.Fatalf("%q accepted as the built-in base", model)
			}
		case c.String() != model || c.Version() != 1:
			t.Fatalf("%q accepted as %s", model, c)
		}
	})
}
