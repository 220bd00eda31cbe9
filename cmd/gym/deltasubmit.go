package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha3"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/node/nodeclient"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/delta"
)

// submitResult is one line of gym delta submit --json.
type submitResult struct {
	Source    string `json:"source"`
	Digest    string `json:"digest"`
	Accepted  bool   `json:"accepted"`
	Duplicate bool   `json:"duplicate"`
	Reason    string `json:"reason,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

func newDeltaSubmit(o *orchestratorFlags, lim *limitFlags) *cobra.Command {
	var pub, storeDir, keyPath string
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "submit --key FILE [--store DIR] [--json] FILE|CID...",
		Short: "Verify delta files and hand them to hanzod; print its verdicts",
		Long: `submit verifies each delta (as verify does; it must be signed by --key, the
node key that made it) and uploads it to hanzod (--orchestrator) as the
node's sync contribution, announced with that key's signature
(docs/orchestrator.md, "Delta upload"). An argument that is not a file is a CID: the one-file
artifact of that root in --store (a worker's DIR/artifacts, where
gym_protocol's upload_ipfs publishes).

hanzod judges each file (docs/orchestrator.md): it must carry the job's
metadata (job, epoch, sync, step, node, sequence, job_binding) and be
signed by the node's registered key. A delta naming its sync's rollout
traces (docs/traces.md) goes with them: FILE.traces.zst beside the file,
where gym worker keeps them, is sent when present. The same bytes sent again
are a duplicate, not an offence (their traces need not be sent again);
another delta for a slot the node already filled is equivocation, which
hanzod slashes.

Prints one line per file ("SOURCE: accepted|duplicate|rejected (reason:
detail)"), or with --json one object per line {source, digest, accepted,
duplicate, reason, detail}. Exit status 0 when hanzod accepted every file
(duplicates included), 1 when it rejected one or one does not verify.`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyPath == "" {
				return usageError{errors.New("--key: the node key that signed the files (hanzod takes uploads from their signer only)")}
			}
			key, err := nodekey.Load(keyPath)
			if err != nil {
				return err
			}
			want, err := parsePubkey(pub)
			if err != nil {
				return err
			}
			if own := key.Public().(ed25519.PublicKey); want == nil {
				want = own
			} else if !bytes.Equal(want, own) {
				return usageError{fmt.Errorf("--pubkey %x is not --key's public key %x", []byte(want), []byte(own))}
			}
			if timeout <= 0 {
				return usageError{fmt.Errorf("--timeout %v: want a positive duration, e.g. 10s", timeout)}
			}
			var files, traces [][]byte
			for _, a := range args {
				b, err := readDeltaSource(cmd.Context(), a, storeDir, lim.limits())
				if err != nil {
					return err
				}
				if err := verifyBytes(cmd.Context(), b, want, lim.limits()); err != nil {
					return &exitError{code: 1, msg: fmt.Sprintf("%s: %v", a, err)}
				}
				files = append(files, b)
				// The sync's traces the worker kept beside the file
				// (FILE.traces.zst), sent with it when present.
				tr, err := os.ReadFile(a + worker.TracesSuffix)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				traces = append(traces, tr)
			}
			c, err := o.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			node := pb.NewNodeServiceClient(c.conn)
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			info, err := pb.NewOrchestratorServiceClient(c.conn).Info(ctx, &pb.InfoRequest{})
			cancel()
			if err != nil {
				return c.explain("asking hanzod for its key", timeout, err)
			}
			rejected := 0
			for i, b := range files {
				ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
				resp, err := nodeclient.Upload(ctx, node, key, info.InstanceKey, time.Now(), b, traces[i])
				cancel()
				if err != nil {
					return c.explain("submitting "+args[i], timeout, err)
				}
				r := submitResult{Source: args[i], Digest: resp.GetDigest(), Accepted: resp.GetAccepted(),
					Duplicate: resp.GetDuplicate(), Reason: resp.GetReason(), Detail: resp.GetDetail()}
				if r.Digest == "" {
					sum := sha3.Sum256(b[:len(b)-delta.TrailerSize])
					r.Digest = hex.EncodeToString(sum[:])
				}
				if !r.Accepted {
					rejected++
				}
				if asJSON {
					line, _ := json.Marshal(r)
					fmt.Fprintln(cmd.OutOrStdout(), string(line))
					continue
				}
				switch {
				case r.Accepted && r.Duplicate:
					fmt.Fprintf(cmd.OutOrStdout(), "%s: duplicate (accepted before) %s\n", r.Source, r.Digest)
				case r.Accepted:
					fmt.Fprintf(cmd.OutOrStdout(), "%s: accepted %s\n", r.Source, r.Digest)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "%s: rejected (%s: %s)\n", r.Source, r.Reason, r.Detail)
				}
			}
			if rejected > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "the node key that signed the files, which announces the upload (required)")
	cmd.Flags().StringVar(&pub, "pubkey", "", "require every file to be signed by this public key (64 hex characters; --key's by default)")
	cmd.Flags().StringVar(&storeDir, "store", "", "artifact store to resolve CID arguments in (a worker's DIR/artifacts)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per file")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up on hanzod after this long, per file")
	return cmd
}

// readDeltaSource returns the bytes of a delta file, or of the one-file
// artifact a CID names in the store.
func readDeltaSource(ctx context.Context, arg, storeDir string, lim delta.Limits) ([]byte, error) {
	maxSize := int64(lim.MaxTotalBytes) + 1<<30
	if st, err := os.Stat(arg); err == nil {
		if st.Size() > maxSize {
			return nil, fmt.Errorf("%s: %d bytes, more than a delta within the limits can be", arg, st.Size())
		}
		return os.ReadFile(arg)
	}
	root, err := cid.Decode(arg)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s is neither a file nor a CID", arg)}
	}
	if storeDir == "" {
		return nil, usageError{fmt.Errorf("%s is a CID: --store DIR says where to find it", arg)}
	}
	st, err := store.Open(store.DefaultConfig(storeDir))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rec, err := st.Artifact(root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", arg, err)
	}
	if n := len(rec.Manifest.Manifest.Files); n != 1 || rec.Manifest.Manifest.Files[0].Path != "" {
		return nil, fmt.Errorf("%s: a directory artifact (%d files), not a delta file", arg, n)
	}
	if int64(rec.Manifest.Manifest.Size) > maxSize {
		return nil, fmt.Errorf("%s: %d bytes, more than a delta within the limits can be", arg, rec.Manifest.Manifest.Size)
	}
	tmp, err := os.MkdirTemp("", "gym-delta-submit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := st.Export(ctx, root, tmp, "delta"); err != nil {
		return nil, fmt.Errorf("%s: %w", arg, err)
	}
	return os.ReadFile(filepath.Join(tmp, "delta"))
}

// verifyBytes is verifyFile for a file in memory.
func verifyBytes(ctx context.Context, b []byte, want []byte, lim delta.Limits) error {
	info, err := delta.Skim(ctx, bytes.NewReader(b), lim)
	if err != nil {
		return flagHint(err)
	}
	if err := signedBy(info, want); err != nil {
		return err
	}
	again, err := delta.Verify(ctx, io.Reader(bytes.NewReader(b)), lim)
	if err != nil {
		return err
	}
	return signedBy(again, info.PublicKey)
}
