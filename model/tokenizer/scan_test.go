package tokenizer

import (
	"encoding/json"
	"testing"
)

// TestUnescapeMatchesEncodingJSON compares the string scanner with
// encoding/json on escapes (lone surrogates, which encoding/json replaces
// and serde_json refuses, are refused).
func TestUnescapeMatchesEncodingJSON(t *testing.T) {
	for _, lit := range []string{`"plain"`, `"a\"b"`, `"\\\/"`, `"\b\f\n\r\t"`, `"\u003c\u00e9\u4e2d"`,
		`"\ud83d\ude00"`, `"x\u0000y"`, `"Ġ\u0120"`} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatal(err)
		}
		sc := &scanner{b: []byte(lit)}
		got, err := sc.str()
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", lit, got, err, want)
		}
	}
	for _, lit := range []string{`"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\q"`, `"\u12"`, `"abc`, "\"a\x01\""} {
		sc := &scanner{b: []byte(lit)}
		if got, err := sc.str(); err == nil {
			t.Errorf("%s: accepted as %q", lit, got)
		}
	}
}
