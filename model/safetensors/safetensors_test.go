package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.safetensors")

// build lays out a file: 8-byte LE header length, header, data.
func build(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// buildN lays out a file with an arbitrary (possibly lying) header length.
func buildN(n uint64, rest string) []byte {
	b := binary.LittleEndian.AppendUint64(nil, n)
	return append(b, rest...)
}

func parseBytes(b []byte, lim Limits) (*File, error) {
	return Parse(bytes.NewReader(b), int64(len(b)), lim)
}

var allSentinels = []error{
	ErrTruncated, ErrHeaderTooLarge, ErrInvalidHeader, ErrInvalidHeaderStart,
	ErrInvalidTensorInfo, ErrUnknownDType, ErrRankTooLarge, ErrShapeOverflow,
	ErrInvalidOffsets, ErrSizeMismatch, ErrOverlap, ErrHole, ErrTooManyTensors,
	ErrInvalidMetadata, ErrEmptyName, ErrDuplicateName, ErrInvalidName,
}

// ent renders one tensor entry.
func ent(name, dtype, shape string, b, e int64) string {
	return fmt.Sprintf(`%q:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, name, dtype, shape, b, e)
}

func obj(entries ...string) string { return "{" + strings.Join(entries, ",") + "}" }

type badCase struct {
	name     string
	file     []byte
	lim      Limits
	want     error
	mention  string // substring the message must contain (usually the tensor name)
	alsoWant error  // optional second error the chain must contain
}

func badCases() []badCase {
	z := func(n int) []byte { return make([]byte, n) }
	okA := ent("a", "F32", "[2]", 0, 8)
	return []badCase{
		// Truncation / header length.
		{name: "empty file", file: nil, want: ErrTruncated, alsoWant: io.ErrUnexpectedEOF},
		{name: "shorter than 8", file: []byte{2, 0, 0}, want: ErrTruncated, alsoWant: io.ErrUnexpectedEOF},
		{name: "shorter than 8+N", file: buildN(100, `{"a":1}`), want: ErrTruncated, alsoWant: io.ErrUnexpectedEOF},
		{name: "N just past end", file: buildN(3, `{}`), want: ErrTruncated, alsoWant: io.ErrUnexpectedEOF},
		{name: "N huge", file: buildN(1<<63, `{}`), want: ErrHeaderTooLarge},
		{name: "N max uint64", file: buildN(^uint64(0), `{}`), want: ErrHeaderTooLarge},
		{name: "N over MaxHeaderBytes", file: build(obj(okA), z(8)), lim: Limits{MaxHeaderBytes: 16}, want: ErrHeaderTooLarge},
		{name: "N over default 100MiB", file: buildN(100<<20+1, `{}`), want: ErrHeaderTooLarge},

		// Header start / UTF-8 / JSON syntax.
		{name: "zero-length header", file: build("", nil), want: ErrInvalidHeaderStart},
		{name: "leading space", file: build(` {}`, nil), want: ErrInvalidHeaderStart},
		{name: "array header", file: build(`[]`, nil), want: ErrInvalidHeaderStart},
		{name: "string header", file: build(`"x"`, nil), want: ErrInvalidHeaderStart},
		{name: "BOM", file: build("\ufeff{}", nil), want: ErrInvalidHeaderStart},
		{name: "invalid utf8 in name", file: build(obj(`"a\xff":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`), z(8)), want: ErrInvalidHeader},
		{name: "invalid utf8 in padding", file: build("{}\xff", nil), want: ErrInvalidHeader},
		{name: "unterminated object", file: build(`{"a":`, nil), want: ErrInvalidHeader},
		{name: "unterminated object 2", file: build(`{`, nil), want: ErrInvalidHeader},
		{name: "missing colon", file: build(`{"a" {}}`, nil), want: ErrInvalidHeader},
		{name: "unquoted key", file: build(`{a:1}`, nil), want: ErrInvalidHeader},
		{name: "trailing comma", file: build(`{`+okA+`,}`, z(8)), want: ErrInvalidHeader},
		{name: "trailing garbage", file: build(`{}x`, nil), want: ErrInvalidHeader},
		{name: "two objects", file: build(`{}{}`, nil), want: ErrInvalidHeader},
		{name: "NUL padding", file: build("{}\x00\x00", nil), want: ErrInvalidHeader},
		{name: "leading zero", file: build(`{"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidHeader},
		{name: "bad escape", file: build(`{"a\q":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidHeader},
		{name: "raw newline in string", file: build("{\"a\n\":{}}", nil), want: ErrInvalidHeader},
		{name: "lone high surrogate", file: build(`{"\ud800":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidHeader},
		{name: "lone low surrogate", file: build(`{"\udc00x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidHeader},
		{name: "bad surrogate pair", file: build(`{"\ud800\u0041":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidHeader},
		{name: "short unicode escape", file: build(`{"\u12":1}`, nil), want: ErrInvalidHeader},
		{name: "bad fraction", file: build(`{"a":{"dtype":"F32","shape":[2.],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidHeader},
		{name: "invalid literal", file: build(`{"a":tru}`, nil), want: ErrInvalidHeader},
		{name: "missing value", file: build(`{"a":}`, nil), want: ErrInvalidHeader},
		{name: "missing shape element", file: build(`{"a":{"dtype":"F32","shape":[2,],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidHeader},
		{name: "bare minus", file: build(`{"a":{"dtype":"F32","shape":[-],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidHeader},

		// Entry fields and JSON types.
		{name: "entry is number", file: build(`{"a":1}`, nil), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "entry is null", file: build(`{"a":null}`, nil), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "entry is array", file: build(`{"a":[]}`, nil), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "entry is string", file: build(`{"a":"F32"}`, nil), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "entry empty object", file: build(`{"a":{}}`, nil), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "missing dtype", file: build(`{"a":{"shape":[2],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "missing shape", file: build(`{"a":{"dtype":"F32","data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "missing offsets", file: build(`{"a":{"dtype":"F32","shape":[2]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "unknown field", file: build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "wrong-case field", file: build(`{"a":{"DTYPE":"F32","shape":[2],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "duplicate field", file: build(`{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "dtype number", file: build(`{"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "shape string", file: build(`{"a":{"dtype":"F32","shape":"2","data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "shape null", file: build(`{"a":{"dtype":"F32","shape":null,"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "shape float", file: build(`{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "shape exponent", file: build(`{"a":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "shape negative", file: build(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "shape negative zero", file: build(`{"a":{"dtype":"F32","shape":[-0],"data_offsets":[0,4]}}`, z(4)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "shape element string", file: build(`{"a":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "shape nested", file: build(`{"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "offsets object", file: build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":{"0":0}}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "offsets one", file: build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "offsets three", file: build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "offsets empty", file: build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "offsets negative", file: build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},
		{name: "offsets float", file: build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}}`, z(8)), want: ErrInvalidTensorInfo, mention: `"a"`},

		// Dtype.
		{name: "unknown dtype", file: build(obj(ent("a", "F128", "[2]", 0, 8)), z(8)), want: ErrUnknownDType, mention: `"a"`},
		{name: "lowercase dtype", file: build(obj(ent("a", "f32", "[2]", 0, 8)), z(8)), want: ErrUnknownDType, mention: `"a"`},
		{name: "empty dtype", file: build(obj(ent("a", "", "[2]", 0, 8)), z(8)), want: ErrUnknownDType, mention: `"a"`},

		// Rank.
		{name: "rank 17 default", file: build(obj(ent("a", "U8", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", 0, 1)), z(1)), want: ErrRankTooLarge, mention: `"a"`},
		{name: "rank 3 over limit 2", file: build(obj(ent("a", "U8", "[1,1,1]", 0, 1)), z(1)), lim: Limits{MaxRank: 2}, want: ErrRankTooLarge, mention: `"a"`},

		// Shape overflow.
		{name: "numel overflow", file: build(obj(ent("a", "U8", "[4294967296,4294967296]", 0, 0)), nil), want: ErrShapeOverflow, mention: `"a"`},
		{name: "numel overflow with later zero", file: build(obj(ent("a", "U8", "[4294967296,4294967296,0]", 0, 0)), nil), want: ErrShapeOverflow, mention: `"a"`},
		{name: "bytes overflow", file: build(obj(ent("a", "F64", "[2305843009213693952]", 0, 0)), nil), want: ErrShapeOverflow, mention: `"a"`},
		{name: "dim above uint64", file: build(obj(ent("a", "U8", "[18446744073709551616]", 0, 0)), nil), want: ErrShapeOverflow, mention: `"a"`},

		// Offsets.
		{name: "begin > end", file: build(obj(ent("a", "F32", "[2]", 8, 0)), z(8)), want: ErrInvalidOffsets, mention: `"a"`},
		{name: "end beyond buffer", file: build(obj(ent("a", "F32", "[2]", 0, 8)), z(7)), want: ErrInvalidOffsets, mention: `"a"`},
		{name: "zero-size beyond buffer", file: build(obj(okA, ent("b", "F32", "[0]", 100, 100)), z(8)), want: ErrInvalidOffsets, mention: `"b"`},
		{name: "offset above int64", file: build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,9223372036854775808]}}`, z(8)), want: ErrInvalidOffsets, mention: `"a"`},
		{name: "offset above uint64", file: build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,99999999999999999999]}}`, z(8)), want: ErrInvalidOffsets, mention: `"a"`},

		// Size.
		{name: "size mismatch small", file: build(obj(ent("a", "F32", "[2]", 0, 4)), z(4)), want: ErrSizeMismatch, mention: `"a"`},
		{name: "size mismatch big", file: build(obj(ent("a", "F16", "[2]", 0, 8)), z(8)), want: ErrSizeMismatch, mention: `"a"`},
		{name: "scalar size mismatch", file: build(obj(ent("a", "F32", "[]", 0, 0)), nil), want: ErrSizeMismatch, mention: `"a"`},

		// Layout.
		{name: "overlap", file: build(obj(okA, ent("b", "F32", "[2]", 4, 12)), z(12)), want: ErrOverlap, mention: `"b"`},
		{name: "same range", file: build(obj(okA, ent("b", "F32", "[2]", 0, 8)), z(8)), want: ErrOverlap, mention: `"b"`},
		{name: "zero-size inside tensor", file: build(obj(okA, ent("b", "F32", "[0]", 4, 4)), z(8)), want: ErrOverlap, mention: `"b"`},
		{name: "hole between", file: build(obj(ent("a", "F32", "[1]", 0, 4), ent("b", "F32", "[1]", 8, 12)), z(12)), want: ErrHole, mention: `"b"`},
		{name: "hole at start", file: build(obj(ent("a", "F32", "[1]", 4, 8)), z(8)), want: ErrHole, mention: `"a"`},
		{name: "trailing bytes", file: build(obj(okA), z(9)), want: ErrHole, mention: `"a"`},
		{name: "data but no tensors", file: build(`{}`, z(1)), want: ErrHole},
		{name: "data but only metadata", file: build(`{"__metadata__":{}}`, z(4)), want: ErrHole},

		// Counts and names.
		{name: "too many tensors", file: build(obj(ent("a", "U8", "[1]", 0, 1), ent("b", "U8", "[1]", 1, 2), ent("c", "U8", "[1]", 2, 3)), z(3)), lim: Limits{MaxTensors: 2}, want: ErrTooManyTensors, mention: `"c"`},
		{name: "empty name", file: build(obj(ent("", "F32", "[2]", 0, 8)), z(8)), want: ErrEmptyName},
		{name: "duplicate name", file: build(obj(okA, okA), z(8)), want: ErrDuplicateName, mention: `"a"`},
		{name: "duplicate name via escape", file: build(obj(okA, `"\u0061":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`), z(8)), want: ErrDuplicateName, mention: `"a"`},

		// Metadata.
		{name: "metadata string", file: build(`{"__metadata__":"x"}`, nil), want: ErrInvalidMetadata},
		{name: "metadata null", file: build(`{"__metadata__":null}`, nil), want: ErrInvalidMetadata},
		{name: "metadata array", file: build(`{"__metadata__":["x"]}`, nil), want: ErrInvalidMetadata},
		{name: "metadata number value", file: build(`{"__metadata__":{"k":1}}`, nil), want: ErrInvalidMetadata, mention: `"k"`},
		{name: "metadata object value", file: build(`{"__metadata__":{"k":{}}}`, nil), want: ErrInvalidMetadata, mention: `"k"`},
		{name: "metadata null value", file: build(`{"__metadata__":{"k":null}}`, nil), want: ErrInvalidMetadata, mention: `"k"`},
		{name: "metadata duplicate key", file: build(`{"__metadata__":{"k":"1","k":"2"}}`, nil), want: ErrInvalidMetadata, mention: `"k"`},
		{name: "metadata twice", file: build(`{"__metadata__":{},"__metadata__":{}}`, nil), want: ErrInvalidMetadata},
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range badCases() {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseBytes(tc.file, tc.lim)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %q does not wrap %q", err, tc.want)
			}
			if tc.alsoWant != nil && !errors.Is(err, tc.alsoWant) {
				t.Fatalf("error %q does not wrap %q", err, tc.alsoWant)
			}
			if !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Fatalf("error %q lacks prefix", err)
			}
			if tc.mention != "" && !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("error %q does not mention %s", err, tc.mention)
			}
			for _, s := range allSentinels {
				if s != tc.want && errors.Is(err, s) {
					t.Fatalf("error %q also wraps %q", err, s)
				}
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	z := func(n int) []byte { return make([]byte, n) }
	cases := []struct {
		name  string
		file  []byte
		names []string // expected order
		meta  map[string]string
	}{
		{name: "empty", file: build(`{}`, nil)},
		{name: "empty padded", file: build(`{}      `, nil)},
		{name: "whitespace everywhere", file: build("{ \"a\" :\t{ \"dtype\" : \"F32\" ,\n\"shape\" : [ 2 ] , \"data_offsets\" : [ 0 , 8 ] } }\r\n", z(8)), names: []string{"a"}},
		{name: "any key order, sorted by offset", file: build(`{"b":{"data_offsets":[8,12],"shape":[],"dtype":"I32"},"a":{"shape":[2],"dtype":"F32","data_offsets":[0,8]}}`, z(12)), names: []string{"a", "b"}},
		{name: "zero-size tensors", file: build(obj(ent("z0", "F32", "[0]", 0, 0), ent("a", "F32", "[2]", 0, 8), ent("z1", "BF16", "[3,0]", 8, 8), ent("z2", "U8", "[0]", 8, 8)), z(8)), names: []string{"z0", "a", "z1", "z2"}},
		{name: "only zero-size", file: build(obj(ent("z", "F64", "[0,5]", 0, 0)), nil), names: []string{"z"}},
		{name: "metadata only", file: build(`{"__metadata__":{"format":"pt","":""}}`, nil), meta: map[string]string{"format": "pt", "": ""}},
		{name: "empty metadata", file: build(`{"__metadata__":{}}`, nil), meta: map[string]string{}},
		{name: "escaped names", file: build(obj(`"a\"b\\c\/d\u00e9\ud83d\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}`), z(1)), names: []string{"a\"b\\c/dé😀"}},
		{name: "unicode name", file: build(obj(ent("héllo.wörld", "BOOL", "[1]", 0, 1)), z(1)), names: []string{"héllo.wörld"}},
		{name: "rank 16", file: build(obj(ent("a", "U8", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", 0, 1)), z(1)), names: []string{"a"}},
		{name: "rust doc example", file: build(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`, z(16)), names: []string{"test"}},
		{name: "all dtypes", file: build(obj(
			ent("f64", "F64", "[1]", 0, 8), ent("f32", "F32", "[1]", 8, 12), ent("f16", "F16", "[1]", 12, 14), ent("bf16", "BF16", "[1]", 14, 16),
			ent("i64", "I64", "[1]", 16, 24), ent("i32", "I32", "[1]", 24, 28), ent("i16", "I16", "[1]", 28, 30), ent("i8", "I8", "[1]", 30, 31),
			ent("u64", "U64", "[1]", 31, 39), ent("u32", "U32", "[1]", 39, 43), ent("u16", "U16", "[1]", 43, 45), ent("u8", "U8", "[1]", 45, 46),
			ent("bool", "BOOL", "[1]", 46, 47), ent("e4m3", "F8_E4M3", "[1]", 47, 48), ent("e5m2", "F8_E5M2", "[1]", 48, 49),
		), z(49)), names: []string{"f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8", "bool", "e4m3", "e5m2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseBytes(tc.file, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ti := range f.Tensors {
				got = append(got, ti.Name)
			}
			if !reflect.DeepEqual(got, tc.names) {
				t.Fatalf("names %q, want %q", got, tc.names)
			}
			if !reflect.DeepEqual(f.Metadata, tc.meta) {
				t.Fatalf("metadata %#v, want %#v", f.Metadata, tc.meta)
			}
			checkConsistent(t, f, tc.file)
		})
	}
}

func TestDTypeSize(t *testing.T) {
	want := map[string]int{"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
		"U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
	for d, n := range want {
		if got, ok := DTypeSize(d); !ok || got != n {
			t.Errorf("DTypeSize(%q) = %d, %v; want %d", d, got, ok, n)
		}
	}
	for _, d := range []string{"", "f32", "F128", "C64", "float32"} {
		if _, ok := DTypeSize(d); ok {
			t.Errorf("DTypeSize(%q) known", d)
		}
	}
}

func TestDefaultLimits(t *testing.T) {
	d := DefaultLimits()
	if d.MaxHeaderBytes != 100<<20 || d.MaxTensors != 1<<20 || d.MaxRank != 16 {
		t.Fatalf("DefaultLimits() = %+v", d)
	}
	if got := (Limits{}).withDefaults(); got != d {
		t.Fatalf("zero Limits -> %+v", got)
	}
	if got := (Limits{MaxRank: 3}).withDefaults(); got.MaxRank != 3 || got.MaxTensors != d.MaxTensors {
		t.Fatalf("partial Limits -> %+v", got)
	}
}

// pythonLayout is a file byte-for-byte as safetensors' Rust serializer (used
// by the Python package) lays it out for
//
//	save_file({"weight": f32 2x2, "bias": f16 [2]}, path, metadata={"format": "pt"})
//
// tensors sorted by descending dtype alignment then name, "__metadata__"
// first, compact JSON, header padded with spaces to a multiple of 8.
func pythonLayout() []byte {
	b := []byte{0x98, 0, 0, 0, 0, 0, 0, 0} // N = 152
	b = append(b, `{"__metadata__":{"format":"pt"},"weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"bias":{"dtype":"F16","shape":[2],"data_offsets":[16,20]}} `...)
	// weight = [1, 2, 3, 4] float32 LE
	b = append(b, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80, 0x40)
	// bias = [1, -2] float16 LE
	b = append(b, 0x00, 0x3c, 0x00, 0xc0)
	return b
}

func TestPythonLayout(t *testing.T) {
	file := pythonLayout()
	if len(file) != 8+152+20 {
		t.Fatalf("test bytes are %d long", len(file))
	}
	f, err := parseBytes(file, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if f.DataOffset != 160 {
		t.Fatalf("DataOffset %d", f.DataOffset)
	}
	if !reflect.DeepEqual(f.Metadata, map[string]string{"format": "pt"}) {
		t.Fatalf("metadata %v", f.Metadata)
	}
	want := []TensorInfo{
		{Name: "weight", DType: "F32", Shape: []uint64{2, 2}, Begin: 0, End: 16},
		{Name: "bias", DType: "F16", Shape: []uint64{2}, Begin: 16, End: 20},
	}
	if !reflect.DeepEqual(f.Tensors, want) {
		t.Fatalf("tensors %+v", f.Tensors)
	}
	r := bytes.NewReader(file)
	w, err := f.ReadTensor(r, f.Tensors[0])
	if err != nil || !bytes.Equal(w, file[160:176]) {
		t.Fatalf("weight %x, %v", w, err)
	}
	bias, ok := f.Lookup("bias")
	if !ok {
		t.Fatal("Lookup(bias) failed")
	}
	bb, err := f.ReadTensor(r, bias)
	if err != nil || !bytes.Equal(bb, []byte{0x00, 0x3c, 0x00, 0xc0}) {
		t.Fatalf("bias %x, %v", bb, err)
	}

	// Our writer, given the same order, produces the identical bytes.
	var buf bytes.Buffer
	err = Write(&buf, []Tensor{
		{Name: "weight", DType: "F32", Shape: []uint64{2, 2}, Data: w},
		{Name: "bias", DType: "F16", Shape: []uint64{2}, Data: bb},
	}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), file) {
		t.Fatalf("Write output differs:\n got %q\nwant %q", buf.Bytes(), file)
	}
}

func sampleTensors() []Tensor {
	seq := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + n)
		}
		return b
	}
	return []Tensor{
		{Name: "model.embed.weight", DType: "BF16", Shape: []uint64{3, 4}, Data: seq(24)},
		{Name: "model.layers.0.scale", DType: "F32", Shape: []uint64{}, Data: seq(4)},
		{Name: "empty", DType: "F64", Shape: []uint64{0, 7}, Data: nil},
		{Name: "ids", DType: "I64", Shape: []uint64{2}, Data: seq(16)},
		{Name: "mask", DType: "BOOL", Shape: []uint64{5}, Data: []byte{1, 0, 1, 1, 0}},
		{Name: "q\"uote\\d<>&\u2028", DType: "F8_E4M3", Shape: []uint64{1, 1, 3}, Data: seq(3)},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, meta := range []map[string]string{nil, {}, {"format": "pt", "note": "line\nbreak \"quoted\" ünïcode", "": "empty key"}} {
		tensors := sampleTensors()
		var buf bytes.Buffer
		if err := Write(&buf, tensors, meta); err != nil {
			t.Fatal(err)
		}
		file := buf.Bytes()
		n := binary.LittleEndian.Uint64(file)
		if n%8 != 0 || !json.Valid(file[8:8+n]) {
			t.Fatalf("header length %d not 8-aligned or invalid JSON: %q", n, file[8:8+n])
		}
		f, err := parseBytes(file, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		checkConsistent(t, f, file)
		if len(meta) == 0 {
			if f.Metadata != nil {
				t.Fatalf("metadata %v, want nil", f.Metadata)
			}
		} else if !reflect.DeepEqual(f.Metadata, meta) {
			t.Fatalf("metadata %v, want %v", f.Metadata, meta)
		}
		if f.DataOffset != 8+int64(n) {
			t.Fatalf("DataOffset %d", f.DataOffset)
		}
		if len(f.Tensors) != len(tensors) {
			t.Fatalf("%d tensors", len(f.Tensors))
		}
		// Zero-size tensors tie on Begin; compare by name.
		for _, want := range tensors {
			got, ok := f.Lookup(want.Name)
			if !ok {
				t.Fatalf("tensor %q missing", want.Name)
			}
			if got.DType != want.DType || !reflect.DeepEqual(got.Shape, want.Shape) || got.Size() != int64(len(want.Data)) {
				t.Fatalf("tensor %+v, want %+v", got, want)
			}
			data, err := f.ReadTensor(bytes.NewReader(file), got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, want.Data) {
				t.Fatalf("tensor %q data %x, want %x", want.Name, data, want.Data)
			}
		}
		// Write order is data order.
		var off int64
		for _, want := range tensors {
			got, _ := f.Lookup(want.Name)
			if got.Begin != off {
				t.Fatalf("tensor %q at %d, want %d", want.Name, got.Begin, off)
			}
			off = got.End
		}
	}
}

func TestWriteRejects(t *testing.T) {
	ok := Tensor{Name: "a", DType: "F32", Shape: []uint64{2}, Data: make([]byte, 8)}
	cases := []struct {
		name    string
		tensors []Tensor
		meta    map[string]string
		want    error
	}{
		{"empty name", []Tensor{{Name: "", DType: "U8", Shape: []uint64{1}, Data: []byte{1}}}, nil, ErrEmptyName},
		{"reserved name", []Tensor{{Name: "__metadata__", DType: "U8", Shape: []uint64{1}, Data: []byte{1}}}, nil, ErrInvalidName},
		{"invalid utf8 name", []Tensor{{Name: "a\xff", DType: "U8", Shape: []uint64{1}, Data: []byte{1}}}, nil, ErrInvalidName},
		{"duplicate name", []Tensor{ok, ok}, nil, ErrDuplicateName},
		{"unknown dtype", []Tensor{{Name: "a", DType: "F128", Shape: []uint64{1}, Data: make([]byte, 16)}}, nil, ErrUnknownDType},
		{"short data", []Tensor{{Name: "a", DType: "F32", Shape: []uint64{2}, Data: make([]byte, 7)}}, nil, ErrSizeMismatch},
		{"long data", []Tensor{ok, {Name: "b", DType: "F16", Shape: []uint64{2}, Data: make([]byte, 5)}}, nil, ErrSizeMismatch},
		{"scalar without data", []Tensor{{Name: "a", DType: "F32"}}, nil, ErrSizeMismatch},
		{"shape overflow", []Tensor{{Name: "a", DType: "U8", Shape: []uint64{1 << 32, 1 << 32}}}, nil, ErrShapeOverflow},
		{"invalid utf8 metadata", []Tensor{ok}, map[string]string{"k": "\xff"}, ErrInvalidMetadata},
		{"invalid utf8 metadata key", []Tensor{ok}, map[string]string{"\xfe": "v"}, ErrInvalidMetadata},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tc.tensors, tc.meta)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Fatalf("error %q lacks prefix", err)
			}
			if buf.Len() != 0 {
				t.Fatalf("wrote %d bytes despite error", buf.Len())
			}
		})
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func TestWriteIOErrors(t *testing.T) {
	ts := sampleTensors()
	for after := 0; after < 3; after++ {
		if err := Write(&failWriter{after: after}, ts, nil); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("after %d: error %v", after, err)
		}
	}
	if err := Write(shortWriter{}, ts, nil); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("short write: %v", err)
	}
}

// eofReaderAt returns io.EOF together with a full read at the end of data,
// which io.ReaderAt permits.
type eofReaderAt struct{ b []byte }

func (r eofReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r.b)) {
		return 0, io.EOF
	}
	n := copy(p, r.b[off:])
	if off+int64(n) == int64(len(r.b)) {
		return n, io.EOF
	}
	return n, nil
}

type errReaderAt struct{}

func (errReaderAt) ReadAt(p []byte, off int64) (int, error) { return 0, errors.New("boom") }

// guardReaderAt fails the test on any read larger than max.
type guardReaderAt struct {
	t   *testing.T
	r   io.ReaderAt
	max int
}

func (g guardReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if len(p) > g.max {
		g.t.Fatalf("ReadAt of %d bytes (max %d)", len(p), g.max)
	}
	return g.r.ReadAt(p, off)
}

func TestReaderBehaviour(t *testing.T) {
	file := pythonLayout()

	// Full read + io.EOF is success.
	f, err := Parse(eofReaderAt{file}, int64(len(file)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadTensor(eofReaderAt{file}, f.Tensors[1]); err != nil {
		t.Fatal(err)
	}

	// The size argument lies: header parses, tensor read is truncated.
	short := file[:len(file)-3]
	f, err = Parse(bytes.NewReader(short), int64(len(file)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadTensor(bytes.NewReader(short), f.Tensors[1]); !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated tensor read: %v", err)
	}
	if _, err := Parse(bytes.NewReader(file[:100]), int64(len(file)), Limits{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated header read: %v", err)
	}

	// Reader errors are propagated.
	if _, err := Parse(errReaderAt{}, 100, Limits{}); err == nil || !strings.Contains(err.Error(), "boom") || !strings.HasPrefix(err.Error(), "safetensors: ") {
		t.Fatalf("reader error: %v", err)
	}

	// A lying header length is rejected before any large read/allocation.
	huge := buildN(90<<20, "{}")
	if _, err := Parse(guardReaderAt{t, bytes.NewReader(huge), 8}, int64(len(huge)), Limits{}); !errors.Is(err, ErrTruncated) {
		t.Fatalf("lying header length: %v", err)
	}
	if _, err := Parse(guardReaderAt{t, bytes.NewReader(huge), 8}, 1<<40, Limits{MaxHeaderBytes: 1 << 20}); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("capped header length: %v", err)
	}
	if _, err := Parse(bytes.NewReader(nil), -1, Limits{}); !errors.Is(err, ErrTruncated) {
		t.Fatalf("negative size: %v", err)
	}
}

func TestReadTensorValidates(t *testing.T) {
	file := pythonLayout()
	f, err := parseBytes(file, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(file)
	w := f.Tensors[0]
	cases := []struct {
		name string
		mod  func(*TensorInfo)
		want error
	}{
		{"beyond buffer", func(t *TensorInfo) { t.Begin, t.End = 16, 32 }, ErrInvalidOffsets},
		{"huge", func(t *TensorInfo) { t.Shape = []uint64{1 << 40}; t.Begin, t.End = 0, 4<<40 }, ErrInvalidOffsets},
		{"negative", func(t *TensorInfo) { t.Begin, t.End = -16, 0 }, ErrInvalidOffsets},
		{"reversed", func(t *TensorInfo) { t.Begin, t.End = 16, 0 }, ErrInvalidOffsets},
		{"size mismatch", func(t *TensorInfo) { t.Shape = []uint64{3} }, ErrSizeMismatch},
		{"unknown dtype", func(t *TensorInfo) { t.DType = "X" }, ErrUnknownDType},
	}
	for _, tc := range cases {
		ti := w
		ti.Shape = append([]uint64(nil), w.Shape...)
		tc.mod(&ti)
		if _, err := f.ReadTensor(r, ti); !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
	}
	// A hand-made File (no Parse bounds) still validates and reads.
	hand := &File{DataOffset: 160}
	if got, err := hand.ReadTensor(r, w); err != nil || !bytes.Equal(got, file[160:176]) {
		t.Fatalf("hand-made File: %x %v", got, err)
	}
	if _, err := hand.ReadTensor(r, TensorInfo{Name: "x", DType: "U8", Shape: []uint64{100}, Begin: 0, End: 100}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("hand-made File past EOF: %v", err)
	}
	if _, ok := f.Lookup("nope"); ok {
		t.Fatal("Lookup(nope) succeeded")
	}
}

// testdataFiles are the fuzz seed files, regenerated with -update.
func testdataFiles(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	add := func(name string, tensors []Tensor, meta map[string]string) {
		var buf bytes.Buffer
		if err := Write(&buf, tensors, meta); err != nil {
			t.Fatal(err)
		}
		out[name] = buf.Bytes()
	}
	add("empty.safetensors", nil, nil)
	add("small.safetensors", []Tensor{
		{Name: "w", DType: "F32", Shape: []uint64{2, 2}, Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40}},
		{Name: "b", DType: "F16", Shape: []uint64{2}, Data: []byte{0, 0x3c, 0, 0xc0}},
	}, map[string]string{"format": "pt"})
	add("mixed.safetensors", sampleTensors(), map[string]string{"format": "gym", "k": "v"})
	out["python_layout.safetensors"] = pythonLayout()
	return out
}

func TestTestdata(t *testing.T) {
	for name, want := range testdataFiles(t) {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestTestdata -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s is stale (run go test -run TestTestdata -update)", path)
		}
		f, err := parseBytes(got, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		checkConsistent(t, f, got)
	}
}

// checkConsistent asserts every invariant a successfully parsed file must
// satisfy, cross-checking the header against encoding/json.
func checkConsistent(t testing.TB, f *File, file []byte) {
	t.Helper()
	if len(file) < 8 {
		t.Fatalf("parsed a %d-byte file", len(file))
	}
	n := binary.LittleEndian.Uint64(file)
	if f.DataOffset != 8+int64(n) || f.DataOffset > int64(len(file)) {
		t.Fatalf("DataOffset %d, N %d, file %d", f.DataOffset, n, len(file))
	}
	header := file[8:f.DataOffset]
	if len(header) == 0 || header[0] != '{' || !json.Valid(header) {
		t.Fatalf("accepted invalid header %q", header)
	}
	dataLen := int64(len(file)) - f.DataOffset

	// Offsets tile the data buffer exactly.
	var pos int64
	for i, ti := range f.Tensors {
		if ti.Name == "" {
			t.Fatalf("empty name accepted")
		}
		if ti.Begin != pos || ti.End < ti.Begin || ti.Size() != ti.End-ti.Begin {
			t.Fatalf("tensor %d %+v: bad offsets (pos %d)", i, ti, pos)
		}
		if i > 0 && (f.Tensors[i-1].Begin > ti.Begin) {
			t.Fatalf("tensors not sorted")
		}
		esize, ok := DTypeSize(ti.DType)
		if !ok {
			t.Fatalf("unknown dtype %q accepted", ti.DType)
		}
		numel, hi := uint64(1), uint64(0)
		for _, d := range ti.Shape {
			var h uint64
			h, numel = bits.Mul64(numel, d)
			hi |= h
		}
		h, nbytes := bits.Mul64(numel, uint64(esize))
		if hi|h != 0 || len(ti.Shape) > DefaultLimits().MaxRank || uint64(ti.Size()) != nbytes {
			t.Fatalf("tensor %+v: size %d inconsistent with shape", ti, ti.Size())
		}
		pos = ti.End
		got, ok := f.Lookup(ti.Name)
		if !ok || !reflect.DeepEqual(got, ti) {
			t.Fatalf("Lookup(%q) = %+v, %v", ti.Name, got, ok)
		}
		data, err := f.ReadTensor(bytes.NewReader(file), ti)
		if err != nil {
			t.Fatalf("ReadTensor(%q): %v", ti.Name, err)
		}
		if !bytes.Equal(data, file[f.DataOffset+ti.Begin:f.DataOffset+ti.End]) {
			t.Fatalf("ReadTensor(%q) returned wrong bytes", ti.Name)
		}
	}
	if pos != dataLen {
		t.Fatalf("tensors cover %d of %d data bytes", pos, dataLen)
	}

	// Differential check against encoding/json (duplicate keys were rejected,
	// so its last-wins behaviour cannot hide anything).
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		t.Fatalf("encoding/json rejects accepted header: %v", err)
	}
	wantLen := len(f.Tensors)
	if f.Metadata != nil {
		wantLen++
		var m map[string]string
		if err := json.Unmarshal(raw[metadataKey], &m); err != nil || !reflect.DeepEqual(m, f.Metadata) {
			t.Fatalf("metadata %v, encoding/json says %v (%v)", f.Metadata, m, err)
		}
	} else if _, ok := raw[metadataKey]; ok {
		t.Fatalf("__metadata__ present but Metadata nil")
	}
	if len(raw) != wantLen {
		t.Fatalf("encoding/json sees %d keys, we have %d", len(raw), wantLen)
	}
	for _, ti := range f.Tensors {
		var e struct {
			DType       string   `json:"dtype"`
			Shape       []uint64 `json:"shape"`
			DataOffsets []int64  `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw[ti.Name], &e); err != nil {
			t.Fatalf("encoding/json on %q: %v", ti.Name, err)
		}
		if e.DType != ti.DType || len(e.Shape) != len(ti.Shape) || (len(e.Shape) > 0 && !reflect.DeepEqual(e.Shape, ti.Shape)) ||
			len(e.DataOffsets) != 2 || e.DataOffsets[0] != ti.Begin || e.DataOffsets[1] != ti.End {
			t.Fatalf("tensor %+v, encoding/json says %+v", ti, e)
		}
	}

	// Re-writing the parsed file yields a file that parses to the same thing.
	tensors := make([]Tensor, len(f.Tensors))
	for i, ti := range f.Tensors {
		tensors[i] = Tensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: file[f.DataOffset+ti.Begin : f.DataOffset+ti.End]}
	}
	var buf bytes.Buffer
	if err := Write(&buf, tensors, f.Metadata); err != nil {
		t.Fatalf("re-Write: %v", err)
	}
	g, err := parseBytes(buf.Bytes(), Limits{})
	if err != nil {
		t.Fatalf("re-Parse: %v", err)
	}
	if !reflect.DeepEqual(g.Tensors, f.Tensors) {
		t.Fatalf("re-parsed tensors %+v, want %+v", g.Tensors, f.Tensors)
	}
	if len(f.Metadata) > 0 && !reflect.DeepEqual(g.Metadata, f.Metadata) || len(f.Metadata) == 0 && g.Metadata != nil {
		t.Fatalf("re-parsed metadata %v, want %v", g.Metadata, f.Metadata)
	}
	if !bytes.Equal(buf.Bytes()[g.DataOffset:], file[f.DataOffset:]) {
		t.Fatalf("re-written data buffer differs")
	}
}

func FuzzParse(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	seeds := 0
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".safetensors" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		seeds++
	}
	if seeds == 0 {
		f.Fatal("no seed files in testdata/")
	}
	for _, tc := range badCases() {
		f.Add(tc.file)
	}
	// Names and shapes refused since the hostile-input review.
	f.Add(build(obj(`"../a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}`), []byte{0}))
	f.Add(build(obj(`"a\u0000b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}`), []byte{0}))
	f.Add(build(obj(ent("a", "F32", "[0,18446744073709551615,18446744073709551615]", 0, 0)), nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(bytes.NewReader(data), int64(len(data)), Limits{MaxTensors: 256})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Fatalf("error %q lacks prefix", err)
			}
			matched := 0
			for _, s := range allSentinels {
				if errors.Is(err, s) {
					matched++
				}
			}
			if matched != 1 {
				t.Fatalf("error %q wraps %d sentinels", err, matched)
			}
			return
		}
		checkConsistent(t, file, data)
	})
}

func BenchmarkParse(b *testing.B) {
	tensors := make([]Tensor, 10000)
	for i := range tensors {
		tensors[i] = Tensor{Name: fmt.Sprintf("model.layers.%d.weight", i), DType: "F16", Shape: []uint64{2, 2}, Data: make([]byte, 8)}
	}
	var buf bytes.Buffer
	if err := Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		b.Fatal(err)
	}
	file := buf.Bytes()
	b.SetBytes(int64(binary.LittleEndian.Uint64(file)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseBytes(file, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
