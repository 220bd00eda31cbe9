package artifact

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/keys/edkey"
)

// Manifest errors.
var (
	ErrManifest    = errors.New("artifact: bad manifest")
	ErrSignature   = errors.New("artifact: bad manifest signature")
	ErrExpired     = errors.New("artifact: manifest expired")
	ErrNotYetValid = errors.New("artifact: manifest created in the future")
	ErrRollback    = errors.New("artifact: manifest older than one already known")
	ErrConflict    = errors.New("artifact: two manifests of the same version differ")
	ErrMismatch    = errors.New("artifact: DAG does not match its manifest")
)

// Kind is what an artifact is.
type Kind string

// Kinds of artifact.
const (
	KindCheckpoint   Kind = "checkpoint"
	KindBaseModel    Kind = "base-model"
	KindDatasetShard Kind = "dataset-shard"
	// KindDataset is a job's training data: a directory of JSONL or
	// Parquet files in the datasets layout (docs/datasets.md), named by
	// its CID in a job's dataset field.
	KindDataset Kind = "dataset"
	// KindDelta is a signed delta file (docs/delta-format.md) a node
	// publishes so that others can fetch it by CID (gym_protocol's
	// DeltaWriter.upload_ipfs).
	KindDelta Kind = "delta"
	// KindCheck is a delegated trace check's package (package checkpkg,
	// docs/validators.md) hanzod publishes for the validators it asks.
	KindCheck Kind = "check"
)

// ManifestFormat is the current value of Manifest.Format.
const ManifestFormat = 1

// MaxManifestSize bounds an encoded signed manifest (about 10^5 files).
const MaxManifestSize = 16 << 20

// manifestDomain separates manifest signatures from every other Ed25519
// signature a node key makes.
const manifestDomain = "zoo-gym/artifact-manifest/v1\x00"

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}(/[A-Za-z0-9][A-Za-z0-9._-]{0,127}){0,3}$`)

// Manifest names one version of one artifact. Its canonical encoding is
// the JSON of this struct (fields in this order, files sorted by path, times
// in UTC RFC 3339 with nanoseconds, no insignificant space).
type Manifest struct {
	Format  int       `json:"format"`
	Kind    Kind      `json:"kind"`
	Name    string    `json:"name"`
	Version uint64    `json:"version"`
	Root    string    `json:"root"`
	Size    uint64    `json:"size"`
	Files   []File    `json:"files"`
	Creator string    `json:"creator"` // Ed25519 public key, 64 hex characters
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Signed is a manifest and its creator's signature (hex) over
// manifestDomain followed by the manifest's canonical encoding.
type Signed struct {
	Manifest Manifest `json:"manifest"`
	Sig      string   `json:"sig"`
}

// RootCID returns the parsed root.
func (m *Manifest) RootCID() (cid.Cid, error) {
	c, err := cid.Decode(m.Root)
	if err != nil {
		return cid.Undef, fmt.Errorf("%w: root: %v", ErrManifest, err)
	}
	if err := CheckCID(c); err != nil {
		return cid.Undef, fmt.Errorf("%w: root: %v", ErrManifest, err)
	}
	return c, nil
}

// Validate checks the manifest's fields (not its signature).
func (m *Manifest) Validate() error {
	switch {
	case m.Format != ManifestFormat:
		return fmt.Errorf("%w: format %d, want %d", ErrManifest, m.Format, ManifestFormat)
	case m.Kind != KindCheckpoint && m.Kind != KindBaseModel && m.Kind != KindDatasetShard && m.Kind != KindDelta && m.Kind != KindDataset && m.Kind != KindCheck:
		return fmt.Errorf("%w: kind %q", ErrManifest, m.Kind)
	case !nameRE.MatchString(m.Name):
		return fmt.Errorf("%w: name %q", ErrManifest, m.Name)
	case m.Version == 0:
		return fmt.Errorf("%w: version 0", ErrManifest)
	case m.Created.IsZero() || !m.Expires.After(m.Created):
		return fmt.Errorf("%w: expires %v is not after created %v", ErrManifest, m.Expires, m.Created)
	case len(m.Files) == 0:
		return fmt.Errorf("%w: no files", ErrManifest)
	}
	if _, err := m.RootCID(); err != nil {
		return err
	}
	if _, err := m.CreatorKey(); err != nil {
		return err
	}
	var total uint64
	for i, f := range m.Files {
		if f.Path == "" {
			if len(m.Files) != 1 {
				return fmt.Errorf("%w: an unnamed file beside others", ErrManifest)
			}
		} else if err := ValidPath(f.Path); err != nil {
			return fmt.Errorf("%w: %v", ErrManifest, err)
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			return fmt.Errorf("%w: files not sorted or repeated at %q", ErrManifest, f.Path)
		}
		total += f.Size
		if total < f.Size {
			return fmt.Errorf("%w: sizes overflow", ErrManifest)
		}
	}
	if total != m.Size {
		return fmt.Errorf("%w: files add up to %d bytes, size says %d", ErrManifest, total, m.Size)
	}
	return nil
}

// CreatorKey returns the creator's public key, refusing keys package
// edkey refuses (small order, non-canonical, off the curve).
func (m *Manifest) CreatorKey() (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(m.Creator)
	if err != nil || len(b) != ed25519.PublicKeySize || hex.EncodeToString(b) != m.Creator {
		return nil, fmt.Errorf("%w: creator %q is not 64 lowercase hex characters", ErrManifest, m.Creator)
	}
	if err := edkey.CheckPublicKey(b); err != nil {
		return nil, fmt.Errorf("%w: creator key %s", ErrManifest, edkey.Reason(err))
	}
	return ed25519.PublicKey(b), nil
}

// Canonical returns the canonical encoding of m.
func (m *Manifest) Canonical() ([]byte, error) {
	c := *m
	c.Created = m.Created.UTC()
	c.Expires = m.Expires.UTC()
	if c.Files == nil {
		c.Files = []File{}
	}
	return json.Marshal(&c)
}

func signedBytes(m *Manifest) ([]byte, error) {
	b, err := m.Canonical()
	if err != nil {
		return nil, err
	}
	return append([]byte(manifestDomain), b...), nil
}

// Sign validates m, sets its creator to key's public half and signs it.
func Sign(m Manifest, key ed25519.PrivateKey) (*Signed, error) {
	m.Creator = hex.EncodeToString(key.Public().(ed25519.PublicKey))
	m.Created = m.Created.UTC()
	m.Expires = m.Expires.UTC()
	if err := m.Validate(); err != nil {
		return nil, err
	}
	msg, err := signedBytes(&m)
	if err != nil {
		return nil, err
	}
	return &Signed{Manifest: m, Sig: hex.EncodeToString(ed25519.Sign(key, msg))}, nil
}

// Encode returns the canonical encoding of the signed manifest.
func (s *Signed) Encode() ([]byte, error) { return json.Marshal(s) }

// ParseSigned decodes a signed manifest strictly (no unknown fields, no
// trailing data, at most MaxManifestSize bytes), validates it and checks
// its signature against its creator key. Whether that creator is trusted is
// the caller's decision.
func ParseSigned(data []byte) (*Signed, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(data), MaxManifestSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Signed
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the manifest", ErrManifest)
	}
	if err := s.Manifest.Validate(); err != nil {
		return nil, err
	}
	if err := s.verify(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Signed) verify() error {
	pub, err := s.Manifest.CreatorKey()
	if err != nil {
		return err
	}
	sig, err := hex.DecodeString(s.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: not %d hex bytes", ErrSignature, ed25519.SignatureSize)
	}
	if err := edkey.CheckSignature(sig); err != nil {
		return fmt.Errorf("%w: signature %s", ErrSignature, edkey.Reason(err))
	}
	msg, err := signedBytes(&s.Manifest)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, msg, sig) {
		return ErrSignature
	}
	return nil
}

// MaxClockSkew is how far in the future a manifest's creation time may be.
const MaxClockSkew = 5 * time.Minute

// CheckFresh refuses an expired manifest or one created more than
// MaxClockSkew after now.
func CheckFresh(m *Manifest, now time.Time) error {
	if !now.Before(m.Expires) {
		return fmt.Errorf("%w: %s v%d expired at %s", ErrExpired, m.Name, m.Version, m.Expires.Format(time.RFC3339))
	}
	if m.Created.After(now.Add(MaxClockSkew)) {
		return fmt.Errorf("%w: %s", ErrNotYetValid, m.Created.Format(time.RFC3339))
	}
	return nil
}

// CheckUpdate decides whether next may be accepted where known (nil if
// none) is the newest manifest already accepted for the same kind and name.
// It refuses an expired next (freeze), an older version (rollback) and a
// different manifest under the same version (equivocation). Re-accepting
// the identical manifest is allowed.
func CheckUpdate(known, next *Manifest, now time.Time) error {
	if err := CheckFresh(next, now); err != nil {
		return err
	}
	if known == nil || known.Kind != next.Kind || known.Name != next.Name {
		return nil
	}
	switch {
	case next.Version < known.Version:
		return fmt.Errorf("%w: %s v%d, v%d is known", ErrRollback, next.Name, next.Version, known.Version)
	case next.Version == known.Version:
		a, err1 := known.Canonical()
		b, err2 := next.Canonical()
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("%w: %s v%d", ErrConflict, next.Name, next.Version)
		}
	}
	return nil
}

// Matches checks that a verified DAG index is the one the manifest names:
// same root, same files with the same sizes.
func (m *Manifest) Matches(ix *Index) error {
	root, err := m.RootCID()
	if err != nil {
		return err
	}
	if !root.Equals(ix.Root) {
		return fmt.Errorf("%w: root %s, manifest names %s", ErrMismatch, ix.Root, root)
	}
	if len(ix.Files) != len(m.Files) {
		return fmt.Errorf("%w: %d files, manifest lists %d", ErrMismatch, len(ix.Files), len(m.Files))
	}
	for i, f := range ix.Files {
		if f != m.Files[i] {
			return fmt.Errorf("%w: file %q of %d bytes, manifest says %q of %d", ErrMismatch, f.Path, f.Size, m.Files[i].Path, m.Files[i].Size)
		}
	}
	return nil
}

// PublicHex returns key's public half as the manifest and authorization
// formats write it: 64 lowercase hex characters.
func PublicHex(key ed25519.PrivateKey) string {
	return hex.EncodeToString(key.Public().(ed25519.PublicKey))
}
