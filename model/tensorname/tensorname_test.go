package tensorname

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	bad := []string{
		"", "\xff", "../../etc/passwd", "/abs", "a\x00b", "a\nb", "\x1b[2J", "tab\there", "del\x7f", "c1\u0085",
		"a/../b", "..", "a/..", "\\abs", "a\\..\\b", "x//..//y",
	}
	good := []string{"a..b", "model.layers.0.self_attn.q_proj.lora_A.weight", "a/b", "./a", "...", "ünïcode/名前", "a b", "__metadata__"}
	for _, s := range bad {
		if err := Check(s); !errors.Is(err, ErrName) {
			t.Errorf("Check(%q) = %v, want ErrName", s, err)
		}
	}
	for _, s := range good {
		if err := Check(s); err != nil {
			t.Errorf("Check(%q) = %v", s, err)
		}
	}
}
