package transfer

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
)

// BenchmarkFetch moves a 64 MiB artifact over loopback HTTP from 1 or 3
// servers into memory: authorization signing and checking, block
// verification and scheduling included, the destination disk excluded.
func BenchmarkFetch(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), randBytes(11, 64<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	var nodes []*node
	for i := range 3 {
		nodes = append(nodes, newBenchNode(b, byte(i+1)))
	}
	rec, err := nodes[0].store.Publish(context.Background(), dir, storeMeta(), publisherKey, now)
	if err != nil {
		b.Fatal(err)
	}
	root := mustCID(b, rec.Root)
	for _, n := range nodes[1:] {
		if _, _, err := GetArtifact(context.Background(), root, Get{Client: client(fetcherKey), Peers: []Peer{nodes[0].peer}, Store: n.store, Now: clock}); err != nil {
			b.Fatal(err)
		}
	}
	hc := &http.Client{Transport: NewTransport()}
	for _, k := range []int{1, 3} {
		for _, workers := range []int{0, 4, 8, 32} {
			b.Run(fmt.Sprintf("sources=%d/workers=%s", k, inFlight(workers)), func(b *testing.B) {
				c := &Client{Key: fetcherKey, Now: clock, HTTP: hc}
				var srcs []Source
				for _, n := range nodes[:k] {
					srcs = append(srcs, c.Source(n.peer))
				}
				b.SetBytes(64 << 20)
				for b.Loop() {
					if _, err := Fetch(context.Background(), root, artifact.NewMemBlocks(), FetchConfig{Sources: srcs, Workers: workers}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	// Each source's uplink limited to 20 MB/s (a pacing wrapper shared by
	// all its connections): where one peer's bandwidth, not the CPU, is the
	// limit, sources add up.
	var paced []*node
	for i := range 3 {
		n := newNode(b, b.TempDir(), key(byte(20+i)), 0, pace(20e6))
		if _, _, err := GetArtifact(context.Background(), root, Get{Client: client(fetcherKey), Peers: []Peer{nodes[0].peer}, Store: n.store, Now: clock}); err != nil {
			b.Fatal(err)
		}
		paced = append(paced, n)
	}
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("sources=%d/workers=auto/uplink=20MBps", k), func(b *testing.B) {
			c := &Client{Key: fetcherKey, Now: clock, HTTP: hc}
			var srcs []Source
			for _, n := range paced[:k] {
				srcs = append(srcs, c.Source(n.peer))
			}
			b.SetBytes(64 << 20)
			for b.Loop() {
				if _, err := Fetch(context.Background(), root, artifact.NewMemBlocks(), FetchConfig{Sources: srcs}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Into a disk store, from 1 and 3 sources.
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("sources=%d/workers=auto/disk", k), func(b *testing.B) {
			c := &Client{Key: fetcherKey, Now: clock, HTTP: hc}
			var srcs []Source
			for _, n := range nodes[:k] {
				srcs = append(srcs, c.Source(n.peer))
			}
			b.SetBytes(64 << 20)
			for b.Loop() {
				st, err := store.Open(store.DefaultConfig(b.TempDir()))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Fetch(context.Background(), root, st, FetchConfig{Sources: srcs}); err != nil {
					b.Fatal(err)
				}
				st.Close()
			}
		})
	}
}

func newBenchNode(b *testing.B, seed byte) *node {
	return newNode(b, b.TempDir(), key(seed), 0, nil)
}

func storeMeta() store.Meta { return store.Meta{Kind: artifact.KindCheckpoint, Name: "bench"} }

func mustCID(b *testing.B, s string) cid.Cid {
	c, err := cid.Decode(s)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// pace limits the bytes a handler sends, across all its connections, to
// rate bytes a second.
func pace(rate float64) func(http.Handler) http.Handler {
	var mu sync.Mutex
	next := time.Now()
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(&pacedWriter{ResponseWriter: w, reserve: func(n int) time.Time {
				mu.Lock()
				defer mu.Unlock()
				if now := time.Now(); next.Before(now) {
					next = now
				}
				next = next.Add(time.Duration(float64(n) / rate * float64(time.Second)))
				return next
			}}, r)
		})
	}
}

type pacedWriter struct {
	http.ResponseWriter
	reserve func(int) time.Time
}

func (p *pacedWriter) Write(b []byte) (int, error) {
	time.Sleep(time.Until(p.reserve(len(b))))
	return p.ResponseWriter.Write(b)
}

func inFlight(workers int) string {
	if workers == 0 {
		return "auto"
	}
	return fmt.Sprint(workers)
}
