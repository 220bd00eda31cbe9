// Package delta reads and writes Zoo Gym delta files (format version 1), the
// signed unit of exchange between workers and the orchestrator.
//
// A delta file is a 24-byte header, a payload of tensor entries and a 96-byte
// trailer:
//
//	header   "DELTA" · version u8 · compression u8 · flags u8 · checksum[16]
//	payload  { name_len u32 · name · dtype u8 · rank u8 · shape u64×rank · data }*
//	trailer  Ed25519 signature[64] over SHA3-256(header ‖ payload) · public key[32]
//
// The checksum is the first 16 bytes of SHA3-256(payload). docs/delta-format.md
// has the byte diagram and every rule a reader enforces.
//
// # Trust
//
// Nothing read from a file is trustworthy until the checksum and the signature
// over the whole file have been checked, which can only happen after the last
// byte has been read. The API makes that explicit:
//
//   - [Read] and [Open] return tensors only after the whole file verified.
//   - [Stream] hands out each tensor as it is decoded, as an [Unverified]
//     value whose bytes are reached only through UnverifiedData; the caller
//     must discard whatever it derived from them unless Stream returns nil.
//   - [StreamData] is Stream without a tensor buffer: each tensor's decoded
//     bytes come as a reader, so memory does not grow with the tensors.
//   - [Verify] checks a file without keeping any tensor.
//
// The public key in the trailer proves only that the file is intact; whether
// that key may submit the delta is the caller's decision.
//
// # Resources
//
// Readers never allocate by what a frame claims: memory is bounded by the
// declared tensor sizes, which are checked against [Limits] before anything is
// allocated, and buffers grow only as bytes actually arrive. Verify and
// StreamData keep no tensor: their memory is a few MiB plus one Zstandard
// window, capped by Limits.MaxWindowBytes. Every malformed
// input yields an error wrapping one of the package's sentinel errors (and
// io.ErrUnexpectedEOF for truncation), never a panic.
package delta
