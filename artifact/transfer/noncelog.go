package transfer

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/zooai/gym/internal/atomicfile"
)

// maxNonceLog bounds what OpenNonceLog reads.
const maxNonceLog = 256 << 20

// NonceLog keeps a Guard's spent nonces on disk so that an authorization
// accepted before a restart cannot be replayed after it. Each accepted
// nonce is appended as one line "NONCEHEX EXPIRY\n" before the reply is
// sent; the file is compacted (expired nonces dropped) when it is opened
// and whenever it has grown to twice its live entries.
type NonceLog struct {
	path  string
	guard *Guard
	now   func() time.Time

	mu    sync.Mutex
	f     *os.File
	lines int
	live  int
}

// OpenNonceLog loads path (if it exists) into g, dropping expired and
// malformed lines (a torn last line after a crash), rewrites it compacted,
// and opens it for appending.
func OpenNonceLog(path string, g *Guard, now func() time.Time) (*NonceLog, error) {
	if now == nil {
		now = time.Now
	}
	l := &NonceLog{path: path, guard: g, now: now}
	if err := l.load(); err != nil {
		return nil, err
	}
	if err := l.compact(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *NonceLog) load() error {
	f, err := os.OpenFile(l.path, os.O_RDONLY|noFollowFlag, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Size() > maxNonceLog {
		return fmt.Errorf("transfer: %s is not a nonce log (%v, %d bytes)", l.path, st.Mode().Type(), st.Size())
	}
	t := l.now().Unix()
	sc := bufio.NewScanner(io.LimitReader(f, maxNonceLog))
	for sc.Scan() {
		nonce, exp, ok := parseNonceLine(sc.Bytes())
		if ok && exp > t {
			l.guard.Restore(nonce, exp)
		}
	}
	return sc.Err()
}

func parseNonceLine(b []byte) (string, int64, bool) {
	n, e, ok := bytes.Cut(b, []byte{' '})
	if !ok || len(n) != 32 {
		return "", 0, false
	}
	if _, err := hex.DecodeString(string(n)); err != nil {
		return "", 0, false
	}
	exp, err := strconv.ParseInt(string(e), 10, 64)
	if err != nil {
		return "", 0, false
	}
	return string(n), exp, true
}

// compact rewrites the log with the guard's live nonces, atomically.
func (l *NonceLog) compact() error {
	live := l.guard.live(l.now())
	var buf bytes.Buffer
	for n, exp := range live {
		fmt.Fprintf(&buf, "%s %d\n", n, exp)
	}
	if err := atomicfile.WriteBytes(l.path, 0o600, true, buf.Bytes()); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|noFollowFlag, 0o600)
	if err != nil {
		return err
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.lines, l.live = f, len(live), len(live)
	return nil
}

// Append records a spent nonce. The write reaches the kernel before Append
// returns (a process restart keeps it; a machine crash within the nonce's
// lifetime may not).
func (l *NonceLog) Append(nonce string, exp int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := fmt.Fprintf(l.f, "%s %d\n", nonce, exp); err != nil {
		return err
	}
	l.lines++
	l.live++
	if l.lines > 2*max(l.live, 1<<16) {
		l.live = len(l.guard.live(l.now()))
		if l.lines > 2*max(l.live, 1<<16) {
			return l.compact()
		}
	}
	return nil
}

// Close closes the file.
func (l *NonceLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
