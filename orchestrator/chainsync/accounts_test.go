package chainsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/chainsync"
)

// A node's binding on chain takes precedence over the operator's map, is
// reused for MaxAge, and a chain error is an error (not "no account").
func TestAccounts(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	calls := 0
	var fail error
	bound := map[string]string{"n1": "0xb1"}
	a := &chainsync.Accounts{Static: map[string]string{"n1": "0xs1", "n2": "0xs2"}, MaxAge: time.Minute, Now: func() time.Time { return now },
		Bound: func(ctx context.Context, node string) (string, bool, error) {
			calls++
			if fail != nil {
				return "", false, fail
			}
			acct, ok := bound[node]
			return acct, ok, nil
		}}
	check := func(node, want string, wantOK bool) {
		t.Helper()
		acct, ok, err := a.Lookup(ctx, node)
		if err != nil || acct != want || ok != wantOK {
			t.Fatalf("%s: %q %v %v, want %q %v", node, acct, ok, err, want, wantOK)
		}
	}
	check("n1", "0xb1", true) // the binding, not the map
	check("n2", "0xs2", true) // no binding: the map
	check("n3", "", false)
	fail = errors.New("rpc down")
	check("n1", "0xb1", true) // cached
	if _, _, err := a.Lookup(ctx, "n2"); err == nil {
		t.Fatal("a chain error was taken for no binding")
	}
	now = now.Add(2 * time.Minute)
	if _, _, err := a.Lookup(ctx, "n1"); err == nil {
		t.Fatal("an expired binding was reused")
	}
	fail = nil
	bound["n1"] = "0xb2" // rebound
	check("n1", "0xb2", true)
	if calls != 6 {
		t.Errorf("%d chain lookups, want 6", calls)
	}
}
