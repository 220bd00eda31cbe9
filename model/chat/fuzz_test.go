package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzRender gives the published templates arbitrary conversations, tools
// and variables: a render returns text or an error (ErrInput, ErrTemplate),
// never panics, and is a pure function of its input.
func FuzzRender(f *testing.F) {
	paths, _ := filepath.Glob("testdata/templates/*.jinja")
	var ts []*Template
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		t, err := Compile(string(b))
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		ts = append(ts, t)
	}
	f.Add(uint8(0), []byte(`[{"role":"user","content":"hi"}]`), []byte(`null`), []byte(`"<s>"`), true)
	f.Add(uint8(1), []byte(`[{"role":"system","content":"s"},{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"id":"abcdefghi","type":"function","function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","tool_call_id":"abcdefghi","content":"r"}]`),
		[]byte(`[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`), []byte(`true`), false)
	f.Add(uint8(2), []byte(`[{"role":"assistant","reasoning_content":"x","content":["a",{"b":null}]}]`), []byte(`[{}]`), []byte(`{"k":[1.5e300]}`), true)
	f.Add(uint8(3), []byte(`[{"role":"user","content":{"content":"x"}},{"role":"tool","content":7}]`), []byte(`[]`), []byte(`null`), false)
	f.Fuzz(func(t *testing.T, which uint8, msgs, tools, v []byte, agp bool) {
		tm := ts[int(which)%len(ts)]
		o := Options{AddGenerationPrompt: agp, Tools: tools, Date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			Vars: map[string]json.RawMessage{"bos_token": v, "eos_token": json.RawMessage(`"</s>"`), "enable_thinking": v, "date_string": v}}
		out, err := tm.Render(msgs, o)
		if err != nil {
			if !errors.Is(err, ErrInput) && !errors.Is(err, ErrTemplate) {
				t.Fatalf("error of no kind: %v", err)
			}
			return
		}
		again, err := tm.Render(msgs, o)
		if err != nil || again != out {
			t.Fatalf("second render differs: %q, %v", again, err)
		}
	})
}

// FuzzCompile compiles arbitrary template sources and renders what
// compiles: errors, never a panic or a run-away render.
func FuzzCompile(f *testing.F) {
	paths, _ := filepath.Glob("testdata/templates/*.jinja")
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		f.Add(string(b))
	}
	for _, s := range []string{
		`{{ x | tojson(indent=2) }}`, `{% raw %}{{{% endraw %}`, `{# c #}{{ a.b[1](2) | trim | tojson }}`,
		`{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1) }}`, `{% for i in range(3) %}{{ loop.index }}{% endfor %}`,
		`{% set ns = namespace(x=1) %}{% set ns.x = ns.x + 1 %}{{ ns.x }}`, `{{ 'a' * 3 }}`, `{{ "x".strip() }}`,
		`{% if messages[0]['role'] == 'system' %}{{ raise_exception('x') }}{% endif %}`, `{{ (((1))) }}`,
	} {
		f.Add(s)
	}
	msgs := json.RawMessage(`[{"role":"system","content":"s"},{"role":"user","content":"q"},{"role":"assistant","content":"a"}]`)
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 8192 {
			return // a fuzzer's megabyte of "(" tests the engine's stack, not this package
		}
		tm, err := Compile(src)
		if err != nil {
			if !errors.Is(err, ErrTemplate) {
				t.Fatalf("error of no kind: %v", err)
			}
			return
		}
		if _, err := tm.Render(msgs, Options{AddGenerationPrompt: true}); err != nil && !errors.Is(err, ErrTemplate) {
			t.Fatalf("error of no kind: %v", err)
		}
	})
}
