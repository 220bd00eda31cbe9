package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/chat"
)

type baseChatOptions struct {
	messages, tools, template, vars string
	generation, ids                 bool
}

func newBaseChat() *cobra.Command {
	var o baseChatOptions
	cmd := &cobra.Command{
		Use:   "chat DIR --messages FILE|- [--tools FILE] [--generation-prompt] [--ids]",
		Short: "Render a conversation with a model directory's chat template, as transformers' apply_chat_template does",
		Long: `chat renders a conversation (a JSON list of messages: role, content,
tool_calls, ...) with DIR's chat template (chat_template.jinja, or
tokenizer_config.json's chat_template) exactly as transformers'
tokenizer.apply_chat_template(messages, tools=..., add_generation_prompt=...,
tokenize=False) renders it, and prints the text; --ids prints its token ids
(tokenize=True) instead, one JSON list. --vars FILE gives the template's
other variables (a JSON object: enable_thinking, date_string, ...).
strftime_now is undefined, as when a job renders a dataset's prompts.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBaseChat(args[0], o, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.messages, "messages", "", "the conversation, a JSON file (- for standard input)")
	f.StringVar(&o.tools, "tools", "", "the tool schemas, a JSON file (a list)")
	f.StringVar(&o.vars, "vars", "", "the template's other variables, a JSON file (an object)")
	f.StringVar(&o.template, "template", "", "a named template of the model (default: transformers' choice)")
	f.BoolVar(&o.generation, "generation-prompt", false, "end with the header of the assistant's turn")
	f.BoolVar(&o.ids, "ids", false, "print the token ids, not the text")
	return cmd
}

func runBaseChat(dir string, o baseChatOptions, stdin io.Reader, stdout io.Writer) error {
	if o.messages == "" {
		return usageError{fmt.Errorf("--messages: give the conversation (a JSON file, or - for standard input)")}
	}
	read := func(path string) ([]byte, error) {
		if path == "-" {
			return io.ReadAll(io.LimitReader(stdin, chat.MaxInputBytes+1))
		}
		return os.ReadFile(path)
	}
	msgs, err := read(o.messages)
	if err != nil {
		return fmt.Errorf("--messages: %w", err)
	}
	opt := chat.Options{AddGenerationPrompt: o.generation}
	if o.tools != "" {
		if opt.Tools, err = read(o.tools); err != nil {
			return fmt.Errorf("--tools: %w", err)
		}
	}
	extra := map[string]json.RawMessage{}
	if o.vars != "" {
		b, err := read(o.vars)
		if err != nil {
			return fmt.Errorf("--vars: %w", err)
		}
		if err := json.Unmarshal(b, &extra); err != nil {
			return fmt.Errorf("--vars: a JSON object: %w", err)
		}
	}
	base, err := basemodel.OpenConfig(dir)
	if err != nil {
		return err
	}
	if base.Chat == nil {
		return fmt.Errorf("%s: %v", dir, base.ChatErr)
	}
	tm, err := base.Chat.Select(o.template, opt.Tools != nil)
	if err != nil {
		return err
	}
	opt.Vars = base.Chat.Vars(extra)
	text, err := tm.Render(msgs, opt)
	if err != nil {
		return err
	}
	if !o.ids {
		_, err = io.WriteString(stdout, text)
		return err
	}
	ids, err := base.Tokenizer.Encode(text, false)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(ids)
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}
