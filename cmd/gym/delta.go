package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/safetensors"
	"github.com/zooai/gym/protocol/delta"
)

func newDelta(o *orchestratorFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delta",
		Short: "Pack, unpack, inspect, verify and submit signed delta files",
		Long: `A delta file carries a set of tensors (usually a LoRA update), compressed
per tensor, checksummed with SHA3-256 and signed with the node's Ed25519 key.
docs/delta-format.md describes the format byte by byte.`,
	}
	var lim limitFlags
	d := toolLimits()
	cmd.PersistentFlags().Uint64Var(&lim.maxTensor, "max-tensor-bytes", d.MaxTensorBytes, "refuse a tensor larger than this (decoded bytes)")
	cmd.PersistentFlags().Uint64Var(&lim.maxTotal, "max-total-bytes", d.MaxTotalBytes, "refuse a file whose tensors total more than this (decoded bytes)")
	cmd.PersistentFlags().Uint64Var(&lim.maxWindow, "max-window-bytes", d.MaxWindowBytes, "refuse a Zstandard frame whose window (history kept while decoding) is larger than this")
	cmd.PersistentFlags().Uint64Var(&lim.maxRatio, "max-ratio", d.MaxRatio, "refuse a file whose tensors declare more decoded bytes than this many per byte of the file (a compression bomb); 0: no bound")
	cmd.AddCommand(newDeltaPack(), newDeltaUnpack(&lim), newDeltaInspect(&lim), newDeltaVerify(&lim), newDeltaSubmit(o, &lim))
	return cmd
}

// toolLimits are the gym delta commands' defaults, sized for real adapters
// rather than for anything the format can express: a rank-64 LoRA on every
// linear layer of a 70B model is about 3.3 GB in fp32 with its largest
// tensor under 8 MB, and a saved embedding of a 7B-class model (128k × 4096
// bf16) is 1 GiB. 8 MiB is the Zstandard window RFC 8878 asks every decoder
// to support and the largest this package writes. Larger files need the
// flags.
//
// A file may declare at most 64 decoded bytes per byte it weighs: real
// tensors barely compress (the built-in model's fp32 weights pack to 99.8%
// with LZ4 or Zstandard; an adapter whose B matrices are still zero packs
// to about half), while the 98 KB file of 3 GiB of zeros that unpack used
// to write out declares 32 342 per byte.
func toolLimits() delta.Limits {
	return delta.Limits{MaxTensorBytes: 1 << 30, MaxTotalBytes: 4 << 30, MaxWindowBytes: 8 << 20, MaxRatio: 64}
}

type limitFlags struct{ maxTensor, maxTotal, maxWindow, maxRatio uint64 }

func (l *limitFlags) limits() delta.Limits {
	return delta.Limits{MaxTensorBytes: l.maxTensor, MaxTotalBytes: l.maxTotal, MaxWindowBytes: l.maxWindow, MaxRatio: l.maxRatio}
}

// flagHint names the flag that raises the limit err is about.
func flagHint(err error) error {
	if errors.Is(err, delta.ErrRatio) {
		return fmt.Errorf("%w; nothing was decoded (a compression bomb? if the file is genuine, raise --max-ratio, or 0 for no bound)", err)
	}
	return err
}

var safetensorsDTypes = map[string]delta.DType{"F32": delta.FP32, "F16": delta.FP16, "BF16": delta.BF16, "I8": delta.Int8}

func newDeltaPack() *cobra.Command {
	var keyPath, comp, kind, meta string
	cmd := &cobra.Command{
		Use:   "pack --key KEY [--compression lz4|zstd|none] [--kind lora|full] [--meta JSON] IN.safetensors OUT.delta",
		Short: "Make a signed delta from a safetensors file",
		Long: `pack reads the tensors of IN.safetensors (dtypes F32, F16, BF16 and I8), writes
them to OUT.delta in the order of their data offsets, compressed per tensor
and signed with KEY. --meta sets the delta's __metadata__ JSON object (give
the JSON itself, or @FILE to read it from a file); the safetensors file's own
__metadata__ is not carried over.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyPath == "" {
				return usageError{errors.New("pack needs --key KEY (make one with 'gym keygen --out KEY')")}
			}
			c, err := delta.ParseCompression(comp)
			if err != nil {
				return usageError{err}
			}
			var flags delta.Flags
			switch kind {
			case "lora":
				flags = delta.FlagLoRA
			case "full":
				flags = delta.FlagFull
			default:
				return usageError{fmt.Errorf("--kind %q: want lora or full", kind)}
			}
			var md *delta.Metadata
			if meta != "" {
				raw := []byte(meta)
				if strings.HasPrefix(meta, "@") {
					if raw, err = os.ReadFile(meta[1:]); err != nil {
						return err
					}
				}
				if md, err = delta.ParseMetadata(raw); err != nil {
					return usageError{fmt.Errorf("--meta: %w", err)}
				}
			}
			key, err := nodekey.Load(keyPath)
			if err != nil {
				return err
			}
			tensors, err := readSafetensors(args[0])
			if err != nil {
				return err
			}
			return writeAtomic(args[1], func(w io.Writer) error {
				_, err := delta.Write(cmd.Context(), w, key, tensors, delta.WriteOptions{Compression: c, Flags: flags, Metadata: md})
				return err
			})
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "node key (PKCS#8 PEM Ed25519) to sign with (required)")
	cmd.Flags().StringVar(&comp, "compression", "lz4", "per-tensor frames: lz4, zstd or none")
	cmd.Flags().StringVar(&kind, "kind", "lora", "what the tensors are: lora (adapter weights) or full (full weights)")
	cmd.Flags().StringVar(&meta, "meta", "", "metadata JSON object, or @FILE")
	return cmd
}

// readSafetensors loads a safetensors file's tensors in data-offset order.
func readSafetensors(path string) ([]delta.Tensor, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := safetensors.Parse(bytes.NewReader(buf), int64(len(buf)), safetensors.Limits{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]delta.Tensor, 0, len(f.Tensors))
	for _, t := range f.Tensors {
		d, ok := safetensorsDTypes[t.DType]
		if !ok {
			return nil, fmt.Errorf("%s: tensor %q has dtype %s; a delta holds F32, F16, BF16 or I8 (convert the tensor first)", path, t.Name, t.DType)
		}
		data := buf[f.DataOffset+t.Begin : f.DataOffset+t.End]
		out = append(out, delta.Tensor{Name: t.Name, DType: d, Shape: t.Shape, Data: data})
	}
	return out, nil
}

// writeAtomic writes a file so that a failure never leaves a partial file.
func writeAtomic(path string, write func(io.Writer) error) error {
	return atomicfile.Write(path, 0o644, true, write)
}

func parsePubkey(s string) (ed25519.PublicKey, error) {
	if s == "" {
		return nil, nil
	}
	k, err := nodekey.ParsePublicHex(s)
	if err != nil {
		return nil, usageError{fmt.Errorf("--pubkey: %w", err)}
	}
	return k, nil
}

// signedBy checks the trailer key against the expected one.
func signedBy(info *delta.Info, want ed25519.PublicKey) error {
	if want != nil && !bytes.Equal(info.PublicKey, want) {
		return fmt.Errorf("signed by %x, not by %x", []byte(info.PublicKey), []byte(want))
	}
	return nil
}

var safetensorsNames = map[delta.DType]string{delta.FP32: "F32", delta.FP16: "F16", delta.BF16: "BF16", delta.Int8: "I8"}

// errChanged is returned when the file read for the header and the file
// read for the data differ.
var errChanged = errors.New("the file changed while it was being unpacked")

// unpack writes in's tensors to out one at a time. It skims in first
// (signature, signer, every limit, without decompressing), so a file
// declaring more than the limits is refused in the time it takes to read
// it; then it writes the safetensors header from what it skimmed and
// streams each tensor's decoded bytes after it. Memory stays at a few MiB
// plus one Zstandard window (--max-window-bytes) whatever the tensors'
// sizes. out is written through a temporary file that replaces it only
// when every frame decoded and the file verified again.
func unpack(ctx context.Context, in, out string, want ed25519.PublicKey, lim delta.Limits) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := delta.Skim(ctx, f, lim)
	if err != nil {
		return fmt.Errorf("%s: %w", in, flagHint(err))
	}
	if err := signedBy(info, want); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	var ts []safetensors.Tensor
	for _, e := range info.Entries {
		if e.Name != delta.MetadataName {
			ts = append(ts, safetensors.Tensor{Name: e.Name, DType: safetensorsNames[e.DType], Shape: e.Shape})
		}
	}
	meta := safetensorsMetadata(info.Metadata)
	return writeAtomic(out, func(w io.Writer) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		bw := bufio.NewWriterSize(w, 1<<20)
		if err := safetensors.WriteHeader(bw, ts, meta); err != nil {
			return err
		}
		i := 0
		again, err := delta.StreamData(ctx, f, lim, func(e *delta.Entry, data io.Reader) error {
			if i >= len(ts) || e.Name != ts[i].Name || safetensorsNames[e.DType] != ts[i].DType || !slices.Equal(e.Shape, ts[i].Shape) {
				return errChanged
			}
			i++
			_, err := io.Copy(bw, data)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		if i != len(ts) || again.Signature != info.Signature || !bytes.Equal(again.PublicKey, info.PublicKey) {
			return fmt.Errorf("%s: %w", in, errChanged)
		}
		return bw.Flush()
	})
}

// safetensorsMetadata maps a delta's metadata onto safetensors' string
// map: strings as they are, other values as compact JSON.
func safetensorsMetadata(m *delta.Metadata) map[string]string {
	if m == nil {
		return nil
	}
	meta := map[string]string{}
	for _, k := range m.Keys() {
		raw, _ := m.Get(k)
		var s string
		if json.Unmarshal(raw, &s) == nil {
			meta[k] = s
		} else {
			var b bytes.Buffer
			json.Compact(&b, raw)
			meta[k] = b.String()
		}
	}
	return meta
}

func newDeltaUnpack(lim *limitFlags) *cobra.Command {
	var pub string
	cmd := &cobra.Command{
		Use:   "unpack [--pubkey HEX] IN.delta OUT.safetensors",
		Short: "Verify a delta and write its tensors as safetensors",
		Long: `unpack checks IN.delta's signature (and, with --pubkey, that it was signed by
that key) and every limit before it decodes anything, then decodes one tensor
at a time into OUT.safetensors, in file order. OUT appears only if the whole
file verified; memory stays at a few MiB whatever the tensors' sizes. The
delta's metadata goes into the safetensors __metadata__ header, one key per
field: strings as they are, other values as JSON text.

The default limits (--max-tensor-bytes 1 GiB, --max-total-bytes 4 GiB,
--max-window-bytes 8 MiB) fit real adapters; raise them for larger files.
--max-ratio 64 refuses a file whose tensors declare more than 64 decoded
bytes per byte of the file, before anything is written: real tensors barely
compress, a compression bomb declares thousands of bytes per byte.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			want, err := parsePubkey(pub)
			if err != nil {
				return err
			}
			return unpack(cmd.Context(), args[0], args[1], want, lim.limits())
		},
	}
	cmd.Flags().StringVar(&pub, "pubkey", "", "require the file to be signed by this public key (64 hex characters)")
	return cmd
}

// inspectJSON is the `gym delta inspect --json` object; scripts rely on it.
type inspectJSON struct {
	Version     *int            `json:"version"`
	Compression *string         `json:"compression"`
	Flags       *int            `json:"flags"`
	Checksum    *string         `json:"checksum"`
	Pubkey      *string         `json:"pubkey"`
	Valid       bool            `json:"valid"`
	Error       *string         `json:"error"`
	Tensors     []inspectTensor `json:"tensors"`
	Metadata    json.RawMessage `json:"metadata"`
}

type inspectTensor struct {
	Name        string   `json:"name"`
	DType       string   `json:"dtype"`
	Shape       []uint64 `json:"shape"`
	StoredBytes int64    `json:"stored_bytes"`
}

func inspect(ctx context.Context, path string, lim delta.Limits) (*inspectJSON, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var head [delta.HeaderSize]byte
	n, _ := io.ReadFull(f, head[:])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	// Skim first, so that a file over the limits (a compression bomb
	// among them) is reported without decoding it.
	info, verr := delta.Skim(ctx, f, lim)
	if verr == nil {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		info, verr = delta.Verify(ctx, f, lim)
	}
	verr = flagHint(verr)
	out := &inspectJSON{Valid: verr == nil, Tensors: []inspectTensor{}, Metadata: json.RawMessage("null")}
	if verr != nil {
		s := verr.Error()
		out.Error = &s
	}
	// Header fields as they are in the file, even when the file is invalid.
	if n >= 6 && string(head[:5]) == "DELTA" {
		v := int(head[5])
		out.Version = &v
	}
	if n >= 7 && out.Version != nil && delta.Compression(head[6]).Valid() {
		c := delta.Compression(head[6]).String()
		out.Compression = &c
	}
	if n >= 8 && out.Version != nil {
		fl := int(head[7])
		out.Flags = &fl
	}
	if n == delta.HeaderSize && out.Version != nil {
		c := hex.EncodeToString(head[8:])
		out.Checksum = &c
	}
	if len(info.PublicKey) == ed25519.PublicKeySize {
		p := hex.EncodeToString(info.PublicKey)
		out.Pubkey = &p
	}
	for _, e := range info.Entries {
		if e.Name == delta.MetadataName {
			continue
		}
		shape := e.Shape
		if shape == nil {
			shape = []uint64{}
		}
		out.Tensors = append(out.Tensors, inspectTensor{Name: e.Name, DType: e.DType.String(), Shape: shape, StoredBytes: e.StoredBytes})
	}
	if info.Metadata != nil {
		if b, err := info.Metadata.MarshalJSON(); err == nil {
			out.Metadata = b
		}
	}
	return out, nil
}

func newDeltaInspect(lim *limitFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect [--json] FILE",
		Short: "Show a delta's header, tensors, metadata and whether it verifies",
		Long: `inspect reads FILE completely and reports its header, tensors, metadata,
signer and whether it verifies. It exits 0 whenever it could read FILE, valid
or not (the report says which); 'gym delta verify' is the command for checks.

With --json it prints one object: version, compression (none|lz4|zstd),
flags, checksum (hex), pubkey (hex), valid, error (string or null), tensors
([{name, dtype, shape, stored_bytes}], without __metadata__) and metadata
(object or null). Fields that could not be read are null.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := inspect(cmd.Context(), args[0], lim.limits())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				return enc.Encode(r)
			}
			printInspect(w, args[0], r)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printInspect(w io.Writer, path string, r *inspectJSON) {
	str := func(p *string) string {
		if p == nil {
			return "-"
		}
		return *p
	}
	fmt.Fprintf(w, "file         %s\n", path)
	if r.Valid {
		fmt.Fprintf(w, "valid        yes\n")
	} else {
		fmt.Fprintf(w, "valid        NO: %s\n", str(r.Error))
	}
	if r.Version != nil {
		fmt.Fprintf(w, "version      %d\n", *r.Version)
	}
	fmt.Fprintf(w, "compression  %s\n", str(r.Compression))
	if r.Flags != nil {
		var kinds []string
		if *r.Flags&int(delta.FlagLoRA) != 0 {
			kinds = append(kinds, "lora")
		}
		if *r.Flags&int(delta.FlagFull) != 0 {
			kinds = append(kinds, "full")
		}
		fmt.Fprintf(w, "flags        %#02x %s\n", *r.Flags, strings.Join(kinds, ","))
	}
	fmt.Fprintf(w, "checksum     %s\n", str(r.Checksum))
	fmt.Fprintf(w, "signer       %s\n", str(r.Pubkey))
	if string(r.Metadata) != "null" {
		fmt.Fprintf(w, "metadata     %s\n", r.Metadata)
	}
	var total int64
	for _, t := range r.Tensors {
		total += t.StoredBytes
	}
	fmt.Fprintf(w, "tensors      %d (%d bytes stored)\n", len(r.Tensors), total)
	for _, t := range r.Tensors {
		fmt.Fprintf(w, "  %-40s %-5s %-18s %d\n", t.Name, t.DType, fmt.Sprint(t.Shape), t.StoredBytes)
	}
}

func newDeltaVerify(lim *limitFlags) *cobra.Command {
	var pub string
	cmd := &cobra.Command{
		Use:   "verify [--pubkey HEX] FILE...",
		Short: "Check delta files completely; exit 1 if any is bad",
		Long: `verify checks every FILE completely: format, every frame decoded, checksum and
signature (and, with --pubkey, that the signer is that key). It exits 0 when
every file is valid; otherwise it prints one line "FILE: reason" for each bad
file and exits 1.`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			want, err := parsePubkey(pub)
			if err != nil {
				return err
			}
			bad := 0
			for _, path := range args {
				if err := verifyFile(cmd.Context(), path, want, lim.limits()); err != nil {
					if cmd.Context().Err() != nil {
						return cmd.Context().Err()
					}
					bad++
					fmt.Fprintf(cmd.OutOrStdout(), "%s: %v\n", path, err)
				}
			}
			if bad > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pub, "pubkey", "", "require every file to be signed by this public key (64 hex characters)")
	return cmd
}

func verifyFile(ctx context.Context, path string, want ed25519.PublicKey, lim delta.Limits) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// Skim first: signature, signer and limits are refused before any
	// tensor is decompressed.
	info, err := delta.Skim(ctx, f, lim)
	if err != nil {
		return flagHint(err)
	}
	if err := signedBy(info, want); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	again, err := delta.Verify(ctx, f, lim)
	if err != nil {
		return err
	}
	return signedBy(again, info.PublicKey)
}
