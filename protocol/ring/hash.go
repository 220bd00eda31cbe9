package ring

import (
	"math/bits"

	"lukechampine.com/blake3/guts"
)

// group is what one call of the SIMD compressor hashes: 16 BLAKE3 chunks
// (16 KiB) side by side with AVX-512, 2 × 8 with AVX2.
const group = guts.MaxSIMD * guts.ChunkSize

// PayloadHash is the hash a frame's signature binds its payload with:
// unkeyed BLAKE3 with a 256-bit output (the standard BLAKE3 hash, so
// evidence can be checked with any BLAKE3 implementation).
//
// It runs on the calling goroutine only: lukechampine.com/blake3's own
// Sum256 spreads inputs above 16 KiB over new goroutines (and allocates),
// which on a node that already keeps its cores busy costs more than it
// gains. This drives the same module's SIMD compressors through the BLAKE3
// tree, one 16-chunk group at a time, without allocating.
func PayloadHash(b []byte) [32]byte {
	var stack [54][8]uint32 // subtree chaining values, one per height ≥ 4 (2^64 bytes)
	var chunks uint64       // chunks hashed so far; bit i set: stack[i] holds a subtree
	key := &guts.IV
	for len(b) > group { // the last group (possibly partial) becomes the root's right edge
		cv := guts.ChainingValue(guts.CompressBuffer((*[group]byte)(b), group, key, chunks, 0))
		h := bits.TrailingZeros64(guts.MaxSIMD)
		for chunks&(1<<h) != 0 {
			cv = guts.ChainingValue(guts.ParentNode(stack[h], cv, key, 0))
			h++
		}
		stack[h] = cv
		chunks += guts.MaxSIMD
		b = b[group:]
	}
	var n guts.Node
	if len(b) == group {
		n = guts.CompressBuffer((*[group]byte)(b), group, key, chunks, 0)
	} else {
		var tail [group]byte // the compressor reads whole groups
		copy(tail[:], b)
		n = guts.CompressBuffer(&tail, len(b), key, chunks, 0)
	}
	for h := bits.TrailingZeros64(chunks); h < bits.Len64(chunks); h++ {
		if chunks&(1<<h) != 0 {
			n = guts.ParentNode(stack[h], guts.ChainingValue(n), key, 0)
		}
	}
	n.Flags |= guts.FlagRoot
	out := guts.WordsToBytes(guts.CompressNode(n))
	return [32]byte(out[:32])
}
