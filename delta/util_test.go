package delta

import "crypto/sha3"

func sha3Sum(b []byte) [32]byte { return sha3.Sum256(b) }
