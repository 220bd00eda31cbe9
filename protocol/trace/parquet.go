package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/zooai/gym/model/episode"
)

// ParquetKey is the key of the file metadata entry that holds a Parquet
// trace file's header (as JSON).
const ParquetKey = "zoo-gym-traces"

// parquetRow is one sequence as a Parquet row: the JSON Lines form's
// fields, lists as Parquet LISTs (pyarrow and the datasets library read
// them as lists).
type parquetRow struct {
	Prompt        int64     `parquet:"prompt"`
	Sample        int64     `parquet:"sample"`
	PromptText    string    `parquet:"prompt_text"`
	Answer        string    `parquet:"answer"`
	PromptIDs     []int32   `parquet:"prompt_ids,list"`
	Completion    string    `parquet:"completion"`
	CompletionIDs []int32   `parquet:"completion_ids,list"`
	LogProbs      []float32 `parquet:"logprobs,list"`
	Reward        float64   `parquet:"reward"`
	RewardFailed  bool      `parquet:"reward_failed"`
	// Mask and Episode (its JSON record) are empty for a sequence that is
	// not an episode; HasMask tells an empty mask from none.
	HasMask bool   `parquet:"has_mask"`
	Mask    []bool `parquet:"mask,list"`
	Episode string `parquet:"episode"`
}

// WriteParquet writes s as a Parquet file: one row per sequence, in order,
// and the header in the file's key-value metadata under ParquetKey. It
// checks s as Write does.
func WriteParquet(w io.Writer, s *Set) error {
	if err := s.check(DefaultLimits()); err != nil {
		return err
	}
	h, err := json.Marshal(s.Header)
	if err != nil {
		return err
	}
	rows := make([]parquetRow, len(s.Seqs))
	for i := range s.Seqs {
		q := &s.Seqs[i]
		rows[i] = parquetRow{Prompt: int64(q.Prompt), Sample: int64(q.Sample), PromptText: q.PromptText, Answer: q.Answer,
			PromptIDs: ints32(q.PromptIDs), Completion: q.Completion, CompletionIDs: ints32(q.CompletionIDs), LogProbs: q.LogProbs,
			Reward: q.Reward, RewardFailed: q.RewardFailed, HasMask: q.Mask != nil, Mask: q.Mask}
		if q.Episode != nil {
			b, err := json.Marshal(q.Episode)
			if err != nil {
				return err
			}
			rows[i].Episode = string(b)
		}
	}
	return parquet.Write(w, rows, parquet.KeyValueMetadata(ParquetKey, string(h)))
}

// ReadParquet reads a Parquet trace file of size bytes within lim, as
// strictly as Read reads JSON Lines: the header must be in the metadata,
// every row must be the sequence at its place, and the set must pass the
// same checks.
func ReadParquet(r io.ReaderAt, size int64, lim Limits) (s *Set, err error) {
	defer func() {
		// parquet-go panics on some malformed files: a refusal here.
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("%w: the Parquet reader failed: %v", ErrFormat, p)
		}
	}()
	f, err := parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("%w: not a Parquet file: %v", ErrFormat, err)
	}
	raw, ok := f.Lookup(ParquetKey)
	if !ok {
		return nil, fmt.Errorf("%w: the Parquet file has no %q metadata (not a trace file)", ErrFormat, ParquetKey)
	}
	s = &Set{}
	d := json.NewDecoder(bytes.NewReader([]byte(raw)))
	d.DisallowUnknownFields()
	if err := d.Decode(&s.Header); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	if err := s.Header.check(lim); err != nil {
		return nil, err
	}
	if n := int64(s.Header.Prompts) * int64(s.Header.GroupSize); f.NumRows() != n {
		return nil, fmt.Errorf("%w: %d rows, the header says %d × %d", ErrFormat, f.NumRows(), s.Header.Prompts, s.Header.GroupSize)
	}
	rows, err := parquet.Read[parquetRow](r, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	s.Seqs = make([]Sequence, len(rows))
	for i, row := range rows {
		s.Seqs[i] = Sequence{Prompt: int(row.Prompt), Sample: int(row.Sample), PromptText: row.PromptText, Answer: row.Answer,
			PromptIDs: ints(row.PromptIDs), Completion: row.Completion, CompletionIDs: ints(row.CompletionIDs), LogProbs: row.LogProbs,
			Reward: row.Reward, RewardFailed: row.RewardFailed}
		if row.HasMask {
			s.Seqs[i].Mask = append([]bool{}, row.Mask...)
		}
		if row.Episode != "" {
			eps, err := episode.ReadJSONL(bytes.NewReader([]byte(row.Episode)), 1)
			if err != nil || len(eps) != 1 {
				return nil, fmt.Errorf("%w: row %d: episode: %v", ErrFormat, i, err)
			}
			s.Seqs[i].Episode = eps[0]
		}
		if err := s.Header.checkSeq(i, &s.Seqs[i], lim); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
	}
	if err := s.episodeRewards(); err != nil {
		return nil, err
	}
	if err := s.sameGroupPrompts(); err != nil {
		return nil, err
	}
	return s, nil
}

func ints32(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func ints(v []int32) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}
