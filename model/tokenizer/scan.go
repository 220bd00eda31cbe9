package tokenizer

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner walks JSON that json.Valid has accepted, without building it:
// encoding/json's Decoder.Token is ten times slower on a vocabulary of
// 128,000 entries. It checks every index, so even invalid input cannot make
// it panic; it reports such input as errSyntax.
type scanner struct {
	b []byte
	i int
}

var errSyntax = errors.New("malformed JSON")

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		return errSyntax
	}
	s.i++
	return nil
}

// str reads a string.
func (s *scanner) str() (string, error) {
	if s.peek() != '"' {
		return "", errSyntax
	}
	start := s.i
	s.i++
	escaped := false
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '\\':
			escaped = true
			s.i += 2
		case c == '"':
			s.i++
			if !escaped {
				return string(s.b[start+1 : s.i-1]), nil
			}
			return unescape(s.b[start+1 : s.i-1])
		case c < 0x20:
			return "", errSyntax
		default:
			s.i++
		}
	}
	return "", errSyntax
}

// value skips one value and returns its bytes.
func (s *scanner) value() (json.RawMessage, error) {
	c := s.peek()
	start := s.i
	switch c {
	case 0:
		return nil, errSyntax
	case '"':
		if _, err := s.str(); err != nil {
			return nil, err
		}
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, err := s.str(); err != nil {
					return nil, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return s.b[start:s.i], nil
			}
		}
		return nil, errSyntax
	default:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.b[start:s.i], nil
			}
			s.i++
		}
	}
	return s.b[start:s.i], nil
}

// next advances past a ',' between elements, or reports the closing
// bracket (returning false).
func (s *scanner) next(first bool, closing byte) (bool, error) {
	c := s.peek()
	if c == closing {
		s.i++
		return false, nil
	}
	if !first {
		if c != ',' {
			return false, errSyntax
		}
		s.i++
	}
	return true, nil
}

// uintValue reads a non-negative integer literal.
func (s *scanner) uintValue() (uint64, bool) {
	v, err := s.value()
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	return n, err == nil
}

// unescape decodes the escapes of a JSON string's contents. A lone UTF-16
// surrogate is refused, as serde_json refuses it.
func unescape(b []byte) (string, error) {
	out := make([]byte, 0, len(b))
	hex4 := func(i int) (rune, bool) {
		if i+4 > len(b) {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(b) {
			return "", errSyntax
		}
		switch b[i+1] {
		case '"', '\\', '/':
			out = append(out, b[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(i + 2)
			if !ok {
				return "", errSyntax
			}
			i += 6
			if r >= 0xD800 && r < 0xDC00 {
				if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
					return "", errSyntax
				}
				lo, ok := hex4(i + 2)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return "", errSyntax
				}
				r = utf16.DecodeRune(r, lo)
				i += 6
			} else if r >= 0xDC00 && r <= 0xDFFF {
				return "", errSyntax
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", errSyntax
		}
		i += 2
	}
	return string(out), nil
}
