package delta

import (
	"crypto/sha3"
	"runtime"
)

func sha3Sum(b []byte) [32]byte { return sha3.Sum256(b) }

type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.total = s.TotalAlloc
}
