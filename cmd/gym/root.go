package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/zooai/gym/internal/version"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "gym",
		Short: "Zoo Gym: decentralized GSPO post-training of language models",
		Long: `gym is the Zoo Gym command line.

Node operators use it to make a node key and run a worker (gym worker);
gym up runs hanzod and workers on this machine; anyone can pack, inspect
and verify the signed delta files that workers exchange with the
orchestrator, hanzod; submitters send jobs to hanzod and follow them
(gym job, gym node, gym ledger; --orchestrator says where hanzod is).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	var orch orchestratorFlags
	orch.register(root)
	root.AddCommand(newKeygen(), newDelta(&orch), newBench(), newDemo(), newVersion(),
		newJob(&orch), newNode(&orch), newLedger(&orch),
		newRing(), newTrain(), newArtifact(), newEval(), newRollout(), newWorker(), newUp(), newRelease(), newBase(), newChain(), newEnv(), newTask(), newModel())
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
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print the version, commit and Go version of this build",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return version.Get("gym").Write(cmd.OutOrStdout(), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: program, version, commit, date, modified, go, platform")
	return cmd
}
