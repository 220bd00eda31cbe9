package jobspec_test

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/zooai/gym/protocol/jobspec"
)

func TestSlotString(t *testing.T) {
	for _, tc := range []struct {
		s    jobspec.Slot
		want string
	}{
		{jobspec.Slot{Epoch: 1, Step: 50, Node: "a"}, "1/50/a"},
		{jobspec.Slot{Epoch: 0, Step: 0, Node: "n"}, "0/0/n"},
		{jobspec.Slot{Epoch: 12, Step: math.MaxUint64, Node: "ab/cd"}, "12/18446744073709551615/ab/cd"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
		back, err := jobspec.ParseSlot(tc.want)
		if err != nil || back != tc.s {
			t.Errorf("ParseSlot(%q) = %+v, %v; want %+v", tc.want, back, err, tc.s)
		}
	}
}

func TestParseSlotRefuses(t *testing.T) {
	for _, in := range []string{
		"", "1", "1/2", "1/2/", "/2/a", "1//a", "01/2/a", "1/02/a", "+1/2/a", "-1/2/a", "1/-2/a", " 1/2/a", "1/2 /a",
		"1/18446744073709551616/a", "99999999999999999999/1/a", "1e3/2/a", "0x1/2/a", "١/2/a",
	} {
		if s, err := jobspec.ParseSlot(in); err == nil || !errors.Is(err, jobspec.ErrSlot) {
			t.Errorf("ParseSlot(%q) = %+v, %v; want ErrSlot", in, s, err)
		}
	}
}

// A map keyed by Slot encodes to JSON exactly as the map[string]string
// of "epoch/step/node" keys it replaced (encoding/json sorts by the
// text), and reads back.
func TestSlotJSONKeys(t *testing.T) {
	typed := map[jobspec.Slot]string{}
	plain := map[string]string{}
	for e := range 3 {
		for _, st := range []uint64{5, 50, 100, 1000} {
			for _, n := range []string{"b", "a", "ab"} {
				s := jobspec.Slot{Epoch: e, Step: st, Node: n}
				d := strconv.Itoa(e) + n
				typed[s] = d
				plain[strconv.Itoa(e)+"/"+strconv.FormatUint(st, 10)+"/"+n] = d
			}
		}
	}
	got, err := json.Marshal(typed)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(plain)
	if string(got) != string(want) {
		t.Fatalf("encoding differs:\n got %s\nwant %s", got, want)
	}
	var back map[jobspec.Slot]string
	if err := json.Unmarshal(got, &back); err != nil || len(back) != len(typed) {
		t.Fatalf("decode: %v, %d keys", err, len(back))
	}
	for k, v := range typed {
		if back[k] != v {
			t.Fatalf("decode: %v → %q, want %q", k, back[k], v)
		}
	}
	if err := json.Unmarshal([]byte(`{"1/05/a":"x"}`), &back); !errors.Is(err, jobspec.ErrSlot) {
		t.Fatalf("non-canonical key: %v", err)
	}
	if _, err := json.Marshal(map[jobspec.Slot]string{{Epoch: 1}: "x"}); err == nil {
		t.Fatal("a slot without a node encoded")
	}
}

// FuzzParseSlot: what ParseSlot accepts is exactly what String writes.
func FuzzParseSlot(f *testing.F) {
	for _, s := range []string{"1/50/a", "0/0/n", "12/18446744073709551615/ab/cd", "01/2/a", "1//a", "-1/2/a", "1/2/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := jobspec.ParseSlot(in)
		if err != nil {
			if !errors.Is(err, jobspec.ErrSlot) {
				t.Fatalf("%q: %v is not ErrSlot", in, err)
			}
			return
		}
		if s.String() != in {
			t.Fatalf("%q parsed as %+v, which writes %q", in, s, s.String())
		}
		if s.Epoch < 0 || s.Node == "" {
			t.Fatalf("%q: accepted %+v", in, s)
		}
		b, err := s.MarshalText()
		if err != nil || string(b) != in {
			t.Fatalf("%q: MarshalText %q %v", in, b, err)
		}
	})
}
