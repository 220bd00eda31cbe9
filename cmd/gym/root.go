package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "gym",
		Short: "Zoo Gym: decentralized GSPO post-training of language models",
		Long: `gym is the Zoo Gym command line.

Node operators use it to make a node key and (soon) run a worker; anyone can
pack, inspect and verify the signed delta files that workers exchange with
the orchestrator, hanzod; submitters send jobs to hanzod and follow them
(gym job, gym node, gym ledger; --orchestrator says where hanzod is).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	var orch orchestratorFlags
	orch.register(root)
	root.AddCommand(newKeygen(), newDelta(), newBench(), newDemo(), newVersion(),
		newJob(&orch), newNode(&orch), newLedger(&orch),
		newRing(), newTrain(), newArtifact(), newEval(), newWorker(), newUp(), newBase())
	return root
}

// exactArgs is cobra.ExactArgs with a usage error (exit status 2).
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d (usage: %s)", cmd.CommandPath(), n, len(args), cmd.UseLine())}
		}
		return nil
	}
}

func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError{fmt.Errorf("%s needs at least %d argument(s) (usage: %s)", cmd.CommandPath(), n, cmd.UseLine())}
		}
		return nil
	}
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := "(devel)"
			if bi, ok := debug.ReadBuildInfo(); ok {
				v = bi.Main.Version
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						v += " " + s.Value
					}
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "gym", v)
			return nil
		},
	}
}
