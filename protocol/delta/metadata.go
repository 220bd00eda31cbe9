package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// Metadata is the JSON object carried in the reserved __metadata__ entry. It
// keeps every key of the object, known or not; the accessors read the fields
// SPEC.md defines and say whether each is present. The format does not require
// any field; the orchestrator does (see MetadataFields.Check).
type Metadata struct {
	fields map[string]json.RawMessage
}

// The keys of the fields SPEC.md defines.
const (
	KeyJob            = "job"
	KeyEpoch          = "epoch"
	KeyStep           = "step"
	KeyNode           = "node"
	KeySequence       = "sequence"
	KeyBaseCheckpoint = "base_checkpoint"
	KeyClaimedLoss    = "claimed_loss"
	KeySamples        = "samples"
	KeyTime           = "time"
)

type fieldKind int

const (
	kindString fieldKind = iota
	kindUint
	kindFloat
	kindTime
)

var knownFields = map[string]fieldKind{
	KeyJob: kindString, KeyNode: kindString, KeyBaseCheckpoint: kindString,
	KeyEpoch: kindUint, KeyStep: kindUint, KeySequence: kindUint, KeySamples: kindUint,
	KeyClaimedLoss: kindFloat, KeyTime: kindTime,
}

// ParseMetadata parses a JSON object and type-checks the known fields: job,
// node and base_checkpoint are strings; epoch, step, sequence and samples are
// integers in [0, 2^64); claimed_loss is a finite number; time is an RFC 3339
// string. Unknown keys are kept as they are.
func ParseMetadata(b []byte) (*Metadata, error) {
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: not UTF-8", ErrMetadata)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrMetadata, err)
	}
	if fields == nil {
		return nil, fmt.Errorf("%w: not a JSON object (null)", ErrMetadata)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrMetadata)
	}
	m := &Metadata{fields: fields}
	for k, kind := range knownFields {
		if raw, ok := fields[k]; ok {
			if err := checkKind(k, kind, raw); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func checkKind(k string, kind fieldKind, raw json.RawMessage) error {
	var err error
	switch kind {
	case kindString:
		var s string
		err = json.Unmarshal(raw, &s)
	case kindUint:
		_, err = strconv.ParseUint(string(raw), 10, 64)
	case kindFloat:
		var f float64
		if f, err = strconv.ParseFloat(string(raw), 64); err == nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
			err = fmt.Errorf("not finite")
		}
	case kindTime:
		var s string
		if err = json.Unmarshal(raw, &s); err == nil {
			_, err = time.Parse(time.RFC3339Nano, s)
		}
	}
	if err != nil {
		want := [...]string{"a string", "an integer in [0, 2^64)", "a finite number", "an RFC 3339 time string"}[kind]
		return fmt.Errorf("%w: field %q must be %s, is %s", ErrMetadata, k, want, raw)
	}
	return nil
}

// MetadataFields are the fields SPEC.md defines: what makes a delta
// attributable and unreplayable.
type MetadataFields struct {
	Job            string
	Epoch          uint64
	Step           uint64
	Node           string
	Sequence       uint64
	BaseCheckpoint string // hash of the checkpoint the delta is relative to
	ClaimedLoss    float64
	Samples        uint64
	Time           time.Time
}

// NewMetadata returns metadata holding all of f's fields.
func NewMetadata(f MetadataFields) *Metadata {
	m := &Metadata{fields: map[string]json.RawMessage{}}
	m.set(KeyJob, f.Job)
	m.set(KeyEpoch, f.Epoch)
	m.set(KeyStep, f.Step)
	m.set(KeyNode, f.Node)
	m.set(KeySequence, f.Sequence)
	m.set(KeyBaseCheckpoint, f.BaseCheckpoint)
	m.set(KeyClaimedLoss, f.ClaimedLoss)
	m.set(KeySamples, f.Samples)
	m.set(KeyTime, f.Time.UTC().Format(time.RFC3339Nano))
	return m
}

func (m *Metadata) set(k string, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only a non-finite float can fail here
		b = []byte("null")
	}
	m.fields[k] = b
}

// Set stores v (marshalled as JSON) under k. Known keys are type-checked.
func (m *Metadata) Set(k string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: field %q: %v", ErrMetadata, k, err)
	}
	if kind, ok := knownFields[k]; ok {
		if err := checkKind(k, kind, b); err != nil {
			return err
		}
	}
	if m.fields == nil {
		m.fields = map[string]json.RawMessage{}
	}
	m.fields[k] = b
	return nil
}

// Get returns the raw JSON value of k.
func (m *Metadata) Get(k string) (json.RawMessage, bool) {
	v, ok := m.fields[k]
	return v, ok
}

// Keys returns the keys present, sorted.
func (m *Metadata) Keys() []string { return slices.Sorted(maps.Keys(m.fields)) }

// MarshalJSON encodes the object with its keys sorted, compactly.
func (m *Metadata) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.Keys() {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		if err := json.Compact(&b, m.fields[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (m *Metadata) str(k string) (string, bool) {
	var s string
	raw, ok := m.fields[k]
	if !ok || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func (m *Metadata) uint(k string) (uint64, bool) {
	raw, ok := m.fields[k]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(string(raw), 10, 64)
	return v, err == nil
}

// Job returns the job id.
func (m *Metadata) Job() (string, bool) { return m.str(KeyJob) }

// Epoch returns the epoch.
func (m *Metadata) Epoch() (uint64, bool) { return m.uint(KeyEpoch) }

// Step returns the training step.
func (m *Metadata) Step() (uint64, bool) { return m.uint(KeyStep) }

// Node returns the submitting node's id.
func (m *Metadata) Node() (string, bool) { return m.str(KeyNode) }

// Sequence returns the node's submission sequence number.
func (m *Metadata) Sequence() (uint64, bool) { return m.uint(KeySequence) }

// BaseCheckpoint returns the hash of the checkpoint the delta applies to.
func (m *Metadata) BaseCheckpoint() (string, bool) { return m.str(KeyBaseCheckpoint) }

// Samples returns the number of samples the delta was trained on.
func (m *Metadata) Samples() (uint64, bool) { return m.uint(KeySamples) }

// ClaimedLoss returns the loss the node claims.
func (m *Metadata) ClaimedLoss() (float64, bool) {
	raw, ok := m.fields[KeyClaimedLoss]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return v, err == nil
}

// Time returns when the delta was made.
func (m *Metadata) Time() (time.Time, bool) {
	s, ok := m.str(KeyTime)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// Fields returns all SPEC.md fields, or an error naming the first missing one.
func (m *Metadata) Fields() (MetadataFields, error) {
	var f MetadataFields
	var ok [9]bool
	f.Job, ok[0] = m.Job()
	f.Epoch, ok[1] = m.Epoch()
	f.Step, ok[2] = m.Step()
	f.Node, ok[3] = m.Node()
	f.Sequence, ok[4] = m.Sequence()
	f.BaseCheckpoint, ok[5] = m.BaseCheckpoint()
	f.ClaimedLoss, ok[6] = m.ClaimedLoss()
	f.Samples, ok[7] = m.Samples()
	f.Time, ok[8] = m.Time()
	keys := [9]string{KeyJob, KeyEpoch, KeyStep, KeyNode, KeySequence, KeyBaseCheckpoint, KeyClaimedLoss, KeySamples, KeyTime}
	for i, present := range ok {
		if !present {
			return f, fmt.Errorf("%w: field %q missing", ErrMetadata, keys[i])
		}
	}
	return f, nil
}

func newTap() *xxhash.Digest { return xxhash.New() }
