// Package blobtest is the suite every blob.Store passes: the in-memory
// twin, the directory and Valkey.
package blobtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/zooai/gym/orchestrator/blob"
)

// Env is a fresh, empty store; Other, when set, opens a second handle on
// the same data (another replica, or the store reopened after a restart).
type Env struct {
	Store blob.Store
	Other func(t *testing.T) blob.Store
}

// Run runs the suite; newEnv returns a fresh, empty store each call.
func Run(t *testing.T, newEnv func(t *testing.T) *Env) {
	tests := []struct {
		name string
		fn   func(*testing.T, *Env)
	}{
		{"PutGet", testPutGet},
		{"Immutable", testImmutable},
		{"Names", testNames},
		{"Concurrent", testConcurrent},
		{"OtherReplica", testOther},
		{"DeleteDir", testDeleteDir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newEnv(t)) })
	}
}

func testPutGet(t *testing.T, e *Env) {
	ctx := context.Background()
	if _, err := e.Store.Get(ctx, "deltas/j1/abc.delta"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get of a missing name: %v, want ErrNotFound", err)
	}
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, 1<<18) // 1 MiB with zero bytes
	for name, data := range map[string][]byte{"deltas/j1/abc.delta": []byte("delta bytes"), "checkpoints/bafy/adapter_model.safetensors": big, "empty": {}} {
		if err := e.Store.Put(ctx, name, data); err != nil {
			t.Fatalf("Put %s: %v", name, err)
		}
		got, err := e.Store.Get(ctx, name)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get %s: %d bytes, %v; want %d bytes", name, len(got), err, len(data))
		}
		got = append(got[:0:0], got...)
		if len(got) > 0 {
			// The caller owns what Get returned.
			g2, _ := e.Store.Get(ctx, name)
			g2[0] ^= 1
			if g3, _ := e.Store.Get(ctx, name); !bytes.Equal(g3, data) {
				t.Fatalf("modifying a returned slice changed the stored blob")
			}
		}
	}
}

func testImmutable(t *testing.T, e *Env) {
	ctx := context.Background()
	if err := e.Store.Put(ctx, "a/b", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Put(ctx, "a/b", []byte("one")); err != nil {
		t.Fatalf("Put of the same bytes again: %v, want nil", err)
	}
	if err := e.Store.Put(ctx, "a/b", []byte("two")); !errors.Is(err, blob.ErrConflict) {
		t.Fatalf("Put of other bytes: %v, want ErrConflict", err)
	}
	if got, _ := e.Store.Get(ctx, "a/b"); string(got) != "one" {
		t.Fatalf("after a refused Put: %q, want %q", got, "one")
	}
}

func testNames(t *testing.T, e *Env) {
	ctx := context.Background()
	for _, name := range []string{"", "/a", "a/", "a//b", "../a", "a/../b", ".", "a/./b", "a b", "a\x00b", "a\\b", "a{b}", strings.Repeat("x", 513)} {
		if err := e.Store.Put(ctx, name, []byte("x")); !errors.Is(err, blob.ErrName) {
			t.Errorf("Put %q: %v, want ErrName", name, err)
		}
		if _, err := e.Store.Get(ctx, name); !errors.Is(err, blob.ErrName) {
			t.Errorf("Get %q: %v, want ErrName", name, err)
		}
	}
	if err := e.Store.Put(ctx, "x", make([]byte, blob.MaxSize+1)); !errors.Is(err, blob.ErrTooLarge) {
		t.Errorf("Put above MaxSize: %v, want ErrTooLarge", err)
	}
}

func testConcurrent(t *testing.T, e *Env) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Everyone puts the shared name with the same bytes, and a name
			// of its own.
			if err := e.Store.Put(ctx, "shared/x", []byte("same")); err != nil {
				errs <- fmt.Errorf("shared: %w", err)
			}
			name := fmt.Sprintf("own/%d", i)
			if err := e.Store.Put(ctx, name, []byte(name)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range 16 {
		name := fmt.Sprintf("own/%d", i)
		if got, err := e.Store.Get(ctx, name); err != nil || string(got) != name {
			t.Errorf("Get %s: %q, %v", name, got, err)
		}
	}
}

func testOther(t *testing.T, e *Env) {
	if e.Other == nil {
		t.Skip("one handle only")
	}
	ctx := context.Background()
	if err := e.Store.Put(ctx, "deltas/j/d1", []byte("written by the leader")); err != nil {
		t.Fatal(err)
	}
	o := e.Other(t)
	if got, err := o.Get(ctx, "deltas/j/d1"); err != nil || string(got) != "written by the leader" {
		t.Fatalf("the other handle reads %q, %v", got, err)
	}
	if err := o.Put(ctx, "deltas/j/d1", []byte("a deposed leader's other bytes")); !errors.Is(err, blob.ErrConflict) {
		t.Fatalf("the other handle replaced a blob: %v", err)
	}
}

func testDeleteDir(t *testing.T, e *Env) {
	ctx := context.Background()
	put := map[string]string{
		"deltas/j1/a.delta":     "first delta",
		"deltas/j1/b.delta":     "the second delta",
		"deltas/j1/sub/c.delta": "deeper: not in deltas/j1",
		"deltas/j10/d.delta":    "another job whose id starts alike",
		"deltas/j2/e.delta":     "another job",
		"deltas/j1x":            "a sibling name",
	}
	for name, data := range put {
		if err := e.Store.Put(ctx, name, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	// Putting the same bytes again does not count them twice.
	if err := e.Store.Put(ctx, "deltas/j1/a.delta", []byte("first delta")); err != nil {
		t.Fatal(err)
	}
	r, err := e.Store.DeleteDir(ctx, "deltas/j1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (blob.Reclaimed{Blobs: 2, Bytes: int64(len("first delta") + len("the second delta"))}); r != want {
		t.Fatalf("DeleteDir reclaimed %+v, want %+v", r, want)
	}
	for name, data := range put {
		got, err := e.Store.Get(ctx, name)
		if blob.InDir(name, "deltas/j1") {
			if !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Get %s after DeleteDir: %q, %v; want ErrNotFound", name, got, err)
			}
		} else if err != nil || string(got) != data {
			t.Errorf("Get %s after deleting another directory: %q, %v", name, got, err)
		}
	}
	// Idempotent.
	if r, err := e.Store.DeleteDir(ctx, "deltas/j1"); err != nil || r != (blob.Reclaimed{}) {
		t.Fatalf("DeleteDir again: %+v, %v; want nothing reclaimed", r, err)
	}
	if r, err := e.Store.DeleteDir(ctx, "never/written"); err != nil || r != (blob.Reclaimed{}) {
		t.Fatalf("DeleteDir of a directory never written: %+v, %v", r, err)
	}
	// A deleted name can be written again (a deposed leader late) — with
	// other bytes too, since nothing holds it — and is deleted again.
	if err := e.Store.Put(ctx, "deltas/j1/a.delta", []byte("late")); err != nil {
		t.Fatalf("Put after DeleteDir: %v", err)
	}
	other := e.Store
	if e.Other != nil {
		other = e.Other(t)
	}
	if r, err := other.DeleteDir(ctx, "deltas/j1"); err != nil || r != (blob.Reclaimed{Blobs: 1, Bytes: 4}) {
		t.Fatalf("DeleteDir of a late write: %+v, %v", r, err)
	}
	if _, err := e.Store.Get(ctx, "deltas/j1/a.delta"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a late write survived DeleteDir: %v", err)
	}
	for _, bad := range []string{"", "a/", "../a", "a b"} {
		if _, err := e.Store.DeleteDir(ctx, bad); !errors.Is(err, blob.ErrName) {
			t.Errorf("DeleteDir %q: %v, want ErrName", bad, err)
		}
	}
	// Many blobs (more than one batch of a server-side script), deleted
	// while other directories are written.
	const n = 600
	var wg sync.WaitGroup
	for i := range n {
		if err := e.Store.Put(ctx, fmt.Sprintf("evidence/big/%04d", i), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 50 {
			if err := e.Store.Put(ctx, fmt.Sprintf("evidence/busy/%d", i), []byte("x")); err != nil {
				t.Error(err)
			}
		}
	}()
	r, err = e.Store.DeleteDir(ctx, "evidence/big")
	wg.Wait()
	if err != nil || r != (blob.Reclaimed{Blobs: n, Bytes: n}) {
		t.Fatalf("DeleteDir of %d blobs: %+v, %v", n, r, err)
	}
	if r, err := e.Store.DeleteDir(ctx, "evidence/busy"); err != nil || r.Blobs != 50 {
		t.Fatalf("DeleteDir of the directory written meanwhile: %+v, %v", r, err)
	}
}
