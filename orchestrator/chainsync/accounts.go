package chainsync

import (
	"context"
	"sync"
	"time"
)

// Bound finds the chain account a node bound to its key on chain (the
// chain ledger's NodeAccount: a binding both keys signed): ok is false
// when it has none, err when the chain could not be asked.
type Bound func(ctx context.Context, node string) (account string, ok bool, err error)

// Accounts maps node ids to chain accounts: the node's own binding on
// chain where it made one (Bound), else the operator's map (Static). A
// binding found on chain is reused for MaxAge (0: one minute); a node
// without one is asked again next time (it may bind meanwhile).
type Accounts struct {
	Static map[string]string
	Bound  Bound
	MaxAge time.Duration
	Now    func() time.Time

	mu   sync.Mutex
	seen map[string]boundAt
}

type boundAt struct {
	account string
	at      time.Time
}

// Lookup returns node's chain account.
func (a *Accounts) Lookup(ctx context.Context, node string) (string, bool, error) {
	if a.Bound != nil {
		now := time.Now
		if a.Now != nil {
			now = a.Now
		}
		age := a.MaxAge
		if age <= 0 {
			age = time.Minute
		}
		a.mu.Lock()
		b, ok := a.seen[node]
		a.mu.Unlock()
		if ok && now().Sub(b.at) < age {
			return b.account, true, nil
		}
		acct, ok, err := a.Bound(ctx, node)
		if err != nil {
			return "", false, err
		}
		if ok {
			a.mu.Lock()
			if a.seen == nil {
				a.seen = map[string]boundAt{}
			}
			a.seen[node] = boundAt{acct, now()}
			a.mu.Unlock()
			return acct, true, nil
		}
	}
	acct, ok := a.Static[node]
	return acct, ok, nil
}
