// Package tensorname holds the one rule for what may name a tensor in the
// files Zoo Gym reads and writes (delta files, safetensors files).
//
// A name is a non-empty UTF-8 string without control characters (NUL, the
// rest of C0, DEL, C1), not starting with '/' or '\', and without a ".."
// segment between the separators '/' and '\'. Names become keys of
// safetensors headers, lines on terminals and, in tools that extract
// tensors, parts of paths: a hostile name must not mean a path outside the
// output, hide in a terminal or cut a C string short. Real checkpoints and
// adapters ("model.layers.0.self_attn.q_proj.lora_A.weight") never need
// any of it.
package tensorname

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrName is wrapped by every error of Check.
var ErrName = errors.New("bad tensor name")

// Check returns nil if s may name a tensor, or an error wrapping ErrName
// that says why not.
func Check(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty name", ErrName)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: name %q is not UTF-8", ErrName, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: name %q holds control character %U", ErrName, s, r)
		}
	}
	if s[0] == '/' || s[0] == '\\' {
		return fmt.Errorf("%w: name %q starts with %q", ErrName, s, s[0])
	}
	for seg := range strings.FieldsFuncSeq(s, isSeparator) {
		if seg == ".." {
			return fmt.Errorf("%w: name %q has a \"..\" segment", ErrName, s)
		}
	}
	return nil
}

func isSeparator(r rune) bool { return r == '/' || r == '\\' }
