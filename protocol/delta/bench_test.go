package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"testing"
)

func benchTensors(total, n int) []Tensor {
	rng := rand.New(rand.NewPCG(42, 7))
	per := total / n
	out := make([]Tensor, n)
	for i := range out {
		data := make([]byte, per)
		for j := 0; j < per; j += 2 {
			binary.LittleEndian.PutUint16(data[j:], uint16(math.Float32bits(float32(rng.NormFloat64()*1e-3))>>16))
		}
		out[i] = Tensor{Name: string(rune('a'+i%26)) + string(rune('a'+i/26)), DType: BF16, Shape: []uint64{uint64(per / 2)}, Data: data}
	}
	return out
}

func benchWrite(b *testing.B, c Compression) {
	ts := benchTensors(64<<20, 16)
	b.SetBytes(64 << 20)
	for b.Loop() {
		if _, err := Write(context.Background(), io.Discard, testKey(1), ts, WriteOptions{Compression: c}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRead(b *testing.B, c Compression, keep bool) {
	ts := benchTensors(64<<20, 16)
	var buf bytes.Buffer
	Write(context.Background(), &buf, testKey(1), ts, WriteOptions{Compression: c})
	file := buf.Bytes()
	b.SetBytes(64 << 20)
	for b.Loop() {
		var err error
		if keep {
			_, err = Read(context.Background(), bytes.NewReader(file), Limits{})
		} else {
			_, err = Verify(context.Background(), bytes.NewReader(file), Limits{})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteNone(b *testing.B)  { benchWrite(b, None) }
func BenchmarkWriteLZ4(b *testing.B)   { benchWrite(b, LZ4) }
func BenchmarkWriteZstd(b *testing.B)  { benchWrite(b, Zstd) }
func BenchmarkReadNone(b *testing.B)   { benchRead(b, None, true) }
func BenchmarkReadLZ4(b *testing.B)    { benchRead(b, LZ4, true) }
func BenchmarkReadZstd(b *testing.B)   { benchRead(b, Zstd, true) }
func BenchmarkVerifyNone(b *testing.B) { benchRead(b, None, false) }
func BenchmarkVerifyLZ4(b *testing.B)  { benchRead(b, LZ4, false) }
func BenchmarkVerifyZstd(b *testing.B) { benchRead(b, Zstd, false) }

func benchStream(b *testing.B, c Compression) {
	ts := benchTensors(64<<20, 16)
	var buf bytes.Buffer
	Write(context.Background(), &buf, testKey(1), ts, WriteOptions{Compression: c})
	file := buf.Bytes()
	b.SetBytes(64 << 20)
	for b.Loop() {
		if _, err := Stream(context.Background(), bytes.NewReader(file), Limits{}, func(*Unverified) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStreamNone(b *testing.B) { benchStream(b, None) }
func BenchmarkStreamLZ4(b *testing.B)  { benchStream(b, LZ4) }
func BenchmarkStreamZstd(b *testing.B) { benchStream(b, Zstd) }
