package blob_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/orchestrator/blob"
)

// FuzzName: a name ValidName accepts maps onto a path strictly below the
// directory store's root, and the same name reads back what was put.
func FuzzName(f *testing.F) {
	for _, s := range []string{"deltas/job-00000001/ab.delta", "../x", "a/../../b", "a//b", ".", "a/.", "checkpoints/bafy/README.md", "x\x00y", "/abs"} {
		f.Add(s)
	}
	root := f.TempDir()
	d, err := blob.NewDir(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if blob.ValidName(name) != nil {
			if err := d.Put(context.Background(), name, []byte("x")); err == nil {
				t.Fatalf("Put accepted the invalid name %q", name)
			}
			return
		}
		p := d.Path(name)
		rel, err := filepath.Rel(root, p)
		// ".." or "../…" is outside; "..0" is a file name like any other.
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.Clean(p) != p {
			t.Fatalf("name %q maps to %s, outside %s", name, p, root)
		}
		if err := d.Put(context.Background(), name, []byte(name)); err != nil {
			// A name that is a directory of an earlier name (a/b after
			// a/b/c) cannot be a file: refused, not written elsewhere.
			return
		}
		if got, err := d.Get(context.Background(), name); err != nil || string(got) != name {
			t.Fatalf("Get %q: %q, %v", name, got, err)
		}
	})
}
