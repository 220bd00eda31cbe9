package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/keys/nodekey"
)

func newKeygen() *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Make a node key (Ed25519, PKCS#8 PEM, mode 0600) and print its public key as hex",
		Long: `keygen makes a new Ed25519 node key and writes it to FILE as PKCS#8 PEM
with mode 0600, then prints the public key as 64 hex characters.

The node key signs everything a node sends: deltas, ring chunks, heartbeats.
A key made with 'openssl genpkey -algorithm ed25519 -out FILE' works too.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError{fmt.Errorf("keygen needs --out FILE")}
			}
			key, err := nodekey.Generate(nil)
			if err != nil {
				return err
			}
			if err := nodekey.Save(out, key, force); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), nodekey.PublicHex(key))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "where to write the private key (required)")
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}
