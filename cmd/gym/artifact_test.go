package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/model/dataset"
	"github.com/zooai/gym/protocol/jobspec"
)

// server is a running `gym artifact serve` child process.
type server struct {
	cmd  *exec.Cmd
	peer string // KEYHEX@host:port, as serve prints it
	log  *syncBuffer
	done chan struct{}
}

// serveArtifacts starts `gym artifact serve` on a free port (port 0) and
// returns once it answers HTTP: it reads the address from the line serve
// prints after listening, then polls /gym/v1/key.
func serveArtifacts(t *testing.T, store, key string, allow ...string) *server {
	t.Helper()
	args := []string{"artifact", "serve", "--store", store, "--key", key, "--listen", "127.0.0.1:0"}
	if len(allow) > 0 {
		args = append(args, "--allow", strings.Join(allow, ","))
	}
	cmd := exec.Command(gymBin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, log: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(s.kill)
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		l, _ := r.ReadString('\n')
		lines <- l
		for {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
		}
	}()
	var l string
	select {
	case l = <-lines:
	case <-time.After(15 * time.Second):
		t.Fatalf("serve printed nothing in 15 s\n%s", s.log)
	}
	// "serving N artifact(s) on http://ADDR as KEYHEX@ADDR"
	f := strings.Fields(l)
	if len(f) < 2 || f[len(f)-2] != "as" || !strings.HasPrefix(l, "serving ") {
		t.Fatalf("serve printed %q\n%s", l, s.log)
	}
	s.peer = f[len(f)-1]
	addr := s.peer[strings.IndexByte(s.peer, '@')+1:]
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/gym/v1/key")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve at %s not ready: %v\n%s", addr, err, s.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.done
}

var completeLine = regexp.MustCompile(`complete: .*\((\d+) blocks fetched, (\d+) already held\)`)

// fetchCounts parses fetch's "complete:" line: blocks fetched and already
// held.
func fetchCounts(t *testing.T, stderr string) (fetched, held int) {
	t.Helper()
	m := completeLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no completion line in fetch's output:\n%s", stderr)
	}
	fetched, _ = strconv.Atoi(m[1])
	held, _ = strconv.Atoi(m[2])
	return fetched, held
}

// blockFiles counts the blocks in a store directory (missing: 0).
func blockFiles(dir string) int {
	n := 0
	filepath.WalkDir(filepath.Join(dir, "blocks"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// sameTree fails unless the regular files under b are exactly those under
// a, byte for byte.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	read := func(root string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if !d.Type().IsRegular() {
				t.Errorf("%s: not a regular file", p)
			}
			data, err := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			m[filepath.ToSlash(rel)] = data
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ma, mb := read(a), read(b)
	if len(ma) != len(mb) {
		t.Fatalf("%s has %d files, %s has %d", a, len(ma), b, len(mb))
	}
	for p, da := range ma {
		if db, ok := mb[p]; !ok || !bytes.Equal(da, db) {
			t.Fatalf("%s differs between %s and %s", p, a, b)
		}
	}
}

// fetchAndKill starts `gym artifact fetch`, kills victim once the fetching
// store holds at least `after` blocks, and returns the fetch's result.
func fetchAndKill(t *testing.T, victim *server, store string, after int, args ...string) result {
	t.Helper()
	cmd := exec.Command(gymBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	killed := false
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-time.After(2 * time.Millisecond):
			if !killed && blockFiles(store) >= after {
				victim.kill()
				killed = true
			}
		}
	}
	if !killed {
		t.Fatalf("the fetch ended before %d blocks had arrived (too fast to interrupt): %v\n%s", after, err, errb.String())
	}
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestArtifactCLI drives publish, list, serve, fetch and verify as real
// processes: two servers, a byte-identical fetch from both, a server killed
// mid-fetch (the fetch continues from the other), a fetch whose only
// server dies and is resumed without refetching held blocks, a requester
// the servers do not allow, and verify on a tampered store and export.
func TestArtifactCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 48 MiB between processes several times")
	}
	dir := t.TempDir()
	keys := map[string]string{} // name → public key hex
	for _, k := range []string{"a", "b", "c", "d"} {
		keys[k] = strings.TrimSpace(mustGym(t, "keygen", "--out", filepath.Join(dir, k+".pem")))
	}
	keyPath := func(k string) string { return filepath.Join(dir, k+".pem") }

	// A checkpoint directory: 48 MiB of weights (192 chunks), a config, a
	// nested file and a dot-file.
	src := filepath.Join(dir, "qwen-ckpt")
	if err := os.MkdirAll(filepath.Join(src, "tok"), 0o755); err != nil {
		t.Fatal(err)
	}
	weights := make([]byte, 48<<20)
	rng := rand.NewChaCha8([32]byte{7})
	rng.Read(weights)
	for p, data := range map[string][]byte{
		"model.safetensors": weights,
		"config.json":       []byte(`{"layers":2}`),
		"tok/vocab.txt":     []byte("a\nb\nc\n"),
		".gitattributes":    []byte("*.safetensors binary\n"),
	} {
		if err := os.WriteFile(filepath.Join(src, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// publish prints the root CID, and only that, on stdout: the CID the
	// importer (kubo's parameters) gives for the same directory.
	s1 := filepath.Join(dir, "s1")
	r := gym(t, "artifact", "publish", "--store", s1, "--key", keyPath("a"), "--name", "zoo/qwen-ckpt", src)
	if r.code != 0 {
		t.Fatalf("publish: exit %d\n%s", r.code, r.stderr)
	}
	root := strings.TrimSpace(r.stdout)
	want, err := artifact.Import(context.Background(), artifact.NewMemBlocks(), src)
	if err != nil {
		t.Fatal(err)
	}
	if r.stdout != want.Root.String()+"\n" {
		t.Fatalf("publish printed %q, want the root CID %s", r.stdout, want.Root)
	}
	if c, err := cid.Decode(root); err != nil || c.Version() != 1 {
		t.Fatalf("publish printed %q: not a CIDv1 (%v)", root, err)
	}
	if !strings.Contains(r.stderr, "published checkpoint zoo/qwen-ckpt v1: 4 files") {
		t.Errorf("publish's report: %q", r.stderr)
	}
	if out := mustGym(t, "artifact", "list", "--store", s1); !regexp.MustCompile(root + `\s+checkpoint\s+zoo/qwen-ckpt\s+1\s+4\s+` + strconv.Itoa(len(weights)+12+6+21) + `\s`).MatchString(out) {
		t.Fatalf("list:\n%s", out)
	}
	// A second node gets the same artifact by copying the store.
	s2 := filepath.Join(dir, "s2")
	if err := os.CopyFS(s2, os.DirFS(s1)); err != nil {
		t.Fatal(err)
	}

	// serve needs to be told who may fetch.
	if r := gym(t, "artifact", "serve", "--store", s1, "--key", keyPath("a"), "--listen", "127.0.0.1:0"); r.code != 2 || !strings.Contains(r.stderr, "--allow") {
		t.Fatalf("serve without --allow: exit %d, %q", r.code, r.stderr)
	}
	srvA := serveArtifacts(t, s1, keyPath("a"), keys["c"])
	srvB := serveArtifacts(t, s2, keyPath("b"), keys["c"])

	fetch := func(out, export string, peers ...string) []string {
		args := []string{"artifact", "fetch", root, "--from", strings.Join(peers, ","), "--out", out, "--key", keyPath("c"), "--trust", keys["a"]}
		if export != "" {
			args = append(args, "--export", export)
		}
		return args
	}

	// Fetch from both servers at once: blocks from each, byte-identical.
	f1, ex1 := filepath.Join(dir, "f1"), filepath.Join(dir, "ex1")
	r = gym(t, fetch(f1, ex1, srvA.peer, srvB.peer)...)
	if r.code != 0 {
		t.Fatalf("fetch: exit %d\n%s", r.code, r.stderr)
	}
	if r.stdout != root+"\n" {
		t.Fatalf("fetch printed %q", r.stdout)
	}
	total, held := fetchCounts(t, r.stderr)
	if held != 0 || total != blockFiles(f1) || total < 192 {
		t.Fatalf("first fetch: %d fetched, %d held, %d blocks in the store", total, held, blockFiles(f1))
	}
	per := regexp.MustCompile(`127\.0\.0\.1:\d+:(\d+)`).FindAllStringSubmatch(r.stderr, -1)
	if len(per) != 2 || per[0][1] == "0" || per[1][1] == "0" {
		t.Errorf("blocks per source: %v, want both servers used\n%s", per, r.stderr)
	}
	sameTree(t, src, ex1)
	if out := mustGym(t, "artifact", "list", "--store", f1); !strings.Contains(out, root) {
		t.Fatalf("fetched store does not list the artifact:\n%s", out)
	}
	// Fetching again finds it complete and fetches nothing.
	r = gym(t, fetch(f1, "", srvA.peer)...)
	if r.code != 0 || r.stdout != root+"\n" {
		t.Fatalf("second fetch of a complete artifact: exit %d\n%s", r.code, r.stderr)
	}
	if n, h := fetchCounts(t, r.stderr); n != 0 || h != 0 {
		t.Fatalf("second fetch of a complete artifact: %d fetched, %d held", n, h)
	}

	// A requester the servers do not allow is refused: exit 1, a message
	// that says so, nothing fetched.
	f4 := filepath.Join(dir, "f4")
	r = gym(t, "artifact", "fetch", root, "--from", srvA.peer+","+srvB.peer, "--out", f4, "--key", keyPath("d"))
	if r.code != 1 || !strings.Contains(r.stderr, "403 Forbidden") || !strings.Contains(r.stderr, "requester not allowed") {
		t.Fatalf("unauthorized fetch: exit %d, want 1 with a 403 'requester not allowed'\n%s", r.code, r.stderr)
	}
	if n := blockFiles(f4); n != 0 {
		t.Fatalf("unauthorized fetch stored %d blocks", n)
	}

	// One of two servers killed mid-fetch: the fetch continues from the
	// other and completes.
	f3, ex3 := filepath.Join(dir, "f3"), filepath.Join(dir, "ex3")
	r = fetchAndKill(t, srvA, f3, 20, fetch(f3, ex3, srvA.peer, srvB.peer)...)
	if r.code != 0 {
		t.Fatalf("fetch with a server killed: exit %d\n%s", r.code, r.stderr)
	}
	sameTree(t, src, ex3)

	// The only server killed mid-fetch: the fetch fails, keeping its
	// blocks; run again (against the restarted server and the other one),
	// it fetches exactly the blocks it does not hold.
	f2, ex2 := filepath.Join(dir, "f2"), filepath.Join(dir, "ex2")
	r = fetchAndKill(t, srvB, f2, total/4, fetch(f2, ex2, srvB.peer)...)
	if r.code != 1 {
		t.Fatalf("fetch whose only server died: exit %d, want 1\n%s", r.code, r.stderr)
	}
	kept := blockFiles(f2)
	if kept < total/4 || kept >= total {
		t.Fatalf("after the interruption the store holds %d of %d blocks", kept, total)
	}
	if out := mustGym(t, "artifact", "list", "--store", f2); strings.Contains(out, root) {
		t.Fatal("an interrupted fetch is listed as complete")
	}
	srvB = serveArtifacts(t, s2, keyPath("b"), keys["c"]) // restart, new port
	srvA = serveArtifacts(t, s1, keyPath("a"), keys["c"])
	r = gym(t, fetch(f2, ex2, srvB.peer, srvA.peer)...)
	if r.code != 0 {
		t.Fatalf("resumed fetch: exit %d\n%s", r.code, r.stderr)
	}
	fetched, held := fetchCounts(t, r.stderr)
	if held != kept || fetched != total-kept {
		t.Fatalf("resumed fetch: %d fetched, %d already held; the store held %d of %d", fetched, held, kept, total)
	}
	if n := blockFiles(f2); n != total {
		t.Fatalf("after the resumed fetch the store has %d blocks, want %d", n, total)
	}
	sameTree(t, src, ex2)
	t.Logf("interrupted at %d of %d blocks; resumed: %d fetched, %d already held", kept, total, fetched, held)

	// verify: intact, then with one chunk flipped on disk.
	if r := gym(t, "artifact", "verify", f1); r.code != 0 || !strings.Contains(r.stdout, "1 artifact(s), 1 intact, 0 broken") {
		t.Fatalf("verify of an intact store: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var leaf string
	filepath.WalkDir(filepath.Join(f1, "blocks"), func(p string, d fs.DirEntry, err error) error {
		if info, ierr := d.Info(); err == nil && ierr == nil && info.Mode().IsRegular() && info.Size() == 262144 && leaf == "" {
			leaf = p
		}
		return nil
	})
	if leaf == "" {
		t.Fatal("no 256 KiB chunk in the store")
	}
	data, err := os.ReadFile(leaf)
	if err != nil {
		t.Fatal(err)
	}
	data[1000] ^= 1
	if err := os.WriteFile(leaf, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r = gym(t, "artifact", "verify", f1)
	if r.code != 1 || !strings.Contains(r.stdout, "1 artifact(s), 0 intact, 1 broken") || !strings.Contains(r.stderr, "BROKEN") || !strings.Contains(r.stderr, root) {
		t.Fatalf("verify of a tampered store: exit %d, want 1 naming %s\n%s%s", r.code, root, r.stdout, r.stderr)
	}

	// An exported directory is checked against its root CID by verify
	// --cid, which only reads it: the intact export passes, a tampered one
	// (one byte of the weights) fails, and no store appears inside it.
	if out := mustGym(t, "artifact", "verify", "--cid", root, ex1); !strings.Contains(out, "root "+root) {
		t.Fatalf("verify of the export: %s", out)
	}
	if _, err := os.Stat(filepath.Join(ex1, "blocks")); !os.IsNotExist(err) {
		t.Fatal("verify wrote a store into the exported directory")
	}
	w := filepath.Join(ex1, "model.safetensors")
	data, err = os.ReadFile(w)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x80
	if err := os.WriteFile(w, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := gym(t, "artifact", "verify", "--cid", root, ex1); r.code != 1 || !strings.Contains(r.stdout, "want "+root) {
		t.Fatalf("verify of a tampered export: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := gym(t, "artifact", "verify", "--cid", "not-a-cid", ex1); r.code != 2 {
		t.Fatalf("verify --cid garbage: exit %d, want 2", r.code)
	}
}

// TestArtifactGCCLI: gc refuses while a server has the store open; then a
// dry run reports and removes nothing, and gc --keep-versions 1 removes
// the two older versions and a stray block file, leaving the newest
// version intact.
func TestArtifactGCCLI(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	mustGym(t, "keygen", "--out", key)
	st := filepath.Join(dir, "s")
	var roots []string
	for v := range 3 {
		src := filepath.Join(dir, fmt.Sprintf("v%d", v))
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 600<<10)
		rand.NewChaCha8([32]byte{byte(v)}).Read(data)
		if err := os.WriteFile(filepath.Join(src, "w.bin"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		roots = append(roots, strings.TrimSpace(mustGym(t, "artifact", "publish", "--store", st, "--key", key, "--name", "ckpt", src)))
	}
	stray := filepath.Join(st, "blocks", "zz", "stray")
	if err := os.MkdirAll(filepath.Dir(stray), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, []byte("left by a crash"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := blockFiles(st)

	stranger := strings.TrimSpace(mustGym(t, "keygen", "--out", filepath.Join(dir, "stranger.pem")))
	srv := serveArtifacts(t, st, key, stranger)
	if r := gym(t, "artifact", "gc", "--store", st); r.code != 1 || !strings.Contains(r.stderr, "in use by another process") {
		t.Fatalf("gc beside a server: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	srv.kill()
	<-srv.done

	var dry struct {
		DryRun    bool `json:"dry_run"`
		Artifacts []struct {
			Root    string
			Version uint64
			Reason  string
		}
		Blocks int
		Kept   int `json:"kept_artifacts"`
	}
	if err := json.Unmarshal([]byte(mustGym(t, "artifact", "gc", "--store", st, "--keep-versions", "1", "--dry-run", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || len(dry.Artifacts) != 2 || dry.Artifacts[0].Root != roots[0] || dry.Artifacts[1].Root != roots[1] ||
		dry.Artifacts[0].Reason != "superseded" || dry.Kept != 1 || dry.Blocks == 0 || blockFiles(st) != before {
		t.Fatalf("dry run: %+v (block files %d, before %d)", dry, blockFiles(st), before)
	}
	out := mustGym(t, "artifact", "gc", "--store", st, "--keep-versions", "1")
	if !strings.Contains(out, "removed "+roots[0]+" checkpoint ckpt v1 (superseded)") || !strings.Contains(out, "removed 2 artifact(s) and "+strconv.Itoa(dry.Blocks)+" block(s)") {
		t.Fatalf("gc:\n%s", out)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatal("the stray block file survived gc")
	}
	if l := mustGym(t, "artifact", "list", "--store", st); strings.Contains(l, roots[0]) || strings.Contains(l, roots[1]) || !strings.Contains(l, roots[2]) {
		t.Fatalf("list after gc:\n%s", l)
	}
	if r := gym(t, "artifact", "verify", st); r.code != 0 || !strings.Contains(r.stdout, "1 artifact(s), 1 intact") {
		t.Fatalf("verify after gc: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A publish of the removed v1 under its old version is still a rollback.
	if r := gym(t, "artifact", "publish", "--store", st, "--key", key, "--name", "ckpt", "--version", "1", filepath.Join(dir, "v0")); r.code == 0 {
		t.Fatal("republishing v1 after gc succeeded: the rollback protection was lost")
	}
}

// gym artifact publish --kind dataset FILE publishes the file as the train
// split of a directory named after it: the CID a job names, the same as
// hashing that directory.
func TestArtifactPublishDataset(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	mustGym(t, "keygen", "--out", key)
	src := filepath.Join(dir, "math.jsonl")
	if err := os.WriteFile(src, []byte(`{"question":"12+34","answer":"#### 640"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := gym(t, "artifact", "publish", "--store", filepath.Join(dir, "s"), "--key", key, "--kind", "dataset", src)
	if r.code != 0 {
		t.Fatalf("publish: exit %d\n%s", r.code, r.stderr)
	}
	staged, err := dataset.Stage(src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want, err := basecache.DirCID(t.Context(), staged)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(r.stdout); got != want.String() {
		t.Fatalf("published %s, the staged directory is %s", got, want)
	}
	if _, byCID, err := jobspec.DatasetCID(want.String()); !byCID || err != nil {
		t.Fatalf("a job cannot name %s: %v", want, err)
	}
	if r := gym(t, "artifact", "publish", "--store", filepath.Join(dir, "s"), "--key", key, "--kind", "dataset", key); r.code == 0 || !strings.Contains(r.stderr, "not a .jsonl or .parquet file") {
		t.Fatalf("publishing a key as a dataset: exit %d\n%s", r.code, r.stderr)
	}
}
