package localcluster

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
)

// SeededKeys returns Config.Key for reproducible runs: worker i's key is
// derived from seed and i, so two runs with one seed have the same node
// ids and so the same worker indices and data shards (a worker's prompts
// follow from its id). The ring's order still follows the bandwidth the
// workers measure, so two such runs agree in accuracy, not always bit for
// bit (the ring's float32 sums follow its order). For benchmarks that compare
// settings on the same data; anyone who knows the seed has the keys, so
// never for a network that stakes anything.
func SeededKeys(seed uint64) func(i int) ed25519.PrivateKey {
	return func(i int) ed25519.PrivateKey {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], seed)
		binary.BigEndian.PutUint64(b[8:], uint64(i))
		h := sha256.Sum256(append([]byte("zoo-gym localcluster seeded key v1\x00"), b[:]...))
		return ed25519.NewKeyFromSeed(h[:])
	}
}
