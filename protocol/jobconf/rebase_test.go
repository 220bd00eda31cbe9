package jobconf_test

import (
	"bytes"
	"testing"

	"github.com/zooai/gym/protocol/jobconf"
)

// A rebase state carries the whole outer optimiser, Adam's and the
// Nesterov rule's alike: the resumed one steps the bits of the original.
func TestRebaseOuterRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan jobconf.Plan
	}{
		{"nesterov", jobconf.Plan{OuterLR: 0.7, OuterMomentum: 0.9}},
		{"adam", jobconf.Plan{OuterLR: 1.5e-3, OuterAdam: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.plan.NewOuter()
			if b, err := o.MarshalRebase(); err != nil || b != nil {
				t.Fatalf("before a step: %d bytes, %v; want nothing", len(b), err)
			}
			for s := range uint64(3) {
				if _, err := o.Step(randomFlat(t, 10+s)); err != nil {
					t.Fatal(err)
				}
			}
			b, err := o.MarshalRebase()
			if err != nil || b == nil {
				t.Fatalf("MarshalRebase: %d bytes, %v", len(b), err)
			}
			r, err := tc.plan.ResumeRebase(b, len(o.Buffer()))
			if err != nil {
				t.Fatal(err)
			}
			d := randomFlat(t, 99)
			u1, err := o.Step(d)
			if err != nil {
				t.Fatal(err)
			}
			u2, err := r.Step(d)
			if err != nil {
				t.Fatal(err)
			}
			for i := range u1 {
				if u1[i] != u2[i] {
					t.Fatalf("value %d: %v after the resume, %v without", i, u2[i], u1[i])
				}
			}
			if _, err := tc.plan.ResumeRebase(b, len(o.Buffer())+1); err == nil {
				t.Fatal("a state of the wrong size was taken")
			}
			if _, err := (jobconf.Plan{}).ResumeRebase(b, len(o.Buffer())); err == nil {
				t.Fatal("a state was taken for a plan without an outer optimiser")
			}
			bad := bytes.Clone(b)
			copy(bad[len(bad)-4:], []byte{0, 0, 0xc0, 0x7f}) // a NaN in the last value
			if _, err := tc.plan.ResumeRebase(bad, len(o.Buffer())); err == nil {
				t.Fatal("a state holding NaN was taken")
			}
		})
	}
}
