package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/model/chat"
)

func compact(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return b.String()
}

// calls renders the calls of r as "name(args)#id; ...".
func calls(t testing.TB, r Result) string {
	var out []string
	for _, c := range r.Calls {
		out = append(out, fmt.Sprintf("%s(%s)#%s", c.Name, compact(t, string(c.Arguments)), c.ID))
	}
	return strings.Join(out, "; ")
}

func kinds(r Result) string {
	var out []string
	for _, m := range r.Mistakes {
		out = append(out, string(m.Kind))
	}
	return strings.Join(out, ",")
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		f                        Format
		text                     string
		content, calls, mistakes string
		reasoning                string
	}{
		// Hermes / Qwen.
		{Hermes, "The answer is 4.<|im_end|>", "The answer is 4.", "", "", ""},
		{Hermes, "Let me add.\n<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"2+2\"}}\n</tool_call><|im_end|>", "Let me add.", `calc({"expr":"2+2"})#`, "", ""},
		{Hermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": [1]}\"}\n</tool_call>", "", `a({})#; b({"x":[1]})#`, "", ""},
		{Hermes, "<think>\nI should call.\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"parameters\": {\"k\": 1}}\n</tool_call>", "", `f({"k":1})#`, "", "I should call."},
		{Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": 1}\n</tool_call>", "", "", "bad_json", ""},
		{Hermes, "<tool_call>\n{\"arguments\": {}}\n</tool_call>", "", "", "no_name", ""},
		{Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>", "", "", "bad_args", ""},
		{Hermes, "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "", "", "bad_args", ""},
		{Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"not json\"}\n</tool_call>", "", "", "bad_args", ""},
		{Hermes, "ok <tool_call>\n{\"name\": \"f\", \"arguments\": {}}", "ok", "", "unclosed", ""},
		{Hermes, "<tool_call>{\"name\": \"f\"<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>", "", "g({})#", "unclosed", ""},
		{Hermes, "a </tool_call> b", "a  b", "", "stray", ""},
		{Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}} trailing</tool_call>", "", "", "bad_json", ""},
		// Llama 3.
		{Llama3, "The answer is 4.<|eot_id|>", "The answer is 4.", "", "", ""},
		{Llama3, "{\"name\": \"calc\", \"parameters\": {\"expr\": \"2+2\"}}<|eot_id|>", "", `calc({"expr":"2+2"})#`, "", ""},
		{Llama3, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"q\": \"x\"}}<|eom_id|>", "", `a({})#; b({"q":"x"})#`, "", ""},
		{Llama3, "<|python_tag|>brave_search.call(query=\"weather\")<|eom_id|>", "", "", "unsupported", ""},
		{Llama3, "{\"name\": \"calc\", \"parameters\": {\"expr\": ", "", "", "bad_json", ""},
		{Llama3, "{\"name\": \"a\", \"parameters\": {}} and then some", "", "a({})#", "stray", ""},
		{Llama3, "{\"parameters\": {}}", "", "", "no_name", ""},
		// Mistral v3 / Nemo.
		{Mistral, "[TOOL_CALLS][{\"name\": \"calc\", \"arguments\": {\"expr\": \"2+2\"}, \"id\": \"abcdefghi\"}]</s>", "", `calc({"expr":"2+2"})#abcdefghi`, "", ""},
		{Mistral, "Sure.[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"\", \"arguments\": {}}]", "Sure.", "a({})#", "no_name", ""},
		{Mistral, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}", "", "", "bad_json", ""},
		{Mistral, "[TOOL_CALLS]not a list", "", "", "unclosed", ""},
		// Mistral v11 (Small 3.2).
		{Mistral, "[TOOL_CALLS]calc[CALL_ID]abcdefghi[ARGS]{\"expr\": \"2+2\"}[TOOL_CALLS]get[ARGS]{}</s>", "", `calc({"expr":"2+2"})#abcdefghi; get({})#`, "", ""},
		{Mistral, "[TOOL_CALLS]calc[ARGS]{\"expr\": ", "", "", "bad_json", ""},
		{Mistral, "[TOOL_CALLS]calc[ARGS][1, 2]", "", "", "bad_args", ""},
		{Mistral, "Plain answer.</s>", "Plain answer.", "", "", ""},
		// Any format.
		{Hermes, "\xff", "", "", "bad_text", ""},
		{Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": " + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + "}</tool_call>", "", "", "bad_json", ""},
		{Hermes, strings.Repeat("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", MaxCalls+2), "", strings.TrimSuffix(strings.Repeat("f({})#; ", MaxCalls), "; "), "limit,limit", ""},
	} {
		r := Parse(c.f, c.text)
		if r.Content != c.content || calls(t, r) != c.calls || kinds(r) != c.mistakes || r.Reasoning != c.reasoning {
			t.Errorf("Parse(%v, %.70q):\n got content %q calls %q mistakes %q (%v) reasoning %q\nwant content %q calls %q mistakes %q reasoning %q",
				c.f, c.text, r.Content, calls(t, r), kinds(r), r.Mistakes, r.Reasoning, c.content, c.calls, c.mistakes, c.reasoning)
		}
		if r.OK() != (c.mistakes == "") {
			t.Errorf("OK() = %v with mistakes %v", r.OK(), r.Mistakes)
		}
	}
	if r := Parse(Hermes, strings.Repeat("x", MaxTextBytes+1)); kinds(r) != "limit" {
		t.Errorf("an oversized reply: %v", r.Mistakes)
	}
}

// TestRoundTrip renders assistant tool calls with each family's published
// chat template (package chat), takes the assistant's part of the text as
// the model's reply, and reads the same calls back: the parser reads what
// the templates taught the models to write.
func TestRoundTrip(t *testing.T) {
	args := []string{`{"expr": "12*7"}`, `{"city": "Paris \"FR\"", "days": [1, 2.5], "opts": {"unit": "c", "x": null}}`}
	for _, c := range []struct {
		file, marker string
		f            Format
		two          bool // the template renders two calls in one message
		ids          bool // the reply carries the ids
	}{
		{"Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_start|>assistant\n", Hermes, true, false},
		{"Qwen-Qwen3-0.6B.jinja", "<|im_start|>assistant\n", Hermes, true, false},
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|start_header_id|>assistant<|end_header_id|>\n\n", Llama3, false, false},
		{"meta-llama-Llama-3.2-3B-Instruct.jinja", "<|start_header_id|>assistant<|end_header_id|>\n\n", Llama3, false, false},
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", "[/INST]", Mistral, true, true},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", "[/INST]", Mistral, true, true},
	} {
		src, err := os.ReadFile("../chat/testdata/templates/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := Detect(string(src)); !ok || f != c.f {
			t.Errorf("%s: Detect = %v %v, want %v", c.file, f, ok, c.f)
		}
		tm, err := chat.Compile(string(src))
		if err != nil {
			t.Fatal(err)
		}
		n := 1
		if c.two {
			n = 2
		}
		var tcs []string
		var want []string
		for i := range n {
			id := fmt.Sprintf("call%05d", i+1)
			name := []string{"calc", "get_weather"}[i]
			tcs = append(tcs, fmt.Sprintf(`{"id": %q, "type": "function", "function": {"name": %q, "arguments": %s}}`, id, name, args[i]))
			if !c.ids {
				id = ""
			}
			want = append(want, fmt.Sprintf("%s(%s)#%s", name, compact(t, args[i]), id))
		}
		msgs := `[{"role": "user", "content": "Do it."}, {"role": "assistant", "content": "", "tool_calls": [` + strings.Join(tcs, ", ") + `]}]`
		text, err := tm.Render(json.RawMessage(msgs), chat.Options{Vars: map[string]json.RawMessage{"bos_token": json.RawMessage(`"<s>"`), "eos_token": json.RawMessage(`"</s>"`)},
			Tools: json.RawMessage(`[{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}]`), Date: parseDate()})
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		i := strings.LastIndex(text, c.marker)
		if i < 0 {
			t.Fatalf("%s: no %q in %q", c.file, c.marker, text)
		}
		reply := text[i+len(c.marker):]
		r := Parse(c.f, reply)
		if got := calls(t, r); got != strings.Join(want, "; ") || !r.OK() || r.Content != "" {
			t.Errorf("%s: reply %q:\n got %q content %q mistakes %v\nwant %q", c.file, reply, got, r.Content, r.Mistakes, strings.Join(want, "; "))
		}
		// And the parsed reply renders back as the same conversation.
		back := `[{"role": "user", "content": "Do it."}, ` + string(r.Message(func(i int) string { return fmt.Sprintf("call%05d", i+1) })) + `]`
		again, err := tm.Render(json.RawMessage(back), chat.Options{Vars: map[string]json.RawMessage{"bos_token": json.RawMessage(`"<s>"`), "eos_token": json.RawMessage(`"</s>"`)},
			Tools: json.RawMessage(`[{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}]`), Date: parseDate()})
		if err != nil || again != text {
			t.Errorf("%s: the parsed reply renders as\n%q (%v), the original as\n%q", c.file, again, err, text)
		}
	}
}

func TestMessage(t *testing.T) {
	r := Parse(Hermes, "<think>hm</think>Sure <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>")
	got := string(r.Message(func(i int) string { return fmt.Sprintf("id%d", i) }))
	want := `{"role": "assistant", "content": "Sure", "reasoning_content": "hm", "tool_calls": [{"id": "id0", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// FuzzParse: any reply in any format parses without panicking; every call
// read has a name and an object of arguments; the message is valid JSON.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"2+2\"}}\n</tool_call>",
		"<think>x</think><tool_call>{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call></tool_call>",
		"<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"q\": [\"x\"]}}<|eom_id|>",
		"[TOOL_CALLS][{\"name\": \"calc\", \"arguments\": {\"expr\": \"2+2\"}, \"id\": \"abcdefghi\"}]</s>",
		"[TOOL_CALLS]calc[CALL_ID]abcdefghi[ARGS]{\"expr\": \"2+2\"}[TOOL_CALLS]x[ARGS]{}",
		"{\"name\": \"a\", \"parameters\": {\"s\": \"}{][\\\"\"}}",
	} {
		for fm := range 3 {
			f.Add(uint8(fm), s)
		}
	}
	f.Fuzz(func(t *testing.T, fm uint8, s string) {
		r := Parse(Format(fm%3+1), s)
		if len(r.Calls) > MaxCalls {
			t.Fatalf("%d calls", len(r.Calls))
		}
		for _, c := range r.Calls {
			var m map[string]json.RawMessage
			if c.Name == "" || json.Unmarshal(c.Arguments, &m) != nil || m == nil {
				t.Fatalf("call %+v", c)
			}
		}
		var v map[string]any
		if err := json.Unmarshal(r.Message(func(i int) string { return "x" }), &v); err != nil {
			t.Fatalf("message %s: %v", r.Message(func(i int) string { return "x" }), err)
		}
	})
}

func parseDate() time.Time { return time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC) }
