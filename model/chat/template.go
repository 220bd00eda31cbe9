package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// Limits on what a template is given and may do.
const (
	// MaxTemplateBytes bounds a template's source.
	MaxTemplateBytes = 1 << 20
	// MaxInputBytes bounds the JSON of a conversation, of the tools and of
	// the variables, each.
	MaxInputBytes = 16 << 20
	// MaxRange bounds the items range() makes in one render.
	MaxRange = 1 << 20
	// MaxOutputBytes bounds a rendered conversation.
	MaxOutputBytes = 64 << 20
)

// ErrTemplate reports a template this package refuses or that failed to
// render (the template's own raise_exception included).
var ErrTemplate = errors.New("chat: template")

// ErrInput reports messages, tools or variables that are not what a
// template is given (not JSON, not a list of objects, too large).
var ErrInput = errors.New("chat: input")

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	src string
	t   *jinja.Template
}

// Compile compiles a chat template's Jinja source.
func Compile(src string) (_ *Template, err error) {
	if len(src) > MaxTemplateBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTemplate, len(src), MaxTemplateBytes)
	}
	if !utf8.ValidString(src) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrTemplate)
	}
	prep, err := prepare(src)
	if err != nil {
		if !errors.Is(err, ErrTemplate) {
			err = fmt.Errorf("%w: %v", ErrTemplate, err)
		}
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: the engine failed on it: %v", ErrTemplate, r)
		}
	}()
	t, err := jinja.Compile(prep)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	return &Template{src: src, t: t}, nil
}

// Source returns the template's source as given to Compile.
func (t *Template) Source() string { return t.src }

// Options are what apply_chat_template passes besides the messages.
type Options struct {
	// AddGenerationPrompt ends the text with the header of an assistant
	// turn (add_generation_prompt=True).
	AddGenerationPrompt bool
	// Tools is the JSON list of tool schemas (tools=...); nil is None.
	Tools json.RawMessage
	// Vars are the template's other variables: the tokenizer's special
	// tokens (bos_token, eos_token, ...; Set.Vars gives them) and the
	// caller's keyword arguments (enable_thinking, date_string, ...), the
	// latter winning, as in transformers. Each value is JSON.
	Vars map[string]json.RawMessage
	// Date, when not zero, is what strftime_now formats; when zero,
	// strftime_now is undefined (templates that test for it fall back to a
	// fixed date; those that call it fail). transformers uses the clock: a
	// caller that wants its renders to be a pure function of their inputs
	// fixes the date.
	Date time.Time
}

// Render renders a conversation, messages being a JSON list of message
// objects, as transformers' apply_chat_template(messages, tools=...,
// add_generation_prompt=..., tokenize=False, **kwargs) does: keys whose
// value is null are dropped from each message, a message with
// reasoning_content, thinking or reasoning gets both thinking and
// reasoning_content, and the template sees messages, tools, documents
// (None), add_generation_prompt and the variables.
func (t *Template) Render(messages json.RawMessage, o Options) (out string, err error) {
	data, err := o.data(messages)
	if err != nil {
		return "", err
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("%w: the engine failed: %v", ErrTemplate, r)
		}
	}()
	out, err = t.t.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	if len(out) > MaxOutputBytes {
		return "", fmt.Errorf("%w: rendered %d bytes, at most %d", ErrTemplate, len(out), MaxOutputBytes)
	}
	return out, nil
}

// data builds the template's variables.
func (o Options) data(messages json.RawMessage) (map[string]jinja.Value, error) {
	data := map[string]jinja.Value{}
	for _, k := range slices.Sorted(maps.Keys(o.Vars)) {
		if len(o.Vars[k]) > MaxInputBytes {
			return nil, fmt.Errorf("%w: variable %s: over %d bytes", ErrInput, k, MaxInputBytes)
		}
		v, err := decodeJSON(o.Vars[k])
		if err != nil {
			return nil, fmt.Errorf("%w: variable %s: %v", ErrInput, k, err)
		}
		data[k] = v
	}
	msgs, err := prepareMessages(messages)
	if err != nil {
		return nil, err
	}
	data["messages"] = msgs
	data["tools"] = jinja.None()
	if o.Tools != nil {
		if len(o.Tools) > MaxInputBytes {
			return nil, fmt.Errorf("%w: tools: over %d bytes", ErrInput, MaxInputBytes)
		}
		tools, err := decodeJSON(o.Tools)
		if err != nil {
			return nil, fmt.Errorf("%w: tools: %v", ErrInput, err)
		}
		if !tools.IsNone() {
			if !tools.IsList() {
				return nil, fmt.Errorf("%w: tools: not a list", ErrInput)
			}
			for i, tl := range tools.AsList().Items {
				if !tl.IsDict() {
					return nil, fmt.Errorf("%w: tools[%d]: not an object", ErrInput, i)
				}
			}
		}
		data["tools"] = tools
	}
	data["documents"] = jinja.None()
	data["add_generation_prompt"] = jinja.NewBool(o.AddGenerationPrompt)
	data["gym_tojson"] = jinja.NewCallable("tojson", tojsonFunc)
	data["gym_trim"] = jinja.NewCallable("trim", stripFunc("trim", true, true))
	data["gym_strip"] = jinja.NewCallable("strip", stripFunc("strip", true, true))
	data["gym_lstrip"] = jinja.NewCallable("lstrip", stripFunc("lstrip", true, false))
	data["gym_rstrip"] = jinja.NewCallable("rstrip", stripFunc("rstrip", false, true))
	data["range"] = boundedRange()
	if o.Date.IsZero() {
		data["strftime_now"] = jinja.Undefined()
	} else {
		date := o.Date
		data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if len(args) != 1 || !args[0].IsString() {
				return jinja.Value{}, errors.New("strftime_now takes one format string")
			}
			s, err := Strftime(date, args[0].AsString())
			return jinja.NewString(s), err
		})
	}
	return data, nil
}

// prepareMessages decodes the conversation and makes the changes
// transformers makes before rendering.
func prepareMessages(messages json.RawMessage) (jinja.Value, error) {
	if len(messages) > MaxInputBytes {
		return jinja.Value{}, fmt.Errorf("%w: messages: over %d bytes", ErrInput, MaxInputBytes)
	}
	v, err := decodeJSON(messages)
	if err != nil {
		return jinja.Value{}, fmt.Errorf("%w: messages: %v", ErrInput, err)
	}
	if !v.IsList() {
		return jinja.Value{}, fmt.Errorf("%w: messages: not a list", ErrInput)
	}
	items := v.AsList().Items
	if len(items) == 0 {
		return jinja.Value{}, fmt.Errorf("%w: messages: an empty conversation", ErrInput)
	}
	out := make([]jinja.Value, len(items))
	for i, m := range items {
		if !m.IsDict() {
			return jinja.Value{}, fmt.Errorf("%w: messages[%d]: not an object", ErrInput, i)
		}
		d := m.AsDict()
		nm := jinja.NewDict()
		var reasoning *jinja.Value
		for _, f := range []string{"reasoning_content", "thinking", "reasoning"} {
			if r, ok := d.Get(f); ok && !r.IsNone() {
				reasoning = &r
				break
			}
		}
		if reasoning != nil {
			nm.AsDict().Set("thinking", *reasoning)
		}
		for _, k := range d.OrderedKeys() {
			if val, _ := d.Get(k); !val.IsNone() {
				nm.AsDict().Set(k, val)
			}
		}
		if reasoning != nil {
			nm.AsDict().Set("reasoning_content", *reasoning)
		}
		out[i] = nm
	}
	return jinja.NewList(out), nil
}

// tojsonFunc is transformers' tojson filter:
// json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), the options by keyword or in that order.
func tojsonFunc(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Value{}, errors.New("tojson: no value")
	}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	opt := map[string]jinja.Value{}
	for i, a := range args[1:] {
		if i >= len(names) {
			return jinja.Value{}, errors.New("tojson: too many arguments")
		}
		opt[names[i]] = a
	}
	for k, v := range kwargs {
		if !slices.Contains(names, k) {
			return jinja.Value{}, fmt.Errorf("tojson: unexpected argument %s", k)
		}
		opt[k] = v
	}
	var indent *string
	if v, ok := opt["indent"]; ok && !v.IsNone() {
		switch {
		case v.IsInt():
			s := strings.Repeat(" ", int(max(0, min(v.AsInt(), 64))))
			indent = &s
		case v.IsString():
			s := v.AsString()
			indent = &s
		default:
			return jinja.Value{}, errors.New("tojson: indent is not a number or a string")
		}
	}
	var seps *[2]string
	if v, ok := opt["separators"]; ok && !v.IsNone() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Items[0].IsString() || !v.AsList().Items[1].IsString() {
			return jinja.Value{}, errors.New("tojson: separators is not two strings")
		}
		seps = &[2]string{v.AsList().Items[0].AsString(), v.AsList().Items[1].AsString()}
	}
	var b strings.Builder
	if err := toJSON(&b, args[0], opt["ensure_ascii"].IsTruthy(), indent, seps, opt["sort_keys"].IsTruthy()); err != nil {
		return jinja.Value{}, err
	}
	return jinja.NewString(b.String()), nil
}

// boundedRange is Python's range(stop), range(start, stop[, step]) as a
// list, refusing to make more than MaxRange items in one render.
func boundedRange() jinja.Value {
	made := 0
	return jinja.NewCallable("range", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		var start, stop, step int64 = 0, 0, 1
		for _, a := range args {
			if !a.IsInt() {
				return jinja.Value{}, errors.New("range: arguments must be integers")
			}
		}
		switch len(args) {
		case 1:
			stop = args[0].AsInt()
		case 2:
			start, stop = args[0].AsInt(), args[1].AsInt()
		case 3:
			start, stop, step = args[0].AsInt(), args[1].AsInt(), args[2].AsInt()
		default:
			return jinja.Value{}, fmt.Errorf("range: 1 to 3 arguments, got %d", len(args))
		}
		if step == 0 {
			return jinja.Value{}, errors.New("range: step is zero")
		}
		var items []jinja.Value
		for i := start; step > 0 && i < stop || step < 0 && i > stop; i += step {
			if made++; made > MaxRange {
				return jinja.Value{}, fmt.Errorf("range: more than %d items in one render", MaxRange)
			}
			items = append(items, jinja.NewInt(i))
			if step > 0 && i > stop-step || step < 0 && i < stop-step {
				break // the next i would overflow or pass stop
			}
		}
		return jinja.NewList(items), nil
	})
}

// Strftime formats t as Python's datetime.strftime does for the directives
// chat templates use: %d %m %y %Y %b %B %a %A %H %I %M %S %p %j %e %%.
// Others are an error rather than a guess.
func Strftime(t time.Time, format string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(format) {
			return "", errors.New("strftime: format ends in %")
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf("strftime: directive %%%c not supported", format[i])
		}
	}
	return b.String(), nil
}

// isPySpace is Python's str.isspace for one character: Go's unicode.IsSpace
// and the separators \x1c to \x1f.
func isPySpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// stripFunc is Python's str.strip (lstrip, rstrip) and Jinja's trim
// filter: without chars (or with None) Python's whitespace, else the
// characters of chars. The value is made a string first (trim) or must be
// one (the methods).
func stripFunc(name string, left, right bool) func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
	return func(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
		if len(args) == 0 || len(args) > 2 {
			return jinja.Value{}, fmt.Errorf("%s: 1 or 2 arguments", name)
		}
		v := args[0]
		var s string
		switch {
		case v.IsString():
			s = v.AsString()
		case name == "trim":
			s = v.String()
			if v.IsUndefined() || v.IsNone() {
				s = map[bool]string{true: "", false: "None"}[v.IsUndefined()]
			}
		default:
			return jinja.Value{}, fmt.Errorf("%s: not a string", name)
		}
		chars, ok := kwargs["chars"]
		if len(args) == 2 {
			chars, ok = args[1], true
		}
		cut := isPySpace
		if ok && !chars.IsNone() && !chars.IsUndefined() {
			if !chars.IsString() {
				return jinja.Value{}, fmt.Errorf("%s: chars is not a string", name)
			}
			set := chars.AsString()
			cut = func(r rune) bool { return strings.ContainsRune(set, r) }
		}
		if left {
			s = strings.TrimLeftFunc(s, cut)
		}
		if right {
			s = strings.TrimRightFunc(s, cut)
		}
		return jinja.NewString(s), nil
	}
}
