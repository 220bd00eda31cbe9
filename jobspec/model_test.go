package jobspec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/zooai/gym/jobspec"
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
