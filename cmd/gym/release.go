package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/keys/release"
)

func newRelease() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Sign and verify a release's SHA256SUMS (scripts/release.sh)",
		Long: `release signs the SHA256SUMS of a release directory with a release key (a
node key made by 'gym keygen') and verifies a release against the release
key's public half: the signature, then every file's SHA-256. See
docs/deploy.md.`,
	}
	var keyPath string
	sign := &cobra.Command{
		Use:   "sign --key KEY DIR",
		Short: "Write DIR/SHA256SUMS.sig, signing DIR/SHA256SUMS",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := nodekey.Load(keyPath)
			if err != nil {
				return err
			}
			sums, err := os.ReadFile(filepath.Join(args[0], release.SumsFile))
			if err != nil {
				return err
			}
			sig, err := release.Sign(key, sums)
			if err != nil {
				return err
			}
			if err := atomicfile.WriteBytes(filepath.Join(args[0], release.SigFile), 0o644, true, sig); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signed %s with release key %s\n", filepath.Join(args[0], release.SumsFile), nodekey.PublicHex(key))
			return nil
		},
	}
	sign.Flags().StringVar(&keyPath, "key", "", "release key (gym keygen format)")
	sign.MarkFlagRequired("key")
	var pubHex string
	verify := &cobra.Command{
		Use:   "verify --pub KEYHEX DIR",
		Short: "Check DIR/SHA256SUMS.sig under the release key, then every file's checksum",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := nodekey.ParsePublicHex(pubHex)
			if err != nil {
				return usageError{fmt.Errorf("--pub: %w", err)}
			}
			list, err := release.Verify(args[0], pub)
			if err != nil {
				return err
			}
			for _, s := range list {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: OK\n", s.Name)
			}
			return nil
		},
	}
	verify.Flags().StringVar(&pubHex, "pub", "", "the release key's public half, 64 hex characters (gym keygen prints it)")
	verify.MarkFlagRequired("pub")
	cmd.AddCommand(sign, verify)
	return cmd
}
