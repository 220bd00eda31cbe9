package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Tensor is an in-memory tensor to be written by Write. Data holds the raw
// little-endian element bytes.
type Tensor struct {
	Name  string
	DType string
	Shape []uint64
	Data  []byte
}

// Write writes tensors in the given order (data laid out back to back in
// that order). The header is compact JSON in the same shape the Rust
// reference emits ("__metadata__" first when metadata is non-empty, with
// keys sorted; then each tensor as {"dtype","shape","data_offsets"}),
// padded with spaces to a multiple of 8 bytes.
//
// Everything is validated before the first byte is written: names must be
// non-empty, unique, valid UTF-8 and not "__metadata__"; dtypes known;
// len(Data) must equal the element count times the dtype size; metadata
// keys and values must be valid UTF-8.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	header, err := buildHeader(tensors, metadata, false)
	if err != nil {
		return err
	}
	if err := writeHeader(w, header); err != nil {
		return err
	}
	for _, t := range tensors {
		if err := writeAll(w, t.Data); err != nil {
			return err
		}
	}
	return nil
}

// WriteHeader writes the start of a file (header length and header) for
// tensors whose data the caller then writes itself, exactly
// numel(Shape) × dtype size bytes per tensor, back to back in the given
// order: the way to write a file larger than memory. Data is ignored. It
// validates as Write does.
func WriteHeader(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	header, err := buildHeader(tensors, metadata, true)
	if err != nil {
		return err
	}
	return writeHeader(w, header)
}

func writeHeader(w io.Writer, header []byte) error {
	buf := make([]byte, 8, 8+len(header))
	binary.LittleEndian.PutUint64(buf, uint64(len(header)))
	buf = append(buf, header...)
	return writeAll(w, buf)
}

func writeAll(w io.Writer, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	n, err := w.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

// buildHeader renders the header; with headerOnly, sizes come from the
// shapes and Data is ignored.
func buildHeader(tensors []Tensor, metadata map[string]string, headerOnly bool) ([]byte, error) {
	names := make(map[string]struct{}, len(tensors))
	sizes := make([]uint64, len(tensors))
	for i, t := range tensors {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("%w", ErrEmptyName)
		case t.Name == metadataKey:
			return nil, fmt.Errorf("%w: tensor %q: name is reserved", ErrInvalidName, t.Name)
		case !utf8.ValidString(t.Name):
			return nil, fmt.Errorf("%w: tensor %q: not valid UTF-8", ErrInvalidName, t.Name)
		}
		if err := checkName(t.Name); err != nil {
			return nil, err
		}
		if _, dup := names[t.Name]; dup {
			return nil, fmt.Errorf("%w: tensor %q", ErrDuplicateName, t.Name)
		}
		names[t.Name] = struct{}{}
		nbytes, err := byteSize(t.Name, t.DType, t.Shape)
		if err != nil {
			return nil, err
		}
		sizes[i] = nbytes
		if !headerOnly && nbytes != uint64(len(t.Data)) {
			return nil, fmt.Errorf("%w: tensor %q: %s%v needs %d bytes, Data has %d",
				ErrSizeMismatch, t.Name, t.DType, t.Shape, nbytes, len(t.Data))
		}
	}
	keys := make([]string, 0, len(metadata))
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("%w: key %q: key or value is not valid UTF-8", ErrInvalidMetadata, k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)

	h := []byte{'{'}
	first := true
	comma := func() {
		if !first {
			h = append(h, ',')
		}
		first = false
	}
	if len(keys) > 0 {
		comma()
		h = appendJSONString(h, metadataKey)
		h = append(h, ":{"...)
		for i, k := range keys {
			if i > 0 {
				h = append(h, ',')
			}
			h = appendJSONString(h, k)
			h = append(h, ':')
			h = appendJSONString(h, metadata[k])
		}
		h = append(h, '}')
	}
	var off int64
	for i, t := range tensors {
		if sizes[i] > uint64(math.MaxInt64-off) {
			return nil, fmt.Errorf("%w: tensor %q: data buffer exceeds 2^63-1 bytes", ErrInvalidOffsets, t.Name)
		}
		end := off + int64(sizes[i])
		comma()
		h = appendJSONString(h, t.Name)
		h = append(h, `:{"dtype":`...)
		h = appendJSONString(h, t.DType)
		h = append(h, `,"shape":[`...)
		for i, d := range t.Shape {
			if i > 0 {
				h = append(h, ',')
			}
			h = strconv.AppendUint(h, d, 10)
		}
		h = append(h, `],"data_offsets":[`...)
		h = strconv.AppendInt(h, off, 10)
		h = append(h, ',')
		h = strconv.AppendInt(h, end, 10)
		h = append(h, "]}"...)
		off = end
	}
	h = append(h, '}')
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	return h, nil
}

// appendJSONString appends s (valid UTF-8) as a JSON string, escaping the
// way serde_json does: '"', '\\', the short escapes \b \f \n \r \t, and
// other control characters as \u00XX with lowercase hex.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}
