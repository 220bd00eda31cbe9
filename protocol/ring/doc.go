// Package ring is Zoo Gym's authenticated, fault-tolerant ring all-reduce.
//
// A Comm is built from this node's Ed25519 key, a ring Config (the ordered
// members, the job and the epoch) and a Transport. AllReduce sums (or
// averages) a float32 vector across the ring with the bandwidth-optimal
// algorithm: N−1 scatter-reduce rounds then N−1 all-gather rounds, each node
// sending and receiving 2(N−1)/N of the vector. Chunks are cut into
// segments that flow through the ring as soon as they are ready, so
// receiving, verifying, reducing and sending overlap.
//
// Every segment travels in a frame signed by its sender over a
// domain-separated binding (protocol tag and version, job, configuration id,
// epoch, step, call sequence, phase, round, chunk, segment, sender,
// receiver, offsets and the BLAKE3-256 hash of the payload). A receiver verifies
// before it adds; anything else is dropped and reported as Evidence.
// A silent or disconnected neighbour ends the call with a *PeerError naming
// the suspect; the caller's buffer is only written when the call succeeds,
// so a caller can install a new Config (Reconfigure) and retry.
//
// A Config with Groups runs the two-level all-reduce instead (twolevel.go):
// a reduce-scatter inside every group of nearby members, an all-reduce of
// each shard across the groups, an all-gather inside every group, each on a
// sub-ring with its own configuration id, with the same signatures, checks,
// evidence and transport; ReferenceGroups is its result bit for bit.
//
// Transports live in subpackages: protocol/ring/memnet (in memory, with fault
// injection, for tests) and protocol/ring/tcp (TCP with mutual TLS 1.3 bound to the
// node keys, several streams per link). The design, the frame layout and
// measured figures are in docs/ring.md.
package ring
