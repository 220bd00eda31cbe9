package ring

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/zooai/gym/edkey"
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
type Config struct {
	Job        string
	Epoch      uint64
	Generation uint64
	Members    []Member
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
	return nil
}

// ID returns the configuration id.
func (c *Config) ID() ID {
	h := sha256.New()
	var b [8]byte
	put := func(s []byte) {
		binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
		h.Write(b[:])
		h.Write(s)
	}
	put([]byte(configTag))
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
func (c *Config) Without(i int) Config {
	out := Config{Job: c.Job, Epoch: c.Epoch, Generation: c.Generation + 1, Members: make([]Member, 0, len(c.Members))}
	for j, m := range c.Members {
		if j != i {
			out.Members = append(out.Members, m)
		}
	}
	return out
}
