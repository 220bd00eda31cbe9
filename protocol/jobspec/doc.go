// Package jobspec is the one home of a training job's description, shared by
// hanzod, the workers and the command line:
//
//   - Spec and GSPO, the job as hanzod records it (the JSON encoding is its
//     event log's and snapshots'), with Spec.Normalise, hanzod's validation;
//   - Fields, the one table of every setting's range, default and hint,
//     which Normalise, the job-file parser and docs/job-file.md follow;
//   - ParseFile and ReadFile, the strict YAML job-file parser (File);
//   - FromProto and ToProto, the one mapping to and from the API
//     (api/hanzod/v1);
//   - Slot, the typed place of a delta in a job (epoch, step, node).
//
// Defaults. DefaultGSPO is the seed's GSPOConfig defaults, meant for a real
// language model (LoRA rank 16, learning rate 2e-5, 8192 tokens): what a
// job gets when it gives no GSPO settings. The embedded toy model trains
// with a profile of its own (LoRA rank 8, learning rate 2e-3, 12 tokens):
// trainer.DefaultConfig is its one source, and jobconf.BuiltinGSPO writes it
// as a job's GSPO settings for gym up and examples/builtin-job.yaml (in
// the data-parallel profile, jobconf.BuiltinDataParallelGSPO). The two
// are different on purpose; neither is derived from the other.
//
// The package is a leaf: it builds on nothing of the worker, the
// orchestrator or the commands (layering_test.go).
package jobspec
