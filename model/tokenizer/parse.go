package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Sentinel errors; every load error is an [*Error] wrapping one of them.
var (
	// ErrUnsupported: the file uses a component or option this package does
	// not implement.
	ErrUnsupported = errors.New("tokenizer: not supported")
	// ErrInvalid: the file is malformed or inconsistent.
	ErrInvalid = errors.New("tokenizer: invalid tokenizer.json")
	// ErrTooLarge: the file, or one of its tables, is over [Limits].
	ErrTooLarge = errors.New("tokenizer: over limit")
)

// Error is a load error located at a JSON path of tokenizer.json.
type Error struct {
	Path string // e.g. "model.type", "pre_tokenizer.pretokenizers[1].pattern"
	Msg  string
	Kind error // ErrUnsupported, ErrInvalid or ErrTooLarge
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "tokenizer.json: " + e.Msg
	}
	return "tokenizer.json: " + e.Path + " " + e.Msg
}

func (e *Error) Unwrap() error { return e.Kind }

func unsupported(path, format string, a ...any) error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, a...) + " not supported", Kind: ErrUnsupported}
}

func invalid(path, format string, a ...any) error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, a...), Kind: ErrInvalid}
}

func tooLarge(path, format string, a ...any) error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, a...), Kind: ErrTooLarge}
}

// Limits bound what a tokenizer.json may make this package allocate. The
// defaults hold every published Llama-family tokenizer with room to spare
// (Llama 3: 128,256 tokens, 280,147 merges, a 9 MB file).
type Limits struct {
	MaxFileBytes   int64 // size of tokenizer.json
	MaxVocab       int   // entries of model.vocab; also bounds every id
	MaxMerges      int   // entries of model.merges
	MaxAddedTokens int   // entries of added_tokens
	MaxTokenBytes  int   // length of one token's text
	MaxPatternLen  int   // length of one regular expression
	MaxDepth       int   // nesting of Sequence components
}

// DefaultLimits returns the limits [Parse] and [Load] use.
func DefaultLimits() Limits {
	return Limits{
		MaxFileBytes:   64 << 20,
		MaxVocab:       1 << 20,
		MaxMerges:      1 << 21,
		MaxAddedTokens: 1 << 16,
		MaxTokenBytes:  1 << 10,
		MaxPatternLen:  1 << 12,
		MaxDepth:       8,
	}
}

// Load reads and parses a tokenizer.json file with [DefaultLimits].
func Load(path string) (*Tokenizer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lim := DefaultLimits()
	if st, err := f.Stat(); err == nil && st.Size() > lim.MaxFileBytes {
		return nil, tooLarge("", "file is %d bytes, over the limit of %d", st.Size(), lim.MaxFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, lim.MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	return ParseLimits(data, lim)
}

// Parse parses the contents of a tokenizer.json with [DefaultLimits].
func Parse(data []byte) (*Tokenizer, error) { return ParseLimits(data, DefaultLimits()) }

// object is one JSON object being read, with its path for errors.
type object struct {
	path string
	m    map[string]json.RawMessage
	lim  *Limits
}

func sub(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isNull(raw json.RawMessage) bool {
	return raw == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// parseObject reads raw as a JSON object (duplicate keys refused) whose
// keys are all in allowed (when allowed is given).
func parseObject(raw json.RawMessage, path string, lim *Limits, allowed ...string) (*object, error) {
	sc := &scanner{b: raw}
	if sc.expect('{') != nil {
		return nil, invalid(path, "is not a JSON object")
	}
	m := map[string]json.RawMessage{}
	for first := true; ; first = false {
		more, err := sc.next(first, '}')
		if err != nil {
			return nil, invalid(path, "%v", err)
		}
		if !more {
			break
		}
		k, err := sc.str()
		if err != nil || sc.expect(':') != nil {
			return nil, invalid(path, "%v", errSyntax)
		}
		v, err := sc.value()
		if err != nil {
			return nil, invalid(sub(path, k), "%v", err)
		}
		if _, dup := m[k]; dup {
			return nil, invalid(path, "has the key %q twice", k)
		}
		m[k] = v
	}
	o := &object{path: path, m: m, lim: lim}
	if allowed != nil {
		if err := o.allow(allowed...); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// allow refuses a key of o that is not in allowed, naming it.
func (o *object) allow(allowed ...string) error {
	ok := map[string]bool{}
	for _, k := range allowed {
		ok[k] = true
	}
	keys := make([]string, 0, len(o.m))
	for k := range o.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !ok[k] {
			return unsupported(sub(o.path, k), "(unknown field)")
		}
	}
	return nil
}

func (o *object) has(key string) bool { return !isNull(o.m[key]) }

func (o *object) raw(key string) json.RawMessage { return o.m[key] }

func (o *object) str(key string, required bool, def string) (string, error) {
	raw, ok := o.m[key]
	if !ok || isNull(raw) {
		if required {
			return "", invalid(sub(o.path, key), "is missing")
		}
		return def, nil
	}
	sc := &scanner{b: raw}
	s, err := sc.str()
	if err != nil || sc.peek() != 0 {
		return "", invalid(sub(o.path, key), "is not a string")
	}
	if len(s) > o.lim.MaxTokenBytes && len(s) > o.lim.MaxPatternLen {
		return "", tooLarge(sub(o.path, key), "is %d bytes long", len(s))
	}
	return s, nil
}

func (o *object) boolean(key string, def bool) (bool, error) {
	raw, ok := o.m[key]
	if !ok || isNull(raw) {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, invalid(sub(o.path, key), "is not a boolean")
	}
	return b, nil
}

func (o *object) uint(key string, max int) (int, error) {
	raw, ok := o.m[key]
	if !ok || isNull(raw) {
		return 0, invalid(sub(o.path, key), "is missing")
	}
	return parseUint(raw, sub(o.path, key), max)
}

func parseUint(raw json.RawMessage, path string, max int) (int, error) {
	n, err := strconv.ParseUint(string(bytes.TrimSpace(raw)), 10, 63)
	if err != nil {
		return 0, invalid(path, "is not a non-negative integer")
	}
	if n > uint64(max) {
		return 0, tooLarge(path, "is %d, over the limit of %d", n, max)
	}
	return int(n), nil
}

// typ returns the "type" field of a component.
func (o *object) typ() (string, error) { return o.str("type", true, "") }

// char reads a one-character string field.
func (o *object) char(key string, def rune) (rune, error) {
	s, err := o.str(key, false, string(def))
	if err != nil {
		return 0, err
	}
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || n != len(s) {
		return 0, invalid(sub(o.path, key), "must be exactly one character")
	}
	return r, nil
}

// parseArray reads raw as a JSON array of at most max elements.
func parseArray(raw json.RawMessage, path string, max int) ([]json.RawMessage, error) {
	sc := &scanner{b: raw}
	if sc.expect('[') != nil {
		return nil, invalid(path, "is not a JSON array")
	}
	var out []json.RawMessage
	for first := true; ; first = false {
		more, err := sc.next(first, ']')
		if err != nil {
			return nil, invalid(path, "%v", err)
		}
		if !more {
			return out, nil
		}
		if len(out) >= max {
			return nil, tooLarge(path, "has more than %d entries", max)
		}
		v, err := sc.value()
		if err != nil {
			return nil, invalid(index(path, len(out)), "%v", err)
		}
		out = append(out, v)
	}
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// ParseLimits parses the contents of a tokenizer.json under lim.
func ParseLimits(data []byte, lim Limits) (*Tokenizer, error) {
	if int64(len(data)) > lim.MaxFileBytes {
		return nil, tooLarge("", "file is %d bytes, over the limit of %d", len(data), lim.MaxFileBytes)
	}
	if !utf8.Valid(data) {
		return nil, invalid("", "is not valid UTF-8")
	}
	if !json.Valid(data) {
		return nil, invalid("", "is not valid JSON")
	}
	top, err := parseObject(data, "", &lim, "version", "truncation", "padding", "added_tokens",
		"normalizer", "pre_tokenizer", "model", "post_processor", "decoder")
	if err != nil {
		return nil, err
	}
	if v, err := top.str("version", false, "1.0"); err != nil {
		return nil, err
	} else if v != "1.0" {
		return nil, unsupported("version", "%q", v)
	}
	for _, k := range []string{"truncation", "padding"} {
		if top.has(k) {
			return nil, unsupported(k, "(non-null)")
		}
	}
	t := &Tokenizer{}
	if !top.has("model") {
		return nil, invalid("model", "is missing")
	}
	if t.model, err = parseBPE(top.raw("model"), "model", &lim); err != nil {
		return nil, err
	}
	if top.has("normalizer") {
		if t.normalizer, err = parseNormalizer(top.raw("normalizer"), "normalizer", &lim, 0); err != nil {
			return nil, err
		}
	}
	if top.has("pre_tokenizer") {
		if t.preTokenizer, err = parsePreTokenizer(top.raw("pre_tokenizer"), "pre_tokenizer", &lim, 0); err != nil {
			return nil, err
		}
	}
	if top.has("decoder") {
		if t.decoder, err = parseDecoder(top.raw("decoder"), "decoder", &lim, 0); err != nil {
			return nil, err
		}
	}
	if top.has("added_tokens") {
		if err := t.parseAddedTokens(top.raw("added_tokens"), "added_tokens", &lim); err != nil {
			return nil, err
		}
	}
	if top.has("post_processor") {
		if t.post, err = t.parsePostProcessor(top.raw("post_processor"), "post_processor", &lim, 0); err != nil {
			return nil, err
		}
	}
	t.model.initCache()
	return t, nil
}
