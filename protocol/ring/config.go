package ring

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/zooai/gym/keys/edkey"
)

// ErrConfig is wrapped by every error about a ring configuration.
var ErrConfig = errors.New("ring: bad configuration")

// maxMembers bounds a ring; indices travel as u32 but nothing real needs more.
const maxMembers = 1 << 16

// Member is one node of the ring.
type Member struct {
	ID        string            // node id, unique in the ring
	PublicKey ed25519.PublicKey // 32 bytes, unique in the ring
	Addr      string            // where its transport listens (host:port for tcp)
}

// Config is a ring configuration: the members in ring order (member i sends
// to member i+1 mod N), the job, the epoch and the orchestrator's
// generation. The orchestrator publishes a new Config (a new ID) whenever
// the membership changes, and also when it re-syncs the same members after
// a failed call: the generation is what tells that configuration from the
// failed one, whose frames and half-open links may still be in flight and
// must not be taken for the new call's.
//
// Groups, when it has two or more entries, asks for the two-level
// all-reduce (docs/ring.md, "Two-level all-reduce"): the members, in
// order, form len(Groups) groups of Groups[k] consecutive members (each
// ≥ 1, summing to the members). A call then reduce-scatters inside every
// group, all-reduces each shard across the groups and all-gathers inside
// every group, over sub-rings whose configurations (GroupRing, ShardRing)
// are derived from this one. Empty: one flat ring.
//
// Parent and Part identify such a sub-ring ("group K", "shard S"); they
// are set by GroupRing and ShardRing, never by callers.
type Config struct {
	Job        string
	Epoch      uint64
	Generation uint64
	Members    []Member
	Groups     []int  `json:",omitempty"`
	Parent     ID     `json:"-"`
	Part       string `json:"-"`
}

// ID identifies a configuration: SHA-256 over a domain tag, the job, the
// epoch, the generation and every member's id, key and address in order.
type ID [32]byte

func (id ID) String() string { return hex.EncodeToString(id[:8]) }

// Validate checks that c is usable: at least one member, unique ids and
// keys, well-formed keys.
func (c *Config) Validate() error {
	n := len(c.Members)
	if n == 0 {
		return fmt.Errorf("%w: no members", ErrConfig)
	}
	if n > maxMembers {
		return fmt.Errorf("%w: %d members, at most %d", ErrConfig, n, maxMembers)
	}
	ids := make(map[string]bool, n)
	keys := make(map[string]bool, n)
	for i, m := range c.Members {
		if m.ID == "" {
			return fmt.Errorf("%w: member %d has no id", ErrConfig, i)
		}
		if len(m.PublicKey) != ed25519.PublicKeySize {
			return fmt.Errorf("%w: member %d (%s) has a %d-byte key, want %d", ErrConfig, i, m.ID, len(m.PublicKey), ed25519.PublicKeySize)
		}
		if err := edkey.CheckPublicKey(m.PublicKey); err != nil {
			return fmt.Errorf("%w: member %d (%s): key %s", ErrConfig, i, m.ID, edkey.Reason(err))
		}
		if ids[m.ID] {
			return fmt.Errorf("%w: duplicate member id %q", ErrConfig, m.ID)
		}
		if keys[string(m.PublicKey)] {
			return fmt.Errorf("%w: duplicate public key (member %q)", ErrConfig, m.ID)
		}
		ids[m.ID], keys[string(m.PublicKey)] = true, true
	}
	if len(c.Groups) == 1 {
		return fmt.Errorf("%w: one group (leave Groups empty for a flat ring)", ErrConfig)
	}
	if len(c.Groups) > 0 {
		if c.Part != "" {
			return fmt.Errorf("%w: a sub-ring cannot have groups", ErrConfig)
		}
		sum := 0
		for k, g := range c.Groups {
			if g < 1 || g > n {
				return fmt.Errorf("%w: group %d has %d members", ErrConfig, k, g)
			}
			sum += g
		}
		if sum != n {
			return fmt.Errorf("%w: groups hold %d members, the ring has %d", ErrConfig, sum, n)
		}
	}
	return nil
}

// TwoLevel reports whether c asks for the two-level all-reduce.
func (c *Config) TwoLevel() bool { return len(c.Groups) >= 2 }

// ID returns the configuration id.
func (c *Config) ID() ID {
	h := sha256.New()
	var b [8]byte
	put := func(s []byte) {
		binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
		h.Write(b[:])
		h.Write(s)
	}
	switch {
	case c.Part != "":
		put([]byte(partTag))
		h.Write(c.Parent[:])
		put([]byte(c.Part))
	case len(c.Groups) > 0:
		put([]byte(twoLevelTag))
		binary.LittleEndian.PutUint64(b[:], uint64(len(c.Groups)))
		h.Write(b[:])
		for _, g := range c.Groups {
			binary.LittleEndian.PutUint64(b[:], uint64(g))
			h.Write(b[:])
		}
	default:
		put([]byte(configTag))
	}
	put([]byte(c.Job))
	binary.LittleEndian.PutUint64(b[:], c.Epoch)
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], c.Generation)
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], uint64(len(c.Members)))
	h.Write(b[:])
	for _, m := range c.Members {
		put([]byte(m.ID))
		put(m.PublicKey)
		put([]byte(m.Addr))
	}
	var id ID
	h.Sum(id[:0])
	return id
}

// Index returns the position of the member with public key pub, or -1.
func (c *Config) Index(pub ed25519.PublicKey) int {
	for i, m := range c.Members {
		if bytes.Equal(m.PublicKey, pub) {
			return i
		}
	}
	return -1
}

// Without returns a copy of c with the member at index i removed: its
// predecessor is linked to its successor, and the generation is the next.
// In a two-level configuration only its group shrinks (a group left empty
// goes; a single group left makes the ring flat).
func (c *Config) Without(i int) Config {
	out := Config{Job: c.Job, Epoch: c.Epoch, Generation: c.Generation + 1, Members: make([]Member, 0, len(c.Members))}
	for j, m := range c.Members {
		if j != i {
			out.Members = append(out.Members, m)
		}
	}
	if len(c.Groups) > 0 {
		start := 0
		for _, g := range c.Groups {
			ng := g
			if i >= start && i < start+g {
				ng--
			}
			start += g
			if ng > 0 {
				out.Groups = append(out.Groups, ng)
			}
		}
		if i < 0 || i >= start { // no member removed: the groups stay
			out.Groups = slices.Clone(c.Groups)
		}
		if len(out.Groups) < 2 {
			out.Groups = nil
		}
	}
	return out
}
