package dataset

import (
	"fmt"
	"slices"
	"strings"
)

// MaxTemplateBytes bounds a prompt template.
const MaxTemplateBytes = 4096

// Template is a parsed prompt template: literal text and {field}
// references.
type Template struct {
	parts []part
}

type part struct {
	text  string
	field bool // text is a field name
}

// ParseTemplate parses a template: "{name}" is the row's field name
// (letters, digits, _ . -), "{{" and "}}" are literal braces; an unclosed
// or empty reference, or a lone "}", is ErrConfig.
func ParseTemplate(s string) (*Template, error) {
	if len(s) > MaxTemplateBytes {
		return nil, fmt.Errorf("%w: template of %d bytes, at most %d", ErrConfig, len(s), MaxTemplateBytes)
	}
	t := &Template{}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexByte(s[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%w: template %q: { at byte %d is not closed (write {{ for a literal brace)", ErrConfig, s, i)
			}
			name := s[i+1 : i+1+end]
			if !validField(name) {
				return nil, fmt.Errorf("%w: template %q: {%s} is not a field name (letters, digits, _ . -)", ErrConfig, s, name)
			}
			flush()
			t.parts = append(t.parts, part{text: name, field: true})
			i += end + 1
		case c == '}':
			return nil, fmt.Errorf("%w: template %q: lone } at byte %d (write }} for a literal brace)", ErrConfig, s, i)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	if len(t.Fields()) == 0 {
		return nil, fmt.Errorf("%w: template %q names no field (write {field})", ErrConfig, s)
	}
	return t, nil
}

func validField(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r == '_' || r == '.' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
}

// Fields lists the fields the template names, each once, in order.
func (t *Template) Fields() []string {
	var fs []string
	for _, p := range t.parts {
		if p.field && !slices.Contains(fs, p.text) {
			fs = append(fs, p.text)
		}
	}
	return fs
}

// Apply fills the template from row, which must hold every field of
// Fields (the readers guarantee it).
func (t *Template) Apply(row Row) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.field {
			b.WriteString(row[p.text])
		} else {
			b.WriteString(p.text)
		}
	}
	return b.String()
}
