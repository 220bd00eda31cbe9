package localchain

import (
	"errors"
	"testing"
)

// nonceRace tells geth's answers to a send that took a held nonce (sent
// again) from every other failure (reported).
func TestNonceRace(t *testing.T) {
	for _, c := range []struct {
		err  string
		race bool
	}{
		{"replacement transaction underpriced", true},
		{"nonce too low: next nonce 7, tx nonce 6", true},
		{"already known", true},
		{"insufficient funds for gas * price + value", false},
		{"unknown account", false},
		{"dial tcp 127.0.0.1:8545: connect: connection refused", false},
	} {
		if got := nonceRace(errors.New(c.err)); got != c.race {
			t.Errorf("%q: nonce race %v, want %v", c.err, got, c.race)
		}
	}
}
