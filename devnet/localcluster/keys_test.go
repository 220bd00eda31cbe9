package localcluster

import "testing"

// Seeded keys are a function of the seed and the worker: the same twice,
// different across workers and seeds.
func TestSeededKeys(t *testing.T) {
	a, b := SeededKeys(7), SeededKeys(8)
	seen := map[string]bool{}
	for i := range 4 {
		if !a(i).Equal(SeededKeys(7)(i)) {
			t.Fatalf("worker %d: two keys from one seed", i)
		}
		for _, k := range []string{string(a(i)), string(b(i))} {
			if seen[k] {
				t.Fatalf("worker %d: a key repeats across workers or seeds", i)
			}
			seen[k] = true
		}
	}
}
