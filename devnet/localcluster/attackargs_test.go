package localcluster

import (
	"slices"
	"testing"

	"github.com/zooai/gym/node/worker"
)

// The strengths set travel to gym worker processes as the flags it reads,
// in a form that parses back to the same values; none set, none passed.
func TestAttackParamArgs(t *testing.T) {
	if a := attackParamArgs(worker.AttackParams{}); len(a) != 0 {
		t.Errorf("defaults: %q, want no flags", a)
	}
	z := 0.0
	got := attackParamArgs(worker.AttackParams{ALIEZ: &z, IPMEpsilon: 0.1, MimicNoise: 1.0 / 3})
	want := []string{"--attack-z", "0", "--attack-eps", "0.1", "--attack-noise", "0.3333333333333333"}
	if !slices.Equal(got, want) {
		t.Errorf("args %q, want %q", got, want)
	}
}
