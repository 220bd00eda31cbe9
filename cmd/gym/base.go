package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/model/basemodel"
)

func newBase() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "base",
		Short: "The built-in base model: write it out as a Hugging Face directory",
	}
	cmd.AddCommand(newBaseExport(), newBaseChat())
	return cmd
}

func newBaseExport() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "export [--force] DIR",
		Short: "Write the built-in base model to DIR as a directory transformers loads",
		Long: `base export writes the built-in base model, byte for byte as this binary
embeds it, to DIR: config.json, model.safetensors (its pre-training recipe and
the recipe's SHA3-256 in the metadata), tokenizer.json, tokenizer_config.json
and generation_config.json. It is a tiny LlamaForCausalLM; in Python:

  AutoModelForCausalLM.from_pretrained(DIR)
  AutoTokenizer.from_pretrained(DIR)

DIR is created; one that exists and holds files is refused unless --force,
which replaces the files of the same names and leaves the others. The
directory's identity (hex SHA3-256 over its files, as basemodel.DirSHA3
defines it) is printed.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			export := basemodel.Export
			if force {
				export = basemodel.ExportOverwrite
			}
			if err := export(args[0]); err != nil {
				return err
			}
			b, err := basemodel.Builtin()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, %d parameters, sha3 %s\n", args[0], b.Weights.Cfg.Arch, b.Weights.Cfg.NumParams(), b.SHA3)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "write into a non-empty DIR, replacing files of the same names")
	return cmd
}
