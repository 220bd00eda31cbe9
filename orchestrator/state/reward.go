package state

import (
	"fmt"
	"math/bits"

	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/protocol/jobspec"
)

// The economics of a job (docs/threat-model.md, "Economics"): an epoch
// earns Config.RewardPerSample for every verified sample, at most
// Config.EpochReward; a signed submitter funds its job by escrow, the
// treasury funds the operator's; an epoch trains at least
// Config.MinEpochSamples per worker.

// checkEpochSize refuses a job whose workers' epochs train fewer samples
// than the minimum: each epoch costs hanzod a merge, an evaluation and a
// publication whatever it holds.
func (m *Machine) checkEpochSize(spec jobspec.Spec) error {
	got, least := spec.EpochSamples(), m.cfg.MinEpochSamples
	if got >= least {
		return nil
	}
	steps := spec.StepsPerEpoch
	if steps == 0 {
		steps = spec.GSPO.AggregateInterval
	}
	prompts := uint64(spec.PromptsPerStep)
	if prompts == 0 {
		prompts = uint64(jobspec.Fields.PromptsPerStep.Default)
	}
	perStep := prompts * uint64(spec.GSPO.GroupSize)
	need := (least + perStep - 1) / perStep // steps that reach the minimum
	need = (need + uint64(spec.GSPO.AggregateInterval) - 1) / uint64(spec.GSPO.AggregateInterval) * uint64(spec.GSPO.AggregateInterval)
	return fmt.Errorf("%w: an epoch of %d samples per worker (steps_per_epoch %d × prompts_per_step %d × gspo.group_size %d); "+
		"this hanzod's minimum is %d: raise steps_per_epoch to %d or more, or train more prompts per step",
		ErrInvalid, got, steps, prompts, spec.GSPO.GroupSize, least, need)
}

// JobEscrow is what a signed submitter sets aside to fund spec's rewards:
// the most the job can earn, epochs × the most one epoch can pay when
// max_nodes workers each train a full epoch of verified samples.
func (m *Machine) JobEscrow(spec jobspec.Spec) (ledger.Amount, error) {
	hi, samples := bits.Mul64(spec.EpochSamples(), uint64(spec.MaxNodes))
	if hi != 0 {
		samples = ^uint64(0)
	}
	perEpoch := ledger.EpochPayout(m.cfg.RewardPerSample, m.cfg.EpochReward, samples)
	hi, total := bits.Mul64(uint64(perEpoch), uint64(spec.Epochs))
	if hi != 0 {
		return 0, fmt.Errorf("%w: the job's escrow of %d epochs × %d µGYM overflows", ErrInvalid, spec.Epochs, perEpoch)
	}
	return ledger.Amount(total), nil
}

// checkEscrow returns what a signed submission of spec by account
// escrows, or why account cannot fund it.
func (m *Machine) checkEscrow(account string, spec jobspec.Spec) (ledger.Amount, error) {
	amt, err := m.JobEscrow(spec)
	if err != nil || amt == 0 {
		return 0, err
	}
	if err := m.ledger.CheckEscrow(account, amt); err != nil {
		return 0, fmt.Errorf("%w: the job can pay up to %d µGYM in rewards (epochs %d × at most %d µGYM an epoch), which its submitter %s escrows "+
			"from its free balance of %d µGYM; deposit more, or ask for fewer epochs or workers: %w",
			ErrPrecondition, amt, spec.Epochs, amt/ledger.Amount(spec.Epochs), account, m.ledger.Account(account).Free, err)
	}
	return amt, nil
}

// epochPayout is what the epoch c pays and the verified samples it counts:
// the contributions' compute (accepted samples) at the per-sample rate,
// at most EpochReward and c.Total when set, and at most what is left of
// the job's escrow when a submitter funds it.
func (m *Machine) epochPayout(j *Job, c PayRewards) (ledger.Amount, uint64) {
	var samples uint64
	for _, ct := range c.Contributions {
		s, carry := bits.Add64(samples, ct.Compute, 0)
		if carry != 0 {
			s = ^uint64(0)
		}
		samples = s
	}
	most := m.cfg.EpochReward
	if c.Total != 0 {
		most = min(most, c.Total)
	}
	total := ledger.EpochPayout(m.cfg.RewardPerSample, most, samples)
	if j.Funder != "" {
		total = min(total, j.Escrow)
	}
	return total, samples
}
