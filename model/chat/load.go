package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MaxConfigBytes bounds tokenizer_config.json.
const MaxConfigBytes = 32 << 20

// MaxTemplates bounds the named templates of a model directory.
const MaxTemplates = 64

// Set is a model directory's chat templates and the special tokens its
// templates see.
type Set struct {
	// Templates by name; a single template is "default".
	Templates map[string]*Template
	// Tokens are the tokenizer's special tokens by name (bos_token,
	// eos_token, unk_token, sep_token, pad_token, cls_token, mask_token),
	// as tokenizer_config.json gives them: transformers'
	// special_tokens_map, which apply_chat_template passes to the template.
	Tokens map[string]string
}

// ErrNoTemplate reports a model directory without a chat template.
var ErrNoTemplate = errors.New("chat: the model has no chat template")

// Load reads the chat templates of a Hugging Face model directory as
// transformers' from_pretrained does: chat_template.jinja (the default)
// and additional_chat_templates/NAME.jinja when they exist, otherwise
// tokenizer_config.json's chat_template, a string or a list of
// {"name", "template"} objects. A directory with none is ErrNoTemplate.
func Load(dir string) (*Set, error) {
	s := &Set{Templates: map[string]*Template{}, Tokens: map[string]string{}}
	cfg, err := readConfig(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		raw, ok := cfg[k]
		if !ok {
			continue
		}
		tok, err := tokenContent(raw)
		if err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %s: %w", k, err)
		}
		if tok != nil {
			s.Tokens[k] = *tok
		}
	}
	sources := map[string]string{}
	if b, err := readBounded(filepath.Join(dir, "chat_template.jinja"), MaxTemplateBytes); err == nil {
		sources["default"] = string(b)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	extra := filepath.Join(dir, "additional_chat_templates")
	if ents, err := os.ReadDir(extra); err == nil {
		for _, e := range ents {
			name, ok := strings.CutSuffix(e.Name(), ".jinja")
			if !ok || !e.Type().IsRegular() {
				continue
			}
			if len(sources) >= MaxTemplates {
				return nil, fmt.Errorf("chat: more than %d templates in %s", MaxTemplates, extra)
			}
			b, err := readBounded(filepath.Join(extra, e.Name()), MaxTemplateBytes)
			if err != nil {
				return nil, err
			}
			sources[name] = string(b)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if len(sources) == 0 {
		if raw, ok := cfg["chat_template"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			if sources, err = configTemplates(raw); err != nil {
				return nil, fmt.Errorf("tokenizer_config.json: chat_template: %w", err)
			}
		}
	}
	if len(sources) == 0 {
		return nil, fmt.Errorf("%w (%s: no chat_template.jinja, additional_chat_templates/ or chat_template in tokenizer_config.json)", ErrNoTemplate, dir)
	}
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		t, err := Compile(sources[name])
		if err != nil {
			return nil, fmt.Errorf("chat template %q: %w", name, err)
		}
		s.Templates[name] = t
	}
	return s, nil
}

// readConfig reads tokenizer_config.json's top-level keys; a missing file
// is an empty config.
func readConfig(path string) (map[string]json.RawMessage, error) {
	b, err := readBounded(path, MaxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]json.RawMessage{}, nil
	}
	if err != nil {
		return nil, err
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return cfg, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("chat: %s is over %d bytes", path, limit)
	}
	return b, nil
}

// tokenContent reads a special token: a string, an AddedToken object
// ({"content": ...}), or null.
func tokenContent(raw json.RawMessage) (*string, error) {
	var s *string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return nil, errors.New("not a string or an object with content")
	}
	return obj.Content, nil
}

// configTemplates reads tokenizer_config.json's chat_template: a string
// (the default) or a list of {"name", "template"}.
func configTemplates(raw json.RawMessage) (map[string]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return map[string]string{"default": one}, nil
	}
	var list []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("not a string or a list of {name, template}")
	}
	if len(list) > MaxTemplates {
		return nil, fmt.Errorf("more than %d templates", MaxTemplates)
	}
	out := map[string]string{}
	for i, e := range list {
		if e.Name == nil || e.Template == nil {
			return nil, fmt.Errorf("entry %d: no name or no template", i)
		}
		out[*e.Name] = *e.Template
	}
	return out, nil
}

// Select picks the template transformers' get_chat_template picks: the
// named one when name is given; otherwise, with several templates,
// "tool_use" when tools are given and the model has one, else "default".
func (s *Set) Select(name string, tools bool) (*Template, error) {
	if name != "" {
		if t, ok := s.Templates[name]; ok {
			return t, nil
		}
		return nil, fmt.Errorf("chat: no template named %q (the model has %s)", name, strings.Join(slices.Sorted(maps.Keys(s.Templates)), ", "))
	}
	if t, ok := s.Templates["tool_use"]; ok && tools {
		return t, nil
	}
	if t, ok := s.Templates["default"]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("chat: several templates and no default: name one of %s", strings.Join(slices.Sorted(maps.Keys(s.Templates)), ", "))
}

// Vars returns the special tokens as template variables, for
// Options.Vars; extra (the caller's keyword arguments) win over them.
func (s *Set) Vars(extra map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for k, v := range s.Tokens {
		b, _ := json.Marshal(v)
		out[k] = b
	}
	maps.Copy(out, extra)
	return out
}
