package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/zooai/gym/api/hanzod/v1"
)

func newLedger(o *orchestratorFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Read stake balances from hanzod's ledger",
	}
	var timeout time.Duration
	timeoutFlag(cmd, &timeout)
	cmd.AddCommand(newLedgerBalance(o, &timeout))
	return cmd
}

// accountJSON is 'gym ledger balance --json'; scripts rely on it. Amounts
// are integers in micro-GYM (1 GYM = 1,000,000).
type accountJSON struct {
	Account   string      `json:"account"`
	Free      uint64      `json:"free"`
	Bonded    uint64      `json:"bonded"`
	Unbonding uint64      `json:"unbonding"`
	Banned    bool        `json:"banned"`
	Slashes   []slashJSON `json:"slashes"`
}

type slashJSON struct {
	Offence  int32  `json:"offence"`
	Amount   uint64 `json:"amount"`
	At       string `json:"at"`
	Reason   string `json:"reason"`
	Evidence string `json:"evidence"` // hex
}

func newLedgerBalance(o *orchestratorFlags, timeout *time.Duration) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "balance [--json] NODE",
		Short: "Show an account's free, bonded and unbonding stake and its slashes",
		Long: `balance shows the ledger account NODE (a node's account is its id, the 64 hex
characters 'gym keygen' printed; any other account name works too). An
account the ledger has never seen has nothing in it.

With --json it prints one object: account, free, bonded, unbonding (integers
in micro-GYM, 1 GYM = 1000000), banned, slashes ([{offence, amount, at
(RFC 3339), reason, evidence (hex)}], never null).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := strings.TrimSpace(args[0])
			if id == "" {
				return usageError{fmt.Errorf("ledger balance needs an account: a node id ('gym node list' shows them)")}
			}
			a, err := call(cmd, o, *timeout, "balance of "+id, func(ctx context.Context, c *client) (*pb.Account, error) {
				return c.api.GetBalance(ctx, &pb.GetBalanceRequest{Account: id})
			})
			if err != nil {
				return err
			}
			out := accountJSON{Account: a.Id, Free: a.Free, Bonded: a.Bonded, Unbonding: a.Unbonding, Banned: a.Banned, Slashes: []slashJSON{}}
			if out.Account == "" {
				out.Account = id
			}
			for _, s := range a.Slashes {
				out.Slashes = append(out.Slashes, slashJSON{Offence: s.Offence, Amount: s.Amount, At: rfc3339ms(s.AtUnixMs), Reason: s.Reason, Evidence: hex.EncodeToString(s.Evidence)})
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			printAccount(cmd.OutOrStdout(), out)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (amounts in micro-GYM)")
	return cmd
}

// gymAmount formats micro-GYM exactly, as GYM with six decimals.
func gymAmount(micro uint64) string {
	return fmt.Sprintf("%d.%06d GYM", micro/1_000_000, micro%1_000_000)
}

func printAccount(w io.Writer, a accountJSON) {
	fmt.Fprintf(w, "account    %s\n", a.Account)
	fmt.Fprintf(w, "free       %s\n", gymAmount(a.Free))
	fmt.Fprintf(w, "bonded     %s\n", gymAmount(a.Bonded))
	fmt.Fprintf(w, "unbonding  %s\n", gymAmount(a.Unbonding))
	banned := "no"
	if a.Banned {
		banned = "yes (permanently)"
	}
	fmt.Fprintf(w, "banned     %s\n", banned)
	if len(a.Slashes) == 0 {
		fmt.Fprintf(w, "slashes    none\n")
		return
	}
	fmt.Fprintf(w, "slashes    %d\n", len(a.Slashes))
	for _, s := range a.Slashes {
		fmt.Fprintf(w, "  offence %d  %s  %s  %s\n", s.Offence, s.At, gymAmount(s.Amount), s.Reason)
	}
}
