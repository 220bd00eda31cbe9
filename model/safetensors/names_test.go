package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// Names that could mean a path or hide in a terminal are refused by the
// reader and the writer alike.
func TestHostileNamesRefused(t *testing.T) {
	for _, name := range []string{"../../etc/passwd", "/abs", "a\x00b", "a\nb", "\x1b[2J", "c1\u0085", "a/../b", "..", "\\abs", "a\\..\\b"} {
		js, _ := json.Marshal(name)
		file := build(obj(fmt.Sprintf(`%s:{"dtype":"U8","shape":[1],"data_offsets":[0,1]}`, js)), []byte{0})
		if _, err := parseBytes(file, Limits{}); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Parse, name %q: got %v, want ErrInvalidName", name, err)
		}
		var buf bytes.Buffer
		if err := Write(&buf, []Tensor{{Name: name, DType: "U8", Shape: []uint64{1}, Data: []byte{0}}}, nil); !errors.Is(err, ErrInvalidName) || buf.Len() != 0 {
			t.Errorf("Write, name %q: got %v (%d bytes), want ErrInvalidName", name, err, buf.Len())
		}
	}
}

// Every dimension is bounded even beside a 0.
func TestEmptyTensorDimensionsBounded(t *testing.T) {
	for _, shape := range []string{"[0,18446744073709551615,18446744073709551615]", "[9223372036854775807,0,2]"} {
		file := build(obj(ent("a", "F32", shape, 0, 0)), nil)
		if _, err := parseBytes(file, Limits{}); !errors.Is(err, ErrShapeOverflow) {
			t.Errorf("Parse, shape %s: got %v, want ErrShapeOverflow", shape, err)
		}
	}
	var buf bytes.Buffer
	if err := Write(&buf, []Tensor{{Name: "a", DType: "F32", Shape: []uint64{0, 1<<64 - 1, 1<<64 - 1}}}, nil); !errors.Is(err, ErrShapeOverflow) {
		t.Errorf("Write: got %v, want ErrShapeOverflow", err)
	}
	if _, err := parseBytes(build(obj(ent("a", "F32", "[0,4096,128]", 0, 0)), nil), Limits{}); err != nil {
		t.Errorf("a plausible empty tensor: %v", err)
	}
}

// WriteHeader followed by the data is byte for byte what Write writes.
func TestWriteHeaderMatchesWrite(t *testing.T) {
	ts := sampleTensors()
	meta := map[string]string{"format": "pt"}
	var whole, split bytes.Buffer
	if err := Write(&whole, ts, meta); err != nil {
		t.Fatal(err)
	}
	bare := make([]Tensor, len(ts))
	for i, tn := range ts {
		bare[i] = Tensor{Name: tn.Name, DType: tn.DType, Shape: tn.Shape}
	}
	if err := WriteHeader(&split, bare, meta); err != nil {
		t.Fatal(err)
	}
	for _, tn := range ts {
		split.Write(tn.Data)
	}
	if !bytes.Equal(whole.Bytes(), split.Bytes()) {
		t.Fatal("WriteHeader + data differs from Write")
	}
}
