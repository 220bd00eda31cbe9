package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/orchestrator/ledger"
)

func newLedger(o *orchestratorFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Read stake balances from hanzod's ledger; operators deposit, bond, unbond and withdraw",
		Long: `ledger reads and (for hanzod's operator) changes the stake ledger. Amounts
are GYM: a whole number or up to six decimals (10000, 0.5, 2345.000001).

A node becomes eligible for jobs with 10,000 GYM bonded: deposit it into the
node's account (its id, from 'gym keygen' or 'gym node list'), then bond it.
Bonded stake can be slashed; 'unbond' starts releasing it (14 days, and not
while a job the node took part in is unsettled), 'withdraw' moves what has
been released back to the free balance.

deposit, bond, unbond and withdraw are operator-only: hanzod accepts them from
loopback, or, when it was started with --admin-token-file, from callers that
present that token (--admin-token-file FILE here, or ORCHESTRATOR_ADMIN_TOKEN
holding the token itself).`,
	}
	var timeout time.Duration
	timeoutFlag(cmd, &timeout)
	cmd.AddCommand(newLedgerBalance(o, &timeout))
	for _, op := range ledgerOps {
		cmd.AddCommand(newLedgerOp(o, &timeout, op))
	}
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
	var asJSON, onChain bool
	var cf chainFlags
	cmd := &cobra.Command{
		Use:   "balance [--json] NODE",
		Short: "Show an account's free, bonded and unbonding stake and its slashes",
		Long: `balance shows the ledger account NODE (a node's account is its id, the 64 hex
characters 'gym keygen' printed; any other account name works too). An
account the ledger has never seen has nothing in it.

With --json it prints one object: account, free, bonded, unbonding (integers
in micro-GYM, 1 GYM = 1000000), banned, slashes ([{offence, amount, at
(RFC 3339), reason, evidence (hex)}], never null).

When hanzod runs with --ledger evm, stake, rewards and slashes are on the
chain: --chain reads them there (with --rpc, --chain-id and --contracts, or
HANZO_RPC and HANZO_CHAIN_ID; the same as 'gym chain balance'): NODE's
account is the one it bound on chain ('gym chain bind'), or give the
0x-address; --json then prints the chain's position.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := strings.TrimSpace(args[0])
			if id == "" {
				return usageError{fmt.Errorf("ledger balance needs an account: a node id ('gym node list' shows them)")}
			}
			if onChain {
				cf.timeout = *timeout
				return chainBalance(cmd, &cf, id, asJSON)
			}
			a, err := call(cmd, o, *timeout, "balance of "+id, func(ctx context.Context, c *client) (*pb.Account, error) {
				return c.api.GetBalance(ctx, &pb.GetBalanceRequest{Account: id})
			})
			if err != nil {
				return err
			}
			out := accountOut(id, a)
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			printAccount(cmd.OutOrStdout(), out)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (amounts in micro-GYM)")
	cmd.Flags().BoolVar(&onChain, "chain", false, "read the account on chain (hanzod --ledger evm) instead of hanzod's ledger")
	cmd.Flags().StringVar(&cf.rpc, "rpc", os.Getenv("HANZO_RPC"), "chain RPC URL, with --chain [HANZO_RPC]")
	id := uint64(chain.HanzoChainID)
	if v, err := strconv.ParseUint(os.Getenv("HANZO_CHAIN_ID"), 10, 64); err == nil {
		id = v
	}
	cmd.Flags().Uint64Var(&cf.chainID, "chain-id", id, "chain id, with --chain [HANZO_CHAIN_ID]")
	cmd.Flags().StringVar(&cf.contracts, "contracts", "contracts.json", "addresses file, with --chain (gym chain deploy --out)")
	return cmd
}

func accountOut(id string, a *pb.Account) accountJSON {
	out := accountJSON{Account: a.Id, Free: a.Free, Bonded: a.Bonded, Unbonding: a.Unbonding, Banned: a.Banned, Slashes: []slashJSON{}}
	if out.Account == "" {
		out.Account = id
	}
	for _, s := range a.Slashes {
		out.Slashes = append(out.Slashes, slashJSON{Offence: s.Offence, Amount: s.Amount, At: rfc3339ms(s.AtUnixMs), Reason: s.Reason, Evidence: hex.EncodeToString(s.Evidence)})
	}
	return out
}

// ledgerOp is one of the operator's ledger commands.
type ledgerOp struct {
	name, short, long string
	amount            bool   // takes AMOUNT
	done              string // past tense, for the report
	rpc               func(pb.OrchestratorServiceClient, context.Context, *pb.LedgerRequest, ...grpc.CallOption) (*pb.Account, error)
}

var ledgerOps = []ledgerOp{
	{name: "deposit", amount: true, done: "deposited",
		short: "Credit AMOUNT GYM to an account's free balance (operator)",
		long:  `deposit mints AMOUNT GYM into ACCOUNT's free balance ("treasury" funds the rewards).`,
		rpc:   pb.OrchestratorServiceClient.Deposit},
	{name: "bond", amount: true, done: "bonded",
		short: "Move AMOUNT GYM of an account's free balance to its bonded stake (operator)",
		long: `bond moves AMOUNT GYM from ACCOUNT's free balance to its bonded stake. A
node is eligible for jobs with 10,000 GYM bonded.`,
		rpc: pb.OrchestratorServiceClient.Bond},
	{name: "unbond", amount: true, done: "started unbonding",
		short: "Start releasing AMOUNT GYM of an account's bonded stake (operator)",
		long: `unbond starts releasing AMOUNT GYM of ACCOUNT's bonded stake: it stays slashable
while it waits (14 days), then 'withdraw' frees it. hanzod refuses while a job
the node took part in is not settled.`,
		rpc: pb.OrchestratorServiceClient.Unbond},
	{name: "withdraw", done: "withdrew the released stake of",
		short: "Move an account's released (unbonded) stake to its free balance (operator)",
		long:  `withdraw moves every unbonding entry of ACCOUNT whose wait is over to its free balance.`,
		rpc:   pb.OrchestratorServiceClient.Withdraw},
}

func newLedgerOp(o *orchestratorFlags, timeout *time.Duration, op ledgerOp) *cobra.Command {
	var asJSON bool
	var tokenFile, requestID string
	use, nargs := op.name+" [--json] ACCOUNT", 1
	if op.amount {
		use, nargs = op.name+" [--json] ACCOUNT AMOUNT", 2
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: op.short,
		Long: op.long + `

ACCOUNT is a ledger account: a node's id (64 hex characters) or any other name.
` + amountHelp(op.amount) + `It prints the account afterwards, as 'gym ledger balance' does (--json: the
same object).

Operator only: run it on hanzod's machine (loopback), or pass the token hanzod
reads from its --admin-token-file with --admin-token-file FILE (or put the
token itself in ORCHESTRATOR_ADMIN_TOKEN).`,
		Args: exactArgs(nargs),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := strings.TrimSpace(args[0])
			if id == "" {
				return usageError{fmt.Errorf("ledger %s needs an account: a node id ('gym node list' shows them)", op.name)}
			}
			if requestID == "" {
				var b [16]byte
				if _, err := rand.Read(b[:]); err != nil {
					return err
				}
				requestID = hex.EncodeToString(b[:])
			}
			req := &pb.LedgerRequest{Account: id, RequestId: requestID}
			if op.amount {
				amt, err := parseGYM(args[1])
				if err != nil {
					return usageError{fmt.Errorf("ledger %s: %w", op.name, err)}
				}
				req.Amount = amt
			}
			token, err := adminToken(tokenFile)
			if err != nil {
				return err
			}
			what := op.name + " " + id
			a, err := call(cmd, o, *timeout, what, func(ctx context.Context, c *client) (*pb.Account, error) {
				if token != "" {
					if host, _, _ := net.SplitHostPort(c.target.hostport); !c.target.tls && !isLoopbackHost(host) {
						fmt.Fprintf(cmd.ErrOrStderr(), "warning: sending the admin token to %s without TLS\n", c.target.hostport)
					}
					ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
				}
				return op.rpc(c.api, ctx, req)
			})
			if err != nil {
				return explainLedger(err, op, req, token != "")
			}
			out := accountOut(id, a)
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			w := cmd.OutOrStdout()
			if op.amount {
				fmt.Fprintf(w, "%s %s\n", op.done, gymAmount(req.Amount))
			} else {
				fmt.Fprintf(w, "%s %s\n", op.done, id)
			}
			printAccount(w, out)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the account afterwards as one JSON object (amounts in micro-GYM)")
	cmd.Flags().StringVar(&tokenFile, "admin-token-file", "", "file holding hanzod's admin token (the one its --admin-token-file names); default: ORCHESTRATOR_ADMIN_TOKEN, else none (loopback)")
	cmd.Flags().StringVar(&requestID, "request-id", "", "idempotency key (≤ 128 printable ASCII bytes): hanzod carries out an operation with a given id once, so rerunning an operation that timed out with the same id never credits twice; default: a random id")
	return cmd
}

func amountHelp(takes bool) string {
	if !takes {
		return ""
	}
	return `AMOUNT is in GYM: a whole number or up to six decimals (10000, 0.5,
2345.000001); no sign, exponent, separators or unit.
`
}

// adminToken reads the token from FILE, else ORCHESTRATOR_ADMIN_TOKEN.
func adminToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv("ORCHESTRATOR_ADMIN_TOKEN")), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("--admin-token-file %s is empty; it holds the token hanzod reads from its own --admin-token-file", file)
	}
	return t, nil
}

// explainLedger adds what to do to a refused ledger operation.
func explainLedger(err error, op ledgerOp, req *pb.LedgerRequest, sentToken bool) error {
	ce, ok := err.(*callError)
	if !ok {
		return err
	}
	switch ce.code {
	case codes.Unauthenticated:
		if sentToken {
			return fmt.Errorf("%s (the token is not hanzod's: compare with the file hanzod's --admin-token-file names)", ce.msg)
		}
		return fmt.Errorf("%s (hanzod has an admin token: pass --admin-token-file FILE with it, or set ORCHESTRATOR_ADMIN_TOKEN)", ce.msg)
	case codes.PermissionDenied:
		return fmt.Errorf("%s (run the command on hanzod's machine against localhost, or start hanzod with --admin-token-file and pass the token with --admin-token-file)", ce.msg)
	case codes.FailedPrecondition:
		switch {
		case strings.Contains(ce.msg, "insufficient") && op.name == "bond":
			return fmt.Errorf("%s ('gym ledger balance %s' shows the free balance; deposit first)", ce.msg, req.Account)
		case strings.Contains(ce.msg, "insufficient") && op.name == "unbond":
			return fmt.Errorf("%s ('gym ledger balance %s' shows the bonded stake)", ce.msg, req.Account)
		case strings.Contains(ce.msg, "nothing to withdraw"):
			return fmt.Errorf("%s (unbonded stake is released 14 days after 'gym ledger unbond'; 'gym ledger balance %s' shows what is unbonding)", ce.msg, req.Account)
		}
	}
	return err
}

// parseGYM reads an amount of GYM, a whole number or up to six decimals,
// as micro-GYM (ledger.ParseGYM), and refuses zero.
func parseGYM(s string) (uint64, error) {
	v, err := ledger.ParseGYM(s)
	if err == nil && v == 0 {
		err = fmt.Errorf("%w %q: zero", ledger.ErrAmount, s)
	}
	if err != nil {
		return 0, fmt.Errorf("AMOUNT: %w; give GYM as a whole number or with up to 6 decimals, e.g. 10000 or 0.5", err)
	}
	return uint64(v), nil
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
