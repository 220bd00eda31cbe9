package ledger_test

import (
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/ledger/ledgertest"
)

func TestTwinConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Harness {
		now := int64(1_700_000_000_000)
		delay := 14 * 24 * time.Hour
		tw := ledger.NewTwin(func() int64 { return now }, delay)
		t.Cleanup(func() {
			if err := tw.Check(); err != nil {
				t.Error(err)
			}
		})
		return ledgertest.Harness{Book: tw, Delay: delay, Advance: func(_ *testing.T, d time.Duration) { now += d.Milliseconds() }}
	})
}
