package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPyFloat(t *testing.T) {
	// Python's repr of each (python3 -c 'print(repr(x))').
	for f, want := range map[float64]string{
		1.0: "1.0", 0.1: "0.1", 1e-7: "1e-07", 1e16: "1e+16", 1e15: "1000000000000000.0",
		123456789012345678.0: "1.2345678901234568e+17", 2.5e-5: "2.5e-05", 0.0001: "0.0001",
		1.5e300: "1.5e+300", 3e-300: "3e-300", 100.0: "100.0", 1234.5678: "1234.5678", -2.5: "-2.5",
	} {
		if got := pyFloat(f, true); got != want {
			t.Errorf("pyFloat(%v) = %q, want %q", f, got, want)
		}
	}
}

func render(t *testing.T, src, messages string, o Options) (string, error) {
	t.Helper()
	tm, err := Compile(src)
	if err != nil {
		return "", err
	}
	return tm.Render(json.RawMessage(messages), o)
}

func TestToJSONIsPythons(t *testing.T) {
	msgs := `[{"role": "user", "content": "x", "v": {"b": [1, {}], "a": {"x": []}, "é": "\u2028\u001f\"", "f": 1.0}}]`
	for src, want := range map[string]string{
		// json.dumps(v, ensure_ascii=False) and friends, from Python.
		`{{ messages[0].v | tojson }}`:                                    `{"b": [1, {}], "a": {"x": []}, "é": "` + "\u2028" + `\u001f\"", "f": 1.0}`,
		`{{ messages[0].v.b | tojson(indent=2) }}`:                        "[\n  1,\n  {}\n]",
		`{{ messages[0].v.a | tojson(indent=2) }}`:                        "{\n  \"x\": []\n}",
		`{{ messages[0].v | tojson(sort_keys=true, ensure_ascii=true) }}`: `{"a": {"x": []}, "b": [1, {}], "f": 1.0, "\u00e9": "\u2028\u001f\""}`,
		`{{ [1, [2, 3]] | tojson(indent="\t", separators=[",", "="]) }}`:  "[\n\t1,\n\t[\n\t\t2,\n\t\t3\n\t]\n]",
		`{{ messages | first | tojson | length }}`:                        "97", // a filter chain around tojson
		`{{ "|tojson" }}{{ messages[0]["content"]|tojson }}`:              `|tojson"x"`,
		`{% set s = messages[0].content|tojson %}{{ s[1:] }}`:             `x"`,
		`{{ ' a'.strip() }}|{{ '` + "\x1f" + `b` + "\v" + `'.strip() }}|{{ ' c '.lstrip() }}|{{ ' c '.rstrip() }}|{{ '\ne\n'|trim }}`: "a|b|c | c|e",
	} {
		got, err := render(t, src, msgs, Options{})
		if err != nil {
			t.Errorf("%s: %v", src, err)
		} else if got != want {
			t.Errorf("%s:\n got %q\nwant %q", src, got, want)
		}
	}
}

func TestRewriteLeavesTextAlone(t *testing.T) {
	for _, src := range []string{
		"plain | tojson text {not a tag}",
		"{# a comment {{ x | tojson }} #}",
		"{% raw %}{{ x | tojson }}{% endraw %}",
		`{{ "a string | tojson" }}`,
	} {
		got, err := prepare(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if got != src {
			t.Errorf("prepare(%q) = %q, want it unchanged", src, got)
		}
	}
	got, _ := prepare(`{{- tools[0]["function"].name | tojson(indent=4) }}{{ x.y(1)[2] | e | tojson }}`)
	want := `{{- gym_tojson(tools[0]["function"].name, indent=4) }}{{ gym_tojson(x.y(1)[2] | e) }}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestCompileRefuses(t *testing.T) {
	for src, why := range map[string]string{
		`{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`:                      "calls f",
		`{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}x{% endmacro %}`: "calls b",
		`{% for m in messages recursive %}{{ loop(m.children) }}{% endfor %}`:  "recursive loops",
		`{% set l = [] %}{% set _ = l.append(l) %}{{ l }}`:                     "mutates",
		`{% set d = {} %}{{ d.update({"a": 1}) }}`:                             "mutates",
		`{{ x | tojson(`:                        "not closed",
		"{{ '\xff' }}":                          "UTF-8",
		strings.Repeat("x", MaxTemplateBytes+1): "bytes",
		`{% if %}`:                              "",
	} {
		_, err := Compile(src)
		if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), why) {
			t.Errorf("Compile(%.60q) = %v, want ErrTemplate mentioning %q", src, err, why)
		}
	}
	// A macro calling an earlier one is fine.
	if got, err := render(t, `{% macro a(x) %}<{{ x }}>{% endmacro %}{% macro b() %}{{ a(1) }}{{ a(2) }}{% endmacro %}{{ b() }}`, `[{"role":"user"}]`, Options{}); err != nil || got != "<1><2>" {
		t.Errorf("macros: %q, %v", got, err)
	}
}

func TestRenderBounds(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2)
	for _, c := range []struct{ src, msgs, why string }{
		{`{% for i in range(2000000) %}{% endfor %}`, `[{}]`, "range"},
		{`{% for i in range(1000) %}{% for j in range(1100) %}{% endfor %}{% endfor %}`, `[{}]`, "range"},
		{`x`, `[{"a": ` + deep + `}]`, "deeper"},
		{`x`, `{"role": "user"}`, "not a list"},
		{`x`, `[]`, "empty"},
		{`x`, `[1]`, "not an object"},
		{`x`, `[{"n": 99999999999999999999}]`, "64 bits"},
		{`x`, `[{}] [{}]`, "more than one"},
		{`{{ raise_exception("no") }}`, `[{}]`, "no"},
		{`{{ strftime_now("%d") }}`, `[{}]`, ""}, // undefined without a Date
	} {
		_, err := render(t, c.src, c.msgs, Options{})
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s on %.40s: %v, want an error mentioning %q", c.src, c.msgs, err, c.why)
		}
	}
	if _, err := render(t, "x", `[{}]`, Options{Tools: json.RawMessage(`{"a": 1}`)}); !errors.Is(err, ErrInput) {
		t.Errorf("tools not a list: %v", err)
	}
}

func TestMessagesAsTransformersGivesThem(t *testing.T) {
	src := `{% for m in messages %}{{ m | tojson }};{% endfor %}{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }}`
	got, err := render(t, src, `[{"role": "assistant", "content": null, "reasoning": "r"}, {"thinking": "t", "role": "x", "reasoning_content": "q"}]`, Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	// transformers: None values dropped; {"thinking": r, **message, "reasoning_content": r}.
	want := `{"thinking": "r", "role": "assistant", "reasoning": "r", "reasoning_content": "r"};{"thinking": "t", "role": "x", "reasoning_content": "q"};True True True`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestDate(t *testing.T) {
	d := time.Date(2024, 7, 26, 15, 4, 5, 0, time.UTC)
	got, err := render(t, `{{ strftime_now("%d %b %Y|%Y-%m-%d|%A %B %j %I%p %H:%M:%S %%") }}`, `[{}]`, Options{Date: d})
	if want := "26 Jul 2024|2024-07-26|Friday July 208 03PM 15:04:05 %"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	if _, err := Strftime(d, "%Q"); err == nil {
		t.Error("an unknown directive is an error, not a guess")
	}
	got, _ = render(t, `{% if strftime_now is defined %}defined{% else %}undefined{% endif %}`, `[{}]`, Options{})
	if got != "undefined" {
		t.Errorf("strftime_now without a Date is %s", got)
	}
}

func TestLoad(t *testing.T) {
	write := func(dir, name, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	first := func(s *Set, name string, tools bool) string {
		t.Helper()
		tm, err := s.Select(name, tools)
		if err != nil {
			return "error: " + err.Error()
		}
		out, err := tm.Render(json.RawMessage(`[{"role":"user","content":"hi"}]`), Options{Vars: s.Vars(map[string]json.RawMessage{"eos_token": json.RawMessage(`"<E>"`)})})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	a := t.TempDir()
	write(a, "tokenizer_config.json", `{"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null,
		"chat_template": [{"name": "default", "template": "D{{ bos_token }}{{ eos_token }}"}, {"name": "tool_use", "template": "T"}]}`)
	s, err := Load(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tokens) != 2 || s.Tokens["bos_token"] != "<s>" || s.Tokens["eos_token"] != "</s>" {
		t.Errorf("tokens %v", s.Tokens)
	}
	for _, c := range [][3]string{{"", "", "D<s><E>"}, {"", "tools", "T"}, {"tool_use", "", "T"}, {"nope", "", "error: chat: no template named \"nope\" (the model has default, tool_use)"}} {
		if got := first(s, c[0], c[1] != ""); got != c[2] {
			t.Errorf("Select(%q, %v): %q, want %q", c[0], c[1] != "", got, c[2])
		}
	}

	// chat_template.jinja wins over the config's; additional templates join it.
	write(a, "chat_template.jinja", "J")
	write(a, "additional_chat_templates/tool_use.jinja", "A")
	if s, err = Load(a); err != nil {
		t.Fatal(err)
	}
	if got := first(s, "", false) + first(s, "", true); got != "JA" {
		t.Errorf("got %q, want JA", got)
	}

	// Several templates and no default.
	b := t.TempDir()
	write(b, "tokenizer_config.json", `{"chat_template": [{"name": "x", "template": "X"}, {"name": "y", "template": "Y"}]}`)
	if s, err = Load(b); err != nil {
		t.Fatal(err)
	}
	if got := first(s, "", false); !strings.Contains(got, "no default") {
		t.Errorf("got %q", got)
	}

	for name, cfg := range map[string]string{
		"none":     `{"eos_token": "</s>"}`,
		"null":     `{"chat_template": null}`,
		"bad":      `{"chat_template": 3}`,
		"badtoken": `{"eos_token": 3, "chat_template": "x"}`,
		"badtmpl":  `{"chat_template": "{% macro f() %}{{ f() }}{% endmacro %}"}`,
		"json":     `{"chat_template": `,
	} {
		d := t.TempDir()
		write(d, "tokenizer_config.json", cfg)
		_, err := Load(d)
		if err == nil || (name == "none" || name == "null") && !errors.Is(err, ErrNoTemplate) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestConcurrentRenders renders one template from many goroutines (run
// with -race).
func TestConcurrentRenders(t *testing.T) {
	src, err := os.ReadFile("testdata/templates/Qwen-Qwen3-0.6B.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := Compile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	msgs := json.RawMessage(`[{"role":"user","content":"hi"},{"role":"assistant","content":"<think>\nx\n</think>\n\nyo"}]`)
	want, err := tm.Render(msgs, Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 8)
	for range 8 {
		go func() {
			out, _ := tm.Render(msgs, Options{AddGenerationPrompt: true})
			done <- out
		}()
	}
	for range 8 {
		if got := <-done; got != want {
			t.Errorf("concurrent render %q, want %q", got, want)
		}
	}
}
