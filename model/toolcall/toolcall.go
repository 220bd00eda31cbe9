// Package toolcall reads the tool calls out of a model's reply, in the
// format its chat template taught it:
//
//   - Hermes (Qwen2.5, Qwen3, Hermes, many fine-tunes): blocks
//     `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` after or
//     instead of the text; Qwen3's `<think>...</think>` reasoning is split
//     off first.
//   - Llama 3 (3.1, 3.2, 3.3 JSON tool calling): the whole reply is
//     `{"name": ..., "parameters": {...}}`, optionally after
//     `<|python_tag|>`; several calls are separated by `;`.
//   - Mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}]`
//     (v3, Nemo) or `[TOOL_CALLS]name[CALL_ID]id[ARGS]{...}` repeated
//     (Small 3.2 and later; [CALL_ID] optional), after the text.
//
// A malformed call — an unclosed block, JSON that does not parse, no name,
// arguments that are not an object, a call syntax the format does not
// have — is the model's mistake, not the caller's: Parse never fails. It
// returns what it could read and a Mistake for each call it could not, so
// a trainer scores the reply (a reward signal) and an episode goes on.
//
// Parse reads text decoded with the special tokens kept
// (tokenizer.Decode(ids, false)): [TOOL_CALLS] and <|python_tag|> are
// special tokens. The end-of-turn token at the end (<|im_end|>,
// <|eot_id|>, <|eom_id|>, </s>) is dropped. Inputs are bounded: at most
// MaxTextBytes of text, MaxCalls calls, arguments nested at most MaxDepth
// deep; past a bound the rest is a Mistake.
package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on a reply.
const (
	MaxTextBytes = 1 << 20
	MaxCalls     = 64
	MaxDepth     = 64
)

// Format is a model family's tool-call syntax.
type Format int

const (
	Hermes Format = iota + 1
	Llama3
	Mistral
)

func (f Format) String() string {
	switch f {
	case Hermes:
		return "hermes"
	case Llama3:
		return "llama3"
	case Mistral:
		return "mistral"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Detect names the format a chat template renders tool calls in, from its
// source: ok false when it renders none this package reads.
func Detect(template string) (Format, bool) {
	switch {
	case strings.Contains(template, "[TOOL_CALLS]"):
		return Mistral, true
	case strings.Contains(template, "<tool_call>"):
		return Hermes, true
	case strings.Contains(template, "<|start_header_id|>") && strings.Contains(template, `"parameters": `):
		return Llama3, true
	}
	return 0, false
}

// Call is one tool call.
type Call struct {
	// ID is the call's id when the model wrote one (Mistral), else "".
	ID string `json:"id,omitempty"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Arguments is a JSON object, as the model wrote it (a JSON string
	// holding an object is decoded once).
	Arguments json.RawMessage `json:"arguments"`
}

// Kind classifies a mistake.
type Kind string

const (
	Unclosed    Kind = "unclosed"    // a call's opening without its end
	BadJSON     Kind = "bad_json"    // the call is not one JSON object
	NoName      Kind = "no_name"     // no "name", or not a non-empty string
	BadArgs     Kind = "bad_args"    // arguments missing or not an object
	Unsupported Kind = "unsupported" // a syntax the format has but this package does not read (Llama's built-in tools)
	Stray       Kind = "stray"       // a closing marker with no call open, or text inside a call list
	Limit       Kind = "limit"       // over MaxTextBytes, MaxCalls or MaxDepth
	BadText     Kind = "bad_text"    // not UTF-8
)

// Mistake is one call the model got wrong.
type Mistake struct {
	Kind   Kind   `json:"kind"`
	Detail string `json:"detail"` // what, with up to 80 bytes of the offending text
}

func (m Mistake) String() string { return string(m.Kind) + ": " + m.Detail }

// Result is what a reply says.
type Result struct {
	// Content is the reply's text outside its calls, trimmed.
	Content string
	// Reasoning is the text of a leading <think>...</think> (Hermes), trimmed.
	Reasoning string
	Calls     []Call
	Mistakes  []Mistake
}

// OK reports whether every call in the reply was read.
func (r Result) OK() bool { return len(r.Mistakes) == 0 }

// Parse reads a reply in format f. It never fails: what it cannot read is
// in Mistakes.
func Parse(f Format, text string) Result {
	var r Result
	if len(text) > MaxTextBytes {
		r.Mistakes = append(r.Mistakes, Mistake{Limit, fmt.Sprintf("a reply of %d bytes, at most %d", len(text), MaxTextBytes)})
		return r
	}
	if !utf8.ValidString(text) {
		r.Mistakes = append(r.Mistakes, Mistake{BadText, "not valid UTF-8"})
		return r
	}
	text = trimEnd(text)
	switch f {
	case Hermes:
		parseHermes(&r, text)
	case Llama3:
		parseLlama3(&r, text)
	case Mistral:
		parseMistral(&r, text)
	default:
		r.Content = strings.TrimSpace(text)
	}
	return r
}

// trimEnd drops end-of-turn tokens at the end of a reply.
func trimEnd(s string) string {
	for {
		t := strings.TrimRight(s, " \t\r\n")
		cut := false
		for _, e := range []string{"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|endoftext|>", "</s>"} {
			if strings.HasSuffix(t, e) {
				t, cut = strings.TrimSuffix(t, e), true
			}
		}
		if !cut {
			return s
		}
		s = t
	}
}

func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	i := 80
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// add records a call read from obj (a JSON object's text), or the mistake.
func (r *Result) add(obj string, argKeys []string, id string) {
	if len(r.Calls) >= MaxCalls {
		r.Mistakes = append(r.Mistakes, Mistake{Limit, fmt.Sprintf("more than %d calls", MaxCalls)})
		return
	}
	fields, err := object(obj)
	if err != nil {
		r.Mistakes = append(r.Mistakes, Mistake{BadJSON, fmt.Sprintf("%v: %s", err, clip(obj))})
		return
	}
	var name string
	if raw, ok := fields["name"]; !ok || json.Unmarshal(raw, &name) != nil || strings.TrimSpace(name) == "" {
		r.Mistakes = append(r.Mistakes, Mistake{NoName, "no tool name: " + clip(obj)})
		return
	}
	var args json.RawMessage
	for _, k := range argKeys {
		if raw, ok := fields[k]; ok {
			args = raw
			break
		}
	}
	if args == nil {
		r.Mistakes = append(r.Mistakes, Mistake{BadArgs, fmt.Sprintf("%s: no %s", name, strings.Join(argKeys, " or "))})
		return
	}
	args, err = argumentsObject(args)
	if err != nil {
		r.Mistakes = append(r.Mistakes, Mistake{BadArgs, fmt.Sprintf("%s: %v", name, err)})
		return
	}
	if id == "" {
		if raw, ok := fields["id"]; ok {
			_ = json.Unmarshal(raw, &id) // an id that is not a string is left out
		}
	}
	r.Calls = append(r.Calls, Call{ID: id, Name: name, Arguments: args})
}

// object parses s as exactly one JSON object, nested at most MaxDepth deep.
func object(s string) (map[string]json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") {
		return nil, fmt.Errorf("not a JSON object")
	}
	if err := checkDepth(s); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if dec.More() || dec.InputOffset() != int64(len(s)) {
		return nil, fmt.Errorf("text after the object")
	}
	return m, nil
}

// argumentsObject returns the arguments as a JSON object: as given, or
// decoded once from a JSON string that holds one (OpenAI's form).
func argumentsObject(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if _, err := object(s); err != nil {
			return nil, fmt.Errorf("arguments string is not a JSON object: %v", err)
		}
		return json.RawMessage(strings.TrimSpace(s)), nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("arguments are not an object: %s", clip(string(raw)))
	}
	return raw, nil
}

// walkJSON scans s outside JSON strings and calls step with the index
// and the nesting depth after each bracket; it stops when step returns
// false.
func walkJSON(s string, step func(i, depth int) bool) {
	depth, inStr, esc := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
			if !step(i, depth) {
				return
			}
		case c == '}' || c == ']':
			depth--
			if !step(i, depth) {
				return
			}
		}
	}
}

// checkDepth refuses JSON nested deeper than MaxDepth (strings skipped).
func checkDepth(s string) error {
	var err error
	walkJSON(s, func(_, depth int) bool {
		if depth > MaxDepth {
			err = fmt.Errorf("nested deeper than %d", MaxDepth)
		}
		return err == nil
	})
	return err
}

// jsonEnd returns the length of the JSON value (object or list) at the
// start of s, by bracket matching outside strings, or -1 if it does not
// close.
func jsonEnd(s string) int {
	end := -1
	walkJSON(s, func(i, depth int) bool {
		switch {
		case depth == 0:
			end = i + 1
		case depth > 0:
			return true
		}
		return false // closed, or closed more than it opened
	})
	return end
}

func parseHermes(r *Result, text string) {
	const open, close = "<tool_call>", "</tool_call>"
	if i := strings.Index(text, "</think>"); i >= 0 {
		r.Reasoning = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text[:i]), "<think>"))
		text = text[i+len("</think>"):]
	}
	var content strings.Builder
	for {
		i := strings.Index(text, open)
		j := strings.Index(text, close)
		if j >= 0 && (i < 0 || j < i) {
			r.Mistakes = append(r.Mistakes, Mistake{Stray, close + " with no " + open + " open"})
			content.WriteString(text[:j])
			text = text[j+len(close):]
			continue
		}
		if i < 0 {
			content.WriteString(text)
			break
		}
		content.WriteString(text[:i])
		rest := text[i+len(open):]
		end := strings.Index(rest, close)
		if end < 0 {
			r.Mistakes = append(r.Mistakes, Mistake{Unclosed, open + " without " + close + ": " + clip(strings.TrimSpace(rest))})
			break
		}
		if next := strings.Index(rest[:end], open); next >= 0 {
			r.Mistakes = append(r.Mistakes, Mistake{Unclosed, open + " without " + close + " before the next " + open + ": " + clip(strings.TrimSpace(rest[:next]))})
			text = rest[next:]
			continue
		}
		r.add(rest[:end], []string{"arguments", "parameters"}, "")
		text = rest[end+len(close):]
	}
	r.Content = strings.TrimSpace(content.String())
}

func parseLlama3(r *Result, text string) {
	s := strings.TrimSpace(text)
	tagged := strings.HasPrefix(s, "<|python_tag|>")
	s = strings.TrimSpace(strings.TrimPrefix(s, "<|python_tag|>"))
	if !strings.HasPrefix(s, "{") {
		if tagged {
			// <|python_tag|>brave_search.call(query="...") or code for the interpreter.
			r.Mistakes = append(r.Mistakes, Mistake{Unsupported, "a built-in tool call (<|python_tag|> without JSON): " + clip(s)})
			return
		}
		r.Content = s // a plain answer
		return
	}
	for s != "" {
		n := jsonEnd(s)
		if n < 0 {
			r.Mistakes = append(r.Mistakes, Mistake{BadJSON, "a call that does not close: " + clip(s)})
			return
		}
		r.add(s[:n], []string{"parameters", "arguments"}, "")
		s = strings.TrimSpace(s[n:])
		if strings.HasPrefix(s, ";") {
			s = strings.TrimSpace(s[1:])
			continue
		}
		if s != "" && !strings.HasPrefix(s, "{") {
			r.Mistakes = append(r.Mistakes, Mistake{Stray, "text after the calls: " + clip(s)})
			return
		}
	}
}

func parseMistral(r *Result, text string) {
	const tc = "[TOOL_CALLS]"
	i := strings.Index(text, tc)
	if i < 0 {
		r.Content = strings.TrimSpace(text)
		return
	}
	r.Content = strings.TrimSpace(text[:i])
	rest := text[i:]
	for strings.HasPrefix(rest, tc) {
		rest = strings.TrimLeft(rest[len(tc):], " \t\r\n")
		if strings.HasPrefix(rest, "[") {
			// v3: a JSON list of calls.
			n := jsonEnd(rest)
			if n < 0 {
				r.Mistakes = append(r.Mistakes, Mistake{BadJSON, "a call list that does not close: " + clip(rest)})
				return
			}
			if err := checkDepth(rest[:n]); err != nil {
				r.Mistakes = append(r.Mistakes, Mistake{Limit, err.Error()})
				return
			}
			var list []json.RawMessage
			if err := json.Unmarshal([]byte(rest[:n]), &list); err != nil {
				r.Mistakes = append(r.Mistakes, Mistake{BadJSON, fmt.Sprintf("%v: %s", err, clip(rest[:n]))})
			}
			for _, c := range list {
				r.add(string(c), []string{"arguments", "parameters"}, "")
			}
			rest = strings.TrimSpace(rest[n:])
			continue
		}
		// v11: name[CALL_ID]id[ARGS]{...}
		a := strings.Index(rest, "[ARGS]")
		if a < 0 {
			r.Mistakes = append(r.Mistakes, Mistake{Unclosed, tc + " without a call list or [ARGS]: " + clip(rest)})
			return
		}
		name, id, _ := strings.Cut(rest[:a], "[CALL_ID]")
		name, id = strings.TrimSpace(name), strings.TrimSpace(id)
		body := strings.TrimLeft(rest[a+len("[ARGS]"):], " \t\r\n")
		n := jsonEnd(body)
		if n < 0 {
			r.Mistakes = append(r.Mistakes, Mistake{BadJSON, name + ": arguments that do not close: " + clip(body)})
			return
		}
		obj, _ := json.Marshal(name)
		r.add(`{"name": `+string(obj)+`, "arguments": `+body[:n]+`}`, []string{"arguments"}, id)
		rest = strings.TrimSpace(body[n:])
	}
	if rest != "" {
		r.Mistakes = append(r.Mistakes, Mistake{Stray, "text after the calls: " + clip(rest)})
	}
}

// Message is the reply as an assistant message for the chat template, in
// the OpenAI form transformers' templates read: {"role": "assistant",
// "content": ..., "tool_calls": [{"id", "type": "function", "function":
// {"name", "arguments"}}]} (reasoning_content when there is reasoning). A
// call without an id gets id(i), i its index (Mistral's templates want 9
// alphanumeric characters).
func (r Result) Message(id func(i int) string) json.RawMessage {
	var b bytes.Buffer
	str := func(s string) {
		q, _ := json.Marshal(s)
		b.Write(q)
	}
	b.WriteString(`{"role": "assistant", "content": `)
	str(r.Content)
	if r.Reasoning != "" {
		b.WriteString(`, "reasoning_content": `)
		str(r.Reasoning)
	}
	if len(r.Calls) > 0 {
		b.WriteString(`, "tool_calls": [`)
		for i, c := range r.Calls {
			if i > 0 {
				b.WriteString(", ")
			}
			cid := c.ID
			if cid == "" {
				cid = id(i)
			}
			b.WriteString(`{"id": `)
			str(cid)
			b.WriteString(`, "type": "function", "function": {"name": `)
			str(c.Name)
			b.WriteString(`, "arguments": `)
			b.Write(c.Arguments)
			b.WriteString(`}}`)
		}
		b.WriteString(`]`)
	}
	b.WriteString(`}`)
	return b.Bytes()
}
