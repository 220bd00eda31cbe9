package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// MaxDepth bounds the nesting of the JSON a template is given (messages,
// tools, variables) and of the values tojson writes.
const MaxDepth = 64

// decodeJSON reads one JSON value into the engine's values, keeping the
// order of object keys (Python's json.loads keeps it, and tojson writes it
// back in that order). Numbers without a fraction or exponent that fit in
// int64 are integers, others floats, as in Python; a whole number too large
// for int64 is refused (Python would keep it exactly).
func decodeJSON(data []byte) (jinja.Value, error) {
	if !utf8.Valid(data) {
		return jinja.Value{}, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Value{}, errors.New("more than one JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (jinja.Value, error) {
	if depth > MaxDepth {
		return jinja.Value{}, fmt.Errorf("nested deeper than %d", MaxDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch v := t.(type) {
	case json.Delim:
		switch v {
		case '[':
			items := []jinja.Value{}
			for dec.More() {
				it, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, it)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return jinja.NewList(items), nil
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				it, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Value{}, err
				}
				// A repeated key keeps its first position and its last
				// value, as Python's dict does.
				d.AsDict().Set(k.(string), it)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return d, nil
		}
		return jinja.Value{}, fmt.Errorf("unexpected %v", v)
	case string:
		return jinja.NewString(v), nil
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return jinja.Value{}, fmt.Errorf("integer %s does not fit in 64 bits", clip(s, 40))
			}
			return jinja.NewInt(i), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return jinja.Value{}, fmt.Errorf("number %s out of range", clip(s, 40))
		}
		return jinja.NewFloat(f), nil
	case bool:
		return jinja.NewBool(v), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Value{}, fmt.Errorf("unexpected token %v", t)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// toJSON writes v as Python's json.dumps(v, ensure_ascii=ensureASCII,
// indent=indent, separators=seps, sort_keys=sortKeys) does: transformers'
// tojson filter. indent nil is no indentation; seps nil are the defaults
// (", " and ": ", or "," and ": " with an indent).
func toJSON(b *strings.Builder, v jinja.Value, ensureASCII bool, indent *string, seps *[2]string, sortKeys bool) error {
	item, key := ", ", ": "
	if indent != nil {
		item = ","
	}
	if seps != nil {
		item, key = seps[0], seps[1]
	}
	return writeJSON(b, v, ensureASCII, indent, item, key, sortKeys, 0)
}

func writeJSON(b *strings.Builder, v jinja.Value, ascii bool, indent *string, item, key string, sortKeys bool, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("tojson: nested deeper than %d (a circular value?)", MaxDepth)
	}
	newline := func(level int) {
		if indent != nil {
			b.WriteByte('\n')
			for range level {
				b.WriteString(*indent)
			}
		}
	}
	switch {
	case v.IsUndefined():
		return errors.New("tojson: undefined value")
	case v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloat(v.AsFloat(), true))
	case v.IsString():
		writeJSONString(b, v.AsString(), ascii)
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(item)
			}
			newline(depth + 1)
			if err := writeJSON(b, it, ascii, indent, item, key, sortKeys, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if sortKeys {
			slices.Sort(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(item)
			}
			newline(depth + 1)
			writeJSONString(b, k, ascii)
			b.WriteString(key)
			val, _ := d.Get(k)
			if err := writeJSON(b, val, ascii, indent, item, key, sortKeys, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	default:
		return errors.New("tojson: value is not JSON serializable")
	}
	return nil
}

// writeJSONString quotes s as Python's json.dumps does: \" \\ \n \r \t \b
// \f, other control characters as \u00XX, and with ensureASCII everything
// past U+007E as \uXXXX (surrogate pairs above U+FFFF).
func writeJSONString(b *strings.Builder, s string, ascii bool) {
	const hex = "0123456789abcdef"
	u4 := func(r rune) {
		b.WriteString(`\u`)
		b.WriteByte(hex[r>>12&15])
		b.WriteByte(hex[r>>8&15])
		b.WriteByte(hex[r>>4&15])
		b.WriteByte(hex[r&15])
	}
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				u4(r)
			case ascii && r > 0x7e && r <= 0xffff:
				u4(r)
			case ascii && r > 0xffff:
				r -= 0x10000
				u4(0xd800 + r>>10)
				u4(0xdc00 + r&0x3ff)
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyFloat is Python's repr of a float: the shortest digits that read back
// the same, in exponent form when the exponent is below -4 or at least 16,
// with ".0" on whole numbers. json is true for json.dumps (Infinity, NaN),
// false for str (inf, nan).
func pyFloat(f float64, json bool) string {
	switch {
	case math.IsNaN(f):
		if json {
			return "NaN"
		}
		return "nan"
	case math.IsInf(f, 1):
		if json {
			return "Infinity"
		}
		return "inf"
	case math.IsInf(f, -1):
		if json {
			return "-Infinity"
		}
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exps, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(exps)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	if exp < -4 || exp >= 16 {
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		out += fmt.Sprintf("e%s%02d", sign, exp)
	} else if exp < 0 {
		out = "0." + strings.Repeat("0", -exp-1) + digits
	} else if len(digits) <= exp+1 {
		out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	} else {
		out = digits[:exp+1] + "." + digits[exp+1:]
	}
	if neg {
		out = "-" + out
	}
	return out
}
