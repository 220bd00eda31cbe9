package transfer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
)

// ErrExhausted is a block that every source failed to deliver intact.
var ErrExhausted = errors.New("transfer: no source delivered the block")

// FetchConfig configures Fetch.
type FetchConfig struct {
	Sources []Source
	// Workers, if positive, fixes the number of requests in flight per
	// source. If 0 the number adapts per source (see window): it starts at
	// MinInFlight and follows 1.5 × the source's bandwidth-delay product
	// as measured, up to MaxInFlight, and halves on a failure. One request is one block, so a
	// long fat link needs at least its bandwidth-delay product in flight
	// (1 Gbit/s × 40 ms = 5 MB = 20 blocks of 256 KiB).
	Workers int
	// MinInFlight and MaxInFlight bound the adaptive number of requests in
	// flight per source (16 and 64 if 0).
	MinInFlight, MaxInFlight int
	// TriesPerSource bounds how often one source is asked for one block
	// after transport errors (2 if 0). A corrupt block is never asked of the
	// same source again.
	TriesPerSource int
	// SourceStrikes is the number of consecutive failures after which a
	// source is dropped (3 if 0).
	SourceStrikes int
	// Progress, if set, is called from Fetch's goroutine after every block.
	Progress func(Progress)
	// Expected is the size of the artifact's files, if known (for Progress).
	Expected int64
	// BlockTimeout bounds one block request (30 s if 0): a source that
	// stops answering without closing its connections is a failure, not a
	// hang.
	BlockTimeout time.Duration
	// MaxBlocks bounds the distinct blocks of the DAG (4 Mi if 0, 1 TiB of
	// 256 KiB chunks): a hostile DAG cannot grow the fetch without end.
	MaxBlocks int
}

// Progress reports a fetch as it goes.
type Progress struct {
	Blocks, Fetched, Resumed int   // blocks known done; of them fetched now, held already
	Bytes                    int64 // bytes fetched now
	Expected                 int64 // bytes of the artifact's files, if known
	Corrupt                  int   // blocks discarded for a bad hash
	SourcesLeft              int
}

// Stats is the outcome of a fetch.
type Stats struct {
	Progress
	PerSource map[string]int // blocks delivered by each source
	InFlight  map[string]int // each source's requests in flight at the end
	Elapsed   time.Duration
}

type task struct {
	c     cid.Cid
	tries map[int]int // source index → attempts
}

type result struct {
	t     *task
	src   int
	data  []byte // nil for a raw leaf
	size  int64
	lat   time.Duration // request to reply
	err   error         // the source's failure
	local error         // dst's failure: ends the fetch
}

type source struct {
	Source
	in       chan *task
	inflight int
	strikes  int
	dead     bool
	win      *window
}

// Fetch brings every block of the DAG under root into dst, verifying each
// against its CID. Blocks dst already has are not fetched again, but dag-pb
// ones are read to learn their children. A block is asked of one source at
// a time; a transport failure moves it to another source, a corrupt block is
// discarded and asked of another source, and when every source has failed
// a block the fetch ends with ErrExhausted. An error from dst (such as the
// store's quota) ends the fetch at once.
func Fetch(ctx context.Context, root cid.Cid, dst artifact.Blocks, cfg FetchConfig) (st Stats, err error) {
	start := time.Now()
	var srcs []*source
	defer func() {
		st.Elapsed = time.Since(start)
		if len(srcs) > 0 {
			st.InFlight = map[string]int{}
			for _, s := range srcs {
				if s != nil {
					st.InFlight[s.Name()] = s.win.limit
				}
			}
		}
	}()
	if cfg.MinInFlight <= 0 {
		cfg.MinInFlight = 16
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 64
	}
	if cfg.Workers > 0 {
		cfg.MinInFlight, cfg.MaxInFlight = cfg.Workers, cfg.Workers
	}
	cfg.MaxInFlight = max(cfg.MaxInFlight, cfg.MinInFlight)
	if cfg.TriesPerSource <= 0 {
		cfg.TriesPerSource = 2
	}
	if cfg.SourceStrikes <= 0 {
		cfg.SourceStrikes = 3
	}
	if cfg.BlockTimeout <= 0 {
		cfg.BlockTimeout = 30 * time.Second
	}
	if cfg.MaxBlocks <= 0 {
		cfg.MaxBlocks = 4 << 20
	}
	if len(cfg.Sources) == 0 {
		return Stats{}, errors.New("transfer: no sources")
	}
	if err := artifact.CheckCID(root); err != nil {
		return Stats{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	srcs = make([]*source, len(cfg.Sources))
	// On return: stop the workers and wait for them, so that no block is
	// stored after Fetch has returned.
	defer func() {
		cancel()
		for _, s := range srcs {
			if s != nil {
				close(s.in)
			}
		}
		wg.Wait()
	}()

	results := make(chan result)
	for i, s := range cfg.Sources {
		srcs[i] = &source{Source: s, in: make(chan *task, cfg.MaxInFlight), win: newWindow(cfg.MinInFlight, cfg.MaxInFlight, start)}
		for range cfg.MaxInFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for t := range srcs[i].in {
					// The worker stores the block itself, so hashing and
					// writing run in parallel; dst.Put verifies the hash.
					var local error
					bctx, bcancel := context.WithTimeout(ctx, cfg.BlockTimeout)
					sent := time.Now()
					data, err := s.Block(bctx, root, t.c)
					lat := time.Since(sent)
					bcancel()
					if err != nil && ctx.Err() == nil && bctx.Err() != nil {
						err = fmt.Errorf("%w: no answer in %v", ErrSource, cfg.BlockTimeout)
					}
					if err == nil && ctx.Err() != nil {
						err = ctx.Err()
					}
					if err == nil {
						if perr := dst.Put(ctx, t.c, data); perr != nil {
							if errors.Is(perr, artifact.ErrHashMismatch) || errors.Is(perr, artifact.ErrTooLarge) || errors.Is(perr, artifact.ErrUnsupportedCID) {
								err = perr // the source's fault
							} else {
								local = perr
							}
						}
					}
					size := int64(len(data))
					if t.c.Type() == cid.Raw {
						data = nil // a leaf has no children: drop it early
					}
					select {
					case results <- result{t, i, data, size, lat, err, local}:
					case <-ctx.Done():
						return
					}
				}
			}()
		}
	}

	st = Stats{PerSource: map[string]int{}}
	st.SourcesLeft = len(srcs)
	st.Expected = cfg.Expected
	seen := map[string]bool{}
	var pending []*task
	inflight := 0

	// enqueue adds c, or, when dst holds it, walks on from the local copy.
	var enqueue func(c cid.Cid) error
	enqueue = func(c cid.Cid) error {
		k := string(c.Hash()) + string(rune(c.Type()))
		if seen[k] {
			return nil
		}
		seen[k] = true
		if len(seen) > cfg.MaxBlocks {
			return fmt.Errorf("%w: the DAG of %s has more than %d blocks", artifact.ErrTooLarge, root, cfg.MaxBlocks)
		}
		ok, err := dst.Has(ctx, c)
		if err != nil {
			return err
		}
		if !ok {
			pending = append(pending, &task{c: c, tries: map[int]int{}})
			return nil
		}
		st.Blocks++
		st.Resumed++
		if c.Type() == cid.Raw {
			return nil
		}
		data, err := dst.Get(ctx, c)
		if errors.Is(err, artifact.ErrNotFound) || errors.Is(err, artifact.ErrHashMismatch) {
			st.Blocks--
			st.Resumed--
			pending = append(pending, &task{c: c, tries: map[int]int{}})
			return nil
		}
		if err != nil {
			return err
		}
		kids, err := artifact.Children(c, data)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := enqueue(k); err != nil {
				return err
			}
		}
		return nil
	}
	if err := enqueue(root); err != nil {
		return st, err
	}

	// pick chooses the live source with the fewest requests in flight that
	// may still be asked for t; ok is false if none can ever be.
	pick := func(t *task) (best int, possible bool) {
		best = -1
		for i, s := range srcs {
			if s.dead || t.tries[i] >= cfg.TriesPerSource {
				continue
			}
			possible = true
			if s.inflight < s.win.limit && (best < 0 || s.win.load(s.inflight) < srcs[best].win.load(srcs[best].inflight)) {
				best = i
			}
		}
		return best, possible
	}

	for {
		// Dispatch what can be dispatched.
		kept := pending[:0]
		for _, t := range pending {
			i, possible := pick(t)
			switch {
			case !possible:
				return st, fmt.Errorf("%w: %s (%d sources left)", ErrExhausted, t.c, st.SourcesLeft)
			case i < 0:
				kept = append(kept, t)
			default:
				t.tries[i]++
				srcs[i].inflight++
				inflight++
				srcs[i].in <- t
			}
		}
		pending = kept
		if inflight == 0 && len(pending) == 0 {
			break
		}
		var r result
		select {
		case r = <-results:
		case <-ctx.Done():
			return st, ctx.Err()
		}
		inflight--
		s := srcs[r.src]
		s.inflight--
		if r.local != nil {
			return st, r.local
		}
		if r.err != nil {
			if !errors.Is(r.err, ErrMissing) {
				s.win.failed(time.Now())
			}
			s.strikes++
			switch {
			case errors.Is(r.err, artifact.ErrHashMismatch), errors.Is(r.err, artifact.ErrTooLarge):
				st.Corrupt++
				r.t.tries[r.src] = cfg.TriesPerSource
			case errors.Is(r.err, ErrRefused):
				s.strikes = cfg.SourceStrikes
			case errors.Is(r.err, ErrMissing):
				r.t.tries[r.src] = cfg.TriesPerSource
			}
			if s.strikes >= cfg.SourceStrikes && !s.dead {
				s.dead = true
				st.SourcesLeft--
			}
			pending = append(pending, r.t)
			continue
		}
		s.strikes = 0
		s.win.delivered(r.size, r.lat, time.Now())
		st.Blocks++
		st.Fetched++
		st.Bytes += r.size
		st.PerSource[s.Name()]++
		kids, err := artifact.Children(r.t.c, r.data)
		if err != nil {
			return st, err
		}
		for _, k := range kids {
			if err := enqueue(k); err != nil {
				return st, err
			}
		}
		if cfg.Progress != nil {
			cfg.Progress(st.Progress)
		}
	}
	return st, nil
}

// window is the adaptive number of requests in flight to one source: a
// bandwidth-delay estimate. It keeps the fastest goodput seen in a round
// (a round lasts until as many blocks as the limit have arrived, about one
// round trip once the pipe is full) and the shortest request-to-reply
// time seen, and sets the limit to 1.5 × their product in blocks, plus 2
// (2 × while every round is 25 % faster than the best before: startup,
// when cold connections hold the rate back, as in BBR).
// While the limit is what holds the rate back, each round's rate is
// limit/latency, so the limit grows by about half a round; once the link
// is full the rate stops growing and the limit stays at 1.5 × the
// bandwidth-delay product instead of piling requests into the
// bottleneck's queue (which lengthens every reply and, with a user-space
// delayer or a shallow buffer, loses packets). A failure other than a 404
// halves the limit and forgets the rate. Loss and congestion proper are
// TCP's business. Time is passed in.
type window struct {
	limit, min, max int
	start           time.Time
	n               int
	bytes           int64
	best            float64       // bytes per second
	minLat          time.Duration // shortest request-to-reply time
	startup         bool          // every round so far raised the best rate by 25 %
}

func newWindow(min, max int, now time.Time) *window {
	return &window{limit: min, min: min, max: max, start: now, startup: true}
}

// load is in-flight requests relative to the limit, for choosing the
// least loaded source.
func (w *window) load(inflight int) float64 { return float64(inflight) / float64(w.limit) }

func (w *window) delivered(size int64, lat time.Duration, now time.Time) {
	w.n++
	w.bytes += size
	if lat > 0 && (w.minLat == 0 || lat < w.minLat) {
		w.minLat = lat
	}
	if w.n < w.limit {
		return
	}
	if el := now.Sub(w.start).Seconds(); el > 0 {
		rate := float64(w.bytes) / el
		if rate < 1.25*w.best {
			w.startup = false
		}
		w.best = max(w.best, rate)
		block := float64(w.bytes) / float64(w.n)
		bdp := w.best * w.minLat.Seconds() / block
		gain := 1.5
		if w.startup {
			gain = 2
		}
		w.limit = min(w.max, max(w.min, int(math.Ceil(gain*bdp))+2))
	}
	w.start, w.n, w.bytes = now, 0, 0
}

func (w *window) failed(now time.Time) {
	w.limit = max(w.min, w.limit/2)
	w.best, w.startup = 0, false
	w.start, w.n, w.bytes = now, 0, 0
}
