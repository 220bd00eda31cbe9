package transfer

import (
	"testing"
	"time"

	"github.com/ipfs/go-cid"
)

func FuzzParseAuthorization(f *testing.F) {
	root, _ := cid.Decode("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
	h, _ := NewAuthorization(fetcherKey, pub(key(1)), root, now, time.Minute)
	f.Add(h)
	f.Add("Gym-Artifact e30.AAAA")
	f.Add("Gym-Artifact .")
	f.Add("Bearer x")
	g := NewGuard(pub(key(1)), AllowKeys(pub(fetcherKey)), 1<<10)
	f.Fuzz(func(t *testing.T, header string) {
		a, iss, err := ParseAuthorization(header)
		if err != nil {
			return
		}
		if a.Format != 1 || len(iss) != 32 || len(a.Nonce) != 32 {
			t.Fatalf("accepted %+v", a)
		}
		// A parsed header goes through the guard at most once.
		spent := g.Spent()
		if _, err := g.Check(header, root, now); err == nil {
			if _, err := g.Check(header, root, now); err == nil {
				t.Fatal("the same authorization passed twice")
			}
		} else if g.Spent() != spent {
			t.Fatal("a refused authorization changed the guard")
		}
	})
}

func FuzzParsePeer(f *testing.F) {
	f.Add("127.0.0.1:80")
	f.Add("a2f9440644fe4a7e16201177c994bf0673ad4f4c60e7fdee5adb83963b37aa39@h:1")
	f.Add("http://x/")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePeer(s)
		if err != nil {
			return
		}
		if p.Key != nil && len(p.Key) != 32 {
			t.Fatalf("key of %d bytes", len(p.Key))
		}
	})
}
