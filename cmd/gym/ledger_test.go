package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLedgerAmount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		bad  string
	}{
		{in: "10000", want: 10_000_000_000},
		{in: "0.5", want: 500_000},
		{in: "2345.000001", want: 2_345_000_001},
		{in: "007.10", want: 7_100_000},
		{in: "0.000001", want: 1},
		{in: "18446744073709.551615", want: math.MaxUint64},
		{in: "18446744073709.551616", bad: "too large"},
		{in: "99999999999999999999", bad: "too large"},
		{in: "", bad: "empty"},
		{in: "0", bad: "zero"},
		{in: "0.000000", bad: "zero"},
		{in: "-1", bad: "negative"},
		{in: "+1", bad: "only digits"},
		{in: "1e3", bad: "only digits"},
		{in: "1,000", bad: "only digits"},
		{in: "1_000", bad: "only digits"},
		{in: "10 GYM", bad: "only digits"},
		{in: "1.2.3", bad: "only digits"},
		{in: ".5", bad: "a digit is missing"},
		{in: "5.", bad: "a digit is missing"},
		{in: "0.1234567", bad: "7 decimals, at most 6"},
	} {
		got, err := parseGYM(tc.in)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) || !strings.Contains(err.Error(), "e.g. 10000 or 0.5") {
				t.Errorf("%q: %d %v, want an error about %q", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %d %v, want %d", tc.in, got, err, tc.want)
		}
	}
}

// TestLedgerOperator stakes an account through the CLI against a real
// hanzod (loopback: operator) and reads it back.
func TestLedgerOperator(t *testing.T) {
	d := startHanzod(t, "127.0.0.1:0", plaintext, "--metrics", "")
	t.Setenv("ORCHESTRATOR_URL", d.addr)
	t.Setenv("ORCHESTRATOR_ADMIN_TOKEN", "")
	node := newTestNode(7).id

	out := mustGym(t, "ledger", "deposit", node, "12345.5")
	for _, s := range []string{"deposited 12345.500000 GYM\n", "account    " + node, "free       12345.500000 GYM", "bonded     0.000000 GYM"} {
		if !strings.Contains(out, s) {
			t.Errorf("deposit lacks %q:\n%s", s, out)
		}
	}
	a := decodeJSON[accountJSON](t, mustGym(t, "ledger", "bond", "--json", node, "10000"))
	if a.Account != node || a.Free != 2_345_500_000 || a.Bonded != 10_000_000_000 || a.Slashes == nil {
		t.Fatalf("bond: %+v", a)
	}
	a = decodeJSON[accountJSON](t, mustGym(t, "ledger", "unbond", node, "0.25", "--json"))
	if a.Bonded != 9_999_750_000 || a.Unbonding != 250_000 {
		t.Fatalf("unbond: %+v", a)
	}
	if a := decodeJSON[accountJSON](t, mustGym(t, "ledger", "balance", "--json", node)); a.Free != 2_345_500_000 || a.Bonded != 9_999_750_000 || a.Unbonding != 250_000 {
		t.Fatalf("balance: %+v", a)
	}
	if text := mustGym(t, "ledger", "balance", node); !strings.Contains(text, "bonded     9999.750000 GYM") || !strings.Contains(text, "unbonding  0.250000 GYM") {
		t.Errorf("balance:\n%s", text)
	}

	// Refusals by hanzod: exit 1, what to do.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"withdraw", node}, []string{"nothing to withdraw", "14 days after 'gym ledger unbond'"}},
		{[]string{"bond", node, "5000"}, []string{"insufficient funds", "'gym ledger balance " + node + "' shows the free balance"}},
		{[]string{"unbond", "nobody", "1"}, []string{"insufficient funds", "shows the bonded stake"}},
	} {
		r := gym(t, append([]string{"ledger"}, tc.args...)...)
		if r.code != 1 || r.stdout != "" {
			t.Errorf("ledger %q: exit %d, stdout %q", tc.args, r.code, r.stdout)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("ledger %q: stderr lacks %q: %s", tc.args, w, r.stderr)
			}
		}
	}
	// Misuse: exit 2, nothing sent (nothing listens there).
	for _, args := range [][]string{
		{"deposit", node},
		{"deposit", node, "1", "2"},
		{"deposit", " ", "1"},
		{"bond", node, "1e3"},
		{"bond", node, "-5"},
		{"bond", node, "0"},
		{"unbond", node, "0.0000001"},
		{"withdraw"},
		{"withdraw", node, "5"},
	} {
		r := gym(t, append([]string{"--orchestrator", "127.0.0.1:1", "ledger"}, args...)...)
		if r.code != 2 || strings.Contains(r.stderr, "nothing listens") {
			t.Errorf("ledger %q: exit %d, want 2: %s", args, r.code, r.stderr)
		}
	}
	if a := decodeJSON[accountJSON](t, mustGym(t, "ledger", "balance", "--json", node)); a.Bonded != 9_999_750_000 {
		t.Fatalf("a refused command changed the account: %+v", a)
	}
}

// TestLedgerAdminToken: a hanzod with an admin token takes ledger
// operations only with it, from a file or the environment.
func TestLedgerAdminToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile, wrongFile := filepath.Join(dir, "token"), filepath.Join(dir, "wrong")
	os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600)
	os.WriteFile(wrongFile, []byte("guess"), 0o600)
	d := startHanzod(t, "127.0.0.1:0", plaintext, "--metrics", "", "--admin-token-file", tokenFile)
	t.Setenv("ORCHESTRATOR_URL", d.addr)
	t.Setenv("ORCHESTRATOR_ADMIN_TOKEN", "")

	if r := gym(t, "ledger", "deposit", "acct", "1"); r.code != 1 || !strings.Contains(r.stderr, "pass --admin-token-file FILE") {
		t.Errorf("without the token: %+v", r)
	}
	if r := gym(t, "ledger", "deposit", "acct", "1", "--admin-token-file", wrongFile); r.code != 1 || !strings.Contains(r.stderr, "the token is not hanzod's") {
		t.Errorf("a wrong token: %+v", r)
	}
	if r := gym(t, "ledger", "deposit", "acct", "1", "--admin-token-file", filepath.Join(dir, "absent")); r.code != 1 || !strings.Contains(r.stderr, "--admin-token-file") {
		t.Errorf("a missing token file: %+v", r)
	}
	if a := decodeJSON[accountJSON](t, mustGym(t, "ledger", "deposit", "acct", "1", "--json", "--admin-token-file", tokenFile)); a.Free != 1_000_000 {
		t.Fatalf("with the token file: %+v", a)
	}
	t.Setenv("ORCHESTRATOR_ADMIN_TOKEN", "s3cret-token")
	if a := decodeJSON[accountJSON](t, mustGym(t, "ledger", "bond", "acct", "0.5", "--json")); a.Free != 500_000 || a.Bonded != 500_000 {
		t.Fatalf("with ORCHESTRATOR_ADMIN_TOKEN: %+v", a)
	}
	// The token is not needed to read.
	t.Setenv("ORCHESTRATOR_ADMIN_TOKEN", "")
	if a := decodeJSON[accountJSON](t, mustGym(t, "ledger", "balance", "acct", "--json")); a.Bonded != 500_000 {
		t.Fatalf("gym ledger balance: %+v", a)
	}
}
