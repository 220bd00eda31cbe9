package ring

import (
	"bufio"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"lukechampine.com/blake3"
)

// PayloadHash is standard BLAKE3-256: the official test vectors
// (testdata/blake3.txt: input of n bytes i mod 251).
func TestPayloadHashVectors(t *testing.T) {
	f, err := os.Open("testdata/blake3.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	cases := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		n, want, _ := strings.Cut(line, " ")
		length, err := strconv.Atoi(n)
		if err != nil {
			t.Fatal(err)
		}
		in := make([]byte, length)
		for i := range in {
			in[i] = byte(i % 251)
		}
		if got := PayloadHash(in); hex.EncodeToString(got[:]) != want {
			t.Errorf("length %d: %x, want %s", length, got, want)
		}
		cases++
	}
	if cases < 20 {
		t.Fatalf("only %d vectors", cases)
	}
}

// The single-goroutine tree walk agrees with lukechampine.com/blake3's
// multi-goroutine Sum256 at every length class: partial chunks, partial
// 16-chunk groups, exact groups and uneven trees up to 3 MiB.
func TestPayloadHashMatchesBLAKE3(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 3<<20)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	lens := []int{0, 1, 64, 65, 1024, 1025, 16383, 16384, 16385, 32768, 32769, 49152, 65536, 1 << 20, 1<<20 + 4, 3 << 20}
	for range 200 {
		lens = append(lens, r.IntN(len(buf)+1))
	}
	for _, n := range lens {
		if got, want := PayloadHash(buf[:n]), blake3.Sum256(buf[:n]); got != want {
			t.Fatalf("length %d: %x, want %x", n, got, want)
		}
	}
}

func TestPayloadHashAllocates(t *testing.T) {
	buf := make([]byte, 1<<20)
	if n := testing.AllocsPerRun(10, func() { PayloadHash(buf) }); n != 0 {
		t.Fatalf("%v allocations per hash", n)
	}
	if n := testing.AllocsPerRun(10, func() { PayloadHash(buf[:5000]) }); n != 0 {
		t.Fatalf("%v allocations per short hash", n)
	}
}
