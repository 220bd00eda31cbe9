// Package chat renders a model's chat template — the Jinja program in its
// tokenizer_config.json (`chat_template`, a string or a list of named
// templates) or chat_template.jinja — into the text an instruct model is
// trained and prompted with, exactly as transformers'
// tokenizer.apply_chat_template does: the same text, and so, encoded with
// package tokenizer without special tokens (as apply_chat_template
// encodes it), the same token ids. Conversations are JSON, as in a
// dataset's `messages` field or an OpenAI-style request: system, user,
// assistant and tool messages, tool calls, tool schemas, reasoning.
//
//	set, _ := chat.Load(modelDir)              // templates + special tokens
//	t, _ := set.Select("", tools != nil)       // transformers' choice
//	text, err := t.Render(messages, chat.Options{
//		AddGenerationPrompt: true, Tools: tools, Vars: set.Vars(nil),
//		Date: fixed,                           // strftime_now; zero: undefined
//	})
//	ids, _ := tok.Encode(text, false)
//
// What transformers does besides running the template is done here too:
// keys whose value is null are dropped from each message; a message with
// reasoning_content, thinking or reasoning gets thinking and
// reasoning_content; the template sees messages, tools (None when not
// given), documents (None), add_generation_prompt, the special tokens and
// the caller's variables (which win); tojson is Python's json.dumps with
// ensure_ascii off; the template picked is the named one, else tool_use
// when tools are given, else default. Object keys keep their order
// throughout, as Python's dicts do: tojson writes tool schemas and
// arguments in the order they were given.
//
// # The Jinja engine
//
// Templates run on github.com/ardanlabs/jinja (pure Go, no dependencies,
// written for chat templates: ordered dicts, Python-style truthiness,
// namespace, loop controls, the string methods templates use). We tried
// the maintained candidates on the six published templates in testdata
// (Qwen2.5, Qwen3, Llama 3.1, Llama 3.2, Mistral Nemo, Mistral Small 3.2),
// fourteen renders each, against transformers: ardanlabs/jinja v1.8.0
// matched 80 of 84; github.com/nikolalohinski/gonja/v2 v2.9.1 matched 54
// (its tojson is Go's encoding/json — keys sorted, no spaces, <>&
// escaped — and it has no strftime_now). v1.8.0 is the newest
// ardanlabs/jinja that builds with this module's Go 1.26; later ones need
// Go 1.27. Its four misses were tojson with an indent (Llama 3.x's tool
// prompt), where it falls back to encoding/json. Its built-in filters
// cannot be replaced, so Compile rewrites, in the template's tags, the
// filters and methods whose Go versions differ from Python's into calls
// of this package's Python-faithful functions: `x | tojson(...)` (keys
// in order, ", " and ": " separators, indent, sort_keys, ensure_ascii,
// Python's float repr), `x | trim` and `x.strip()`, `.lstrip()`,
// `.rstrip()` (Python's whitespace includes \v, \f and \x1c to \x1f; the
// engine's lstrip/rstrip take only space, tab, CR and LF). It also
// replaces range (bounded) and strftime_now (the injected Date).
//
// TestParity checks the result: 172 conversations (hand-picked and
// generated: system prompts, several turns, one and two tool calls with
// their results, arguments as objects and as JSON strings, reasoning,
// enable_thinking, date_string, Llama's tools_in_user_message and
// builtin_tools, Unicode, control characters, special
// tokens and Jinja syntax inside content, with and without tools and a
// generation prompt) on each of the six templates, each in a model
// directory with a tokenizer trained by testdata/reference.py, compared
// with transformers 5 on the same directory: every conversation
// transformers renders renders to the same text and the same ids here,
// and what transformers refuses (the templates' raise_exception: roles
// that do not alternate, Llama's one tool call at a time, Mistral's
// 9-character call ids) is refused here too.
//
// The known gap is the other way round: Jinja's Undefined raises on most
// operations (`'x' in message.content` when the message has no content),
// and Python refuses to add a list to a string; the engine treats an
// undefined value as empty and prints the list. So a few conversations
// that transformers refuses render here (Qwen3 with an assistant tool-call
// message that has no content at all: give it "content": ""). The test
// counts these and fails on any other difference.
//
// # Untrusted templates
//
// A chat template is a program that comes with the model. Compile refuses
// what could run away or differ from transformers' sandbox: a source over
// 1 MiB or not UTF-8, a macro that calls itself or a later macro, a
// `recursive` loop (both could overflow the stack, which no recover
// catches), and the methods that mutate a list or dict (.append, .pop,
// .update, ...: ImmutableSandboxedEnvironment refuses them, and without
// them no value can contain itself). range makes at most 2^20 items per
// render, inputs are at most 16 MiB and 64 levels deep, a rendered text
// over 64 MiB is refused, and a panic in the engine is an error. What is
// not bounded: the time and memory of a render while it runs — a template
// that loops over large inputs many times, or repeats a string
// ('x' * 10**9), runs to its end or out of memory; the engine has no hook
// to stop one. A model's template is code its publisher chose; a job on a
// hostile base can waste its own workers' time this way.
package chat
