package localcluster

import (
	"testing"

	"github.com/zooai/gym/orchestrator/server"
)

// The SubmitDelta limits of a local cluster: per address the defaults
// times the nodes (they share 127.0.0.1), per node room for a sync every
// step of the built-in model; hanzod's validation accepts them.
func TestLocalDeltaLimits(t *testing.T) {
	d := server.DefaultConfig()
	c := d
	localDeltaLimits(&c, 8)
	if c.DeltaAddrRate != 8*d.DeltaAddrRate || c.DeltaAddrBurst != 8*d.DeltaAddrBurst || c.DeltaAddrInFlight != 8*d.DeltaAddrInFlight ||
		c.DeltaInFlight < c.DeltaAddrInFlight || c.DeltaNodeRate < 10 || c.DeltaNodeBurst < 40 ||
		c.Transport.MaxConnsPerHost < 8*d.Transport.MaxConnsPerHost || c.Transport.MaxCallsPerHost < 8*d.Transport.MaxCallsPerHost {
		t.Fatalf("limits for 8 nodes: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	one := d
	localDeltaLimits(&one, 0)
	if one.DeltaAddrRate != d.DeltaAddrRate {
		t.Fatalf("no nodes: address rate %v", one.DeltaAddrRate)
	}
}

// The Register limits of a local cluster: the defaults times the nodes
// (they share 127.0.0.1).
func TestLocalRegisterLimits(t *testing.T) {
	d := server.DefaultConfig()
	c := d
	localRegisterLimits(&c, 8)
	if c.RegisterAddrRate != 8*d.RegisterAddrRate || c.RegisterAddrBurst != 8*d.RegisterAddrBurst ||
		c.RegisterNewRate != 8*d.RegisterNewRate || c.RegisterNewBurst != 8*d.RegisterNewBurst {
		t.Fatalf("limits for 8 nodes: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
