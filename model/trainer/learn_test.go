package trainer

import (
	"context"
	"testing"

	"github.com/zooai/gym/model/basemodel"
)

// TestGSPOImprovesBase runs the first 10 steps of the default job on the
// shipped base and checks that held-out accuracy rises above the base's.
// The run is deterministic; measured figures are in the log line (LoRA on
// q_proj and v_proj alone rose only 0.304 → 0.326, which is why the profile
// adapts all seven projections); a rise below 0.05 means the learning loop
// broke.
func TestGSPOImprovesBase(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for 10 steps")
	}
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(base.Weights, base.Tokenizer, DefaultConfig(), 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	before, err := tr.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	var reward [2]float64
	for i := 0; i < 10; i++ {
		st, err := tr.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		reward[i/5] += st.RewardMean / 5
	}
	after, err := tr.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held-out %.3f -> %.3f; sample reward %.3f (steps 1-5) -> %.3f (6-10)", before.Accuracy, after.Accuracy, reward[0], reward[1])
	if before.Accuracy > 0.40 {
		t.Fatalf("base starts at %.3f, above the 0.40 the job must start from", before.Accuracy)
	}
	if after.Accuracy < before.Accuracy+0.05 {
		t.Fatalf("10 GSPO steps took held-out accuracy from %.3f to %.3f", before.Accuracy, after.Accuracy)
	}
}
