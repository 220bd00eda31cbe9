package main

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/artifact/transfer"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/dataset"
)

func newArtifact() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "artifact",
		Short: "Publish, serve, fetch and verify content-addressed artifacts (checkpoints, base models, dataset shards)",
		Long: `artifact manages a store of artifacts: files or directories turned into the
UnixFS DAG that 'ipfs add -r --cid-version=1' builds (so their root CID is the
one IPFS gives), each named by a manifest signed with a node key.

Nodes exchange artifacts over HTTP with the IPFS trustless-gateway protocol;
every request carries an authorization signed by the requesting node, bound
to the artifact, the serving node, an expiry and a single-use nonce.`,
	}
	cmd.AddCommand(newArtifactPublish(), newArtifactList(), newArtifactServe(), newArtifactFetch(), newArtifactVerify(), newArtifactGC())
	return cmd
}

type storeFlags struct {
	dir      string
	quotaMiB int64
}

func (f *storeFlags) add(cmd *cobra.Command, name, usage string) {
	cmd.Flags().StringVar(&f.dir, name, "", usage)
	cmd.Flags().Int64Var(&f.quotaMiB, "quota-mib", 100<<10, "store quota in MiB (0: none)")
}

func (f *storeFlags) open(flag string) (*store.Store, error) {
	if f.dir == "" {
		return nil, usageError{fmt.Errorf("--%s DIR is required", flag)}
	}
	if f.quotaMiB < 0 {
		return nil, usageError{errors.New("--quota-mib must not be negative")}
	}
	cfg := store.DefaultConfig(f.dir)
	cfg.Quota = f.quotaMiB << 20
	return store.Open(cfg)
}

func loadKey(path string) (ed25519.PrivateKey, error) {
	if path == "" {
		return nil, usageError{errors.New("--key KEY is required (make one with 'gym keygen --out KEY')")}
	}
	return nodekey.Load(path)
}

func parseKeys(list []string) ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for _, s := range list {
		for _, k := range strings.Split(s, ",") {
			if k = strings.TrimSpace(k); k == "" {
				continue
			}
			p, err := nodekey.ParsePublicHex(k)
			if err != nil {
				return nil, usageError{err}
			}
			out = append(out, p)
		}
	}
	return out, nil
}

func newArtifactPublish() *cobra.Command {
	var sf storeFlags
	var keyPath, kind, name string
	var version uint64
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "publish --store DIR --key KEY [--kind K] [--name N] [--version V] SRC",
		Short: "Add a file or directory to a store and print its root CID",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := loadKey(keyPath)
			if err != nil {
				return err
			}
			src := args[0]
			if name == "" {
				name = filepath.Base(filepath.Clean(src))
			}
			st, err := sf.open("store")
			if err != nil {
				return err
			}
			defer st.Close()
			if artifact.Kind(kind) == artifact.KindDataset {
				// A dataset is a directory in the datasets layout; a
				// single JSONL or Parquet file is published as the train
				// split of one (docs/datasets.md).
				tmp, err := os.MkdirTemp("", "gym-dataset-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				if src, err = dataset.Stage(src, tmp); err != nil {
					return err
				}
			}
			rec, err := st.Publish(cmd.Context(), src, store.Meta{Kind: artifact.Kind(kind), Name: name, Version: version, TTL: ttl}, key, time.Now())
			if err != nil {
				return err
			}
			m := rec.Manifest.Manifest
			fmt.Fprintf(cmd.ErrOrStderr(), "published %s %s v%d: %d files, %d bytes\n", m.Kind, m.Name, m.Version, len(m.Files), m.Size)
			fmt.Fprintln(cmd.OutOrStdout(), rec.Root)
			return nil
		},
	}
	sf.add(cmd, "store", "store directory (created if missing)")
	cmd.Flags().StringVar(&keyPath, "key", "", "node key that signs the manifest (required)")
	cmd.Flags().StringVar(&kind, "kind", string(artifact.KindCheckpoint), "checkpoint, base-model, dataset (a .jsonl or .parquet file or a datasets directory; docs/datasets.md), dataset-shard or delta")
	cmd.Flags().StringVar(&name, "name", "", "artifact name (default: the base name of SRC)")
	cmd.Flags().Uint64Var(&version, "version", 0, "manifest version (default: one more than the newest known)")
	cmd.Flags().DurationVar(&ttl, "ttl", 30*24*time.Hour, "how long the manifest stays valid")
	return cmd
}

func newArtifactList() *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "list --store DIR",
		Short: "List the complete artifacts in a store",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := sf.open("store")
			if err != nil {
				return err
			}
			defer st.Close()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ROOT\tKIND\tNAME\tVERSION\tFILES\tBYTES\tEXPIRES")
			for _, r := range st.List() {
				m := r.Manifest.Manifest
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", r.Root, m.Kind, m.Name, m.Version, len(m.Files), m.Size, m.Expires.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	sf.add(cmd, "store", "store directory")
	return cmd
}

func newArtifactServe() *cobra.Command {
	var sf storeFlags
	var keyPath, listen string
	var allow []string
	var allowAny bool
	cmd := &cobra.Command{
		Use:   "serve --store DIR --listen ADDR --key KEY (--allow KEYHEX[,KEYHEX] | --allow-any)",
		Short: "Serve a store's artifacts to authorized nodes (IPFS trustless-gateway protocol)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := loadKey(keyPath)
			if err != nil {
				return err
			}
			keys, err := parseKeys(allow)
			if err != nil {
				return err
			}
			if len(keys) == 0 && !allowAny {
				return usageError{errors.New("say who may fetch: --allow KEYHEX[,KEYHEX] or --allow-any")}
			}
			policy := transfer.AllowKeys(keys...)
			if allowAny {
				policy = func(ed25519.PublicKey, cid.Cid) bool { return true }
			}
			st, err := sf.open("store")
			if err != nil {
				return err
			}
			defer st.Close()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			h, err := transfer.NewServer(transfer.ServerConfig{Key: key, Store: st, Allow: policy, Logger: log,
				NonceLog: filepath.Join(sf.dir, "nonces.log")})
			if err != nil {
				return err
			}
			defer h.Close()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
			fmt.Fprintf(cmd.OutOrStdout(), "serving %d artifact(s) on http://%s as %s@%s\n", len(st.List()), ln.Addr(), nodekey.PublicHex(key), ln.Addr())
			err = transfer.Serve(cmd.Context(), srv, func() error { return srv.Serve(ln) })
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			return err
		},
	}
	sf.add(cmd, "store", "store directory")
	cmd.Flags().StringVar(&keyPath, "key", "", "this node's key: requests must be addressed to it (required)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4780", "address to listen on (port 0: any free port)")
	cmd.Flags().StringSliceVar(&allow, "allow", nil, "public keys (hex) of the nodes allowed to fetch")
	cmd.Flags().BoolVar(&allowAny, "allow-any", false, "allow any node with a valid authorization")
	return cmd
}

func newArtifactFetch() *cobra.Command {
	var sf storeFlags
	var keyPath, export string
	var from, trust []string
	var workers, maxInFlight int
	cmd := &cobra.Command{
		Use:   "fetch CID --from [KEYHEX@]ADDR[,...] --out STORE --key KEY [--export DIR] [--trust KEYHEX,...]",
		Short: "Fetch a complete artifact from one or more peers into a store",
		Long: `fetch brings the artifact CID into the store STORE from all the peers at
once, verifying every block against its CID, then checks the whole DAG against
the signed manifest before the artifact becomes visible. An interrupted fetch
resumes: run it again and the blocks already held are not fetched again.

A peer written KEYHEX@host:port is addressed by that key; a bare host:port is
asked for its key first.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := cid.Decode(args[0])
			if err != nil {
				return usageError{fmt.Errorf("bad CID %q: %v", args[0], err)}
			}
			key, err := loadKey(keyPath)
			if err != nil {
				return err
			}
			trusted, err := parseKeys(trust)
			if err != nil {
				return err
			}
			var addrs []string
			for _, f := range from {
				addrs = append(addrs, strings.Split(f, ",")...)
			}
			if len(addrs) == 0 {
				return usageError{errors.New("--from ADDR[,ADDR] is required")}
			}
			st, err := sf.open("out")
			if err != nil {
				return err
			}
			defer st.Close()
			ctx := cmd.Context()
			client := &transfer.Client{Key: key, HTTP: &http.Client{Transport: transfer.NewTransport()}}
			var peers []transfer.Peer
			for _, a := range addrs {
				p, err := transfer.ParsePeer(strings.TrimSpace(a))
				if err != nil {
					return usageError{err}
				}
				if p, err = client.Resolve(ctx, p); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "skipping %s: %v\n", a, err)
					continue
				}
				peers = append(peers, p)
			}
			if len(peers) == 0 {
				return errors.New("no peer answered")
			}
			g := transfer.Get{Client: client, Peers: peers, Store: st, Fetch: transfer.FetchConfig{Workers: workers, MaxInFlight: maxInFlight}}
			if len(trusted) > 0 {
				g.Trust = func(k ed25519.PublicKey) bool {
					for _, t := range trusted {
						if t.Equal(k) {
							return true
						}
					}
					return false
				}
			}
			bar := newProgressBar(cmd.ErrOrStderr())
			g.Fetch.Progress = bar.update
			rec, stats, err := transfer.GetArtifact(ctx, root, g)
			bar.done(stats)
			if err != nil {
				return err
			}
			m := rec.Manifest.Manifest
			fmt.Fprintf(cmd.ErrOrStderr(), "complete: %s %s v%d, %d files, %d bytes (%d blocks fetched, %d already held)\n",
				m.Kind, m.Name, m.Version, len(m.Files), m.Size, stats.Fetched, stats.Resumed)
			if export != "" {
				name := m.Name[strings.LastIndex(m.Name, "/")+1:]
				if err := st.Export(ctx, root, export, name); err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), rec.Root)
			return nil
		},
	}
	sf.add(cmd, "out", "store directory to fetch into (created if missing)")
	cmd.Flags().StringVar(&keyPath, "key", "", "this node's key, which signs the requests (required)")
	cmd.Flags().StringSliceVar(&from, "from", nil, "peers: [KEYHEX@]host:port, comma-separated or repeated")
	cmd.Flags().StringSliceVar(&trust, "trust", nil, "accept manifests only from these creators (hex public keys)")
	cmd.Flags().StringVar(&export, "export", "", "also write the artifact's files under this directory")
	cmd.Flags().IntVar(&workers, "workers", 0, "requests in flight per peer (0: adaptive, from 16 up to --max-in-flight, following the measured bandwidth-delay product)")
	cmd.Flags().IntVar(&maxInFlight, "max-in-flight", 64, "most requests in flight per peer when --workers is 0")
	return cmd
}

func newArtifactVerify() *cobra.Command {
	var want string
	cmd := &cobra.Command{
		Use:   "verify [--cid CID] DIR",
		Short: "Re-verify a store, or check an exported directory against its CID",
		Long: `verify re-hashes every block and re-checks every artifact of the store DIR.

When DIR is not a store (an artifact exported with fetch --export, or any
directory), verify builds its DAG exactly as publish would, prints the root
CID, and with --cid fails unless it is that CID. DIR is only read.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if _, err := os.Lstat(dir); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(dir, "blocks")); err != nil {
				return verifyExport(cmd, dir, want)
			}
			if want != "" {
				return usageError{errors.New("--cid checks an exported directory; DIR is a store (its artifacts are checked against their manifests)")}
			}
			cfg := store.DefaultConfig(dir)
			cfg.Quota = 0
			st, err := store.Open(cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			errs := st.Verify(cmd.Context())
			for _, e := range errs {
				fmt.Fprintln(cmd.ErrOrStderr(), "BROKEN", e)
			}
			n := len(st.List())
			fmt.Fprintf(cmd.OutOrStdout(), "%d artifact(s), %d intact, %d broken\n", n, n-len(errs), len(errs))
			if len(errs) > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&want, "cid", "", "the root CID an exported directory must have")
	return cmd
}

func newArtifactGC() *cobra.Command {
	var sf storeFlags
	var keepVersions int
	var keepExpired, dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "gc --store DIR [--keep-versions N] [--keep-expired] [--dry-run] [--json]",
		Short: "Remove unreferenced blocks and superseded or expired artifacts from a store",
		Long: `gc removes from the store DIR every block that belongs to no complete
artifact (left by interrupted fetches, failed publishes or removed artifacts),
the artifacts older than the newest N versions of their name (--keep-versions
N; 0 keeps every version), and the artifacts whose manifest has expired
(unless --keep-expired). The newest manifest known for each name is kept, so
an older version is still refused after its artifact is gone.

gc refuses to run while another process (hanzod, gym worker, gym artifact
serve or fetch) has the store open: it could remove the blocks of a fetch in
progress there. Those processes call the same collection themselves.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keepVersions < 0 {
				return usageError{errors.New("--keep-versions must not be negative")}
			}
			st, err := sf.open("store")
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := st.GC(cmd.Context(), store.GCPolicy{KeepVersions: keepVersions, Expired: !keepExpired, Now: time.Now(), DryRun: dryRun})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			for _, a := range res.Artifacts {
				fmt.Fprintf(out, "%s %s %s %s v%d (%s)\n", verb, a.Root, a.Kind, a.Name, a.Version, a.Reason)
			}
			fmt.Fprintf(out, "%s %d artifact(s) and %d block(s), %d bytes; kept %d artifact(s), %d block(s) of fetches in progress; %d bytes used\n",
				verb, len(res.Artifacts), res.Blocks, res.Bytes, res.Kept, res.Pinned, res.Used)
			return nil
		},
	}
	sf.add(cmd, "store", "store directory")
	cmd.Flags().IntVar(&keepVersions, "keep-versions", 0, "keep the newest N versions of each artifact name (0: all)")
	cmd.Flags().BoolVar(&keepExpired, "keep-expired", false, "keep artifacts whose manifest has expired")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be removed, remove nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// verifyExport builds dir's DAG in a scratch store and compares its root.
func verifyExport(cmd *cobra.Command, dir, want string) error {
	var wantCID cid.Cid
	if want != "" {
		c, err := cid.Decode(want)
		if err != nil {
			return usageError{fmt.Errorf("--cid %q: %w", want, err)}
		}
		wantCID = c
	}
	scratch, err := os.MkdirTemp("", "gym-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	cfg := store.DefaultConfig(scratch)
	cfg.Quota = 0
	st, err := store.Open(cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	imp, err := artifact.Import(cmd.Context(), st, dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: root %s, %d file(s), %d bytes\n", dir, imp.Root, len(imp.Files), imp.Size)
	if want != "" && !imp.Root.Equals(wantCID) {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: root is %s, want %s\n", dir, imp.Root, wantCID)
		return &exitError{code: 1}
	}
	return nil
}

// progressBar prints a one-line progress report with rate and ETA to w at
// most twice a second.
type progressBar struct {
	w       io.Writer
	start   time.Time
	last    time.Time
	printed bool
}

func newProgressBar(w io.Writer) *progressBar {
	now := time.Now()
	return &progressBar{w: w, start: now, last: now}
}

func (b *progressBar) update(p transfer.Progress) {
	now := time.Now()
	if now.Sub(b.last) < 500*time.Millisecond {
		return
	}
	b.last = now
	b.printed = true
	el := now.Sub(b.start).Seconds()
	rate := float64(p.Bytes) / el
	eta := "?"
	if left := p.Expected - p.Bytes; rate > 0 && p.Expected > 0 && left >= 0 {
		eta = time.Duration(float64(left) / rate * float64(time.Second)).Round(time.Second).String()
	}
	pct := 0.0
	if p.Expected > 0 {
		pct = min(100, 100*float64(p.Bytes)/float64(p.Expected))
	}
	const width = 30
	fill := int(pct / 100 * width)
	fmt.Fprintf(b.w, "\r[%s%s] %5.1f%% %.1f MiB at %.1f MiB/s, ETA %s, %d block(s) held, %d source(s)   ",
		strings.Repeat("#", fill), strings.Repeat(".", width-fill), pct,
		float64(p.Bytes)/(1<<20), rate/(1<<20), eta, p.Resumed, p.SourcesLeft)
}

func (b *progressBar) done(s transfer.Stats) {
	if b.printed {
		fmt.Fprintln(b.w)
	}
	if s.Elapsed > 0 {
		fmt.Fprintf(b.w, "fetched %.1f MiB in %v (%.1f MiB/s) from %v\n",
			float64(s.Bytes)/(1<<20), s.Elapsed.Round(time.Millisecond), float64(s.Bytes)/(1<<20)/s.Elapsed.Seconds(), s.PerSource)
	}
}
