// Package trainerv1 is the generated gRPC API of the trainer seam: what a
// gym worker asks of a training backend process (the torch backend,
// python -m gym_protocol.backend) over a Unix socket. The source is
// trainer.proto; regenerate with api/generate.sh. Tensors cross as
// safetensors files in a private exchange directory, never as proto
// floats (docs/backends.md).
package trainerv1
