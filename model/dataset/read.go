package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Limits on what the readers accept. A dataset over them is refused with
// ErrLimit before the data is read or allocated.
const (
	MaxFileBytes         = 1 << 30 // one file
	MaxRows              = 1 << 20 // rows of one split (all its files)
	MaxLineBytes         = 1 << 20 // one JSONL line
	MaxValueBytes        = 1 << 16 // one field's text
	MaxConversationBytes = 1 << 20 // one field's conversation (JSON)
	MaxFiles             = 1024    // files of one split
	MaxColumns           = 4096    // columns of a Parquet schema
)

// Errors. Every error the readers return wraps one of them and names the
// file, the line or row, and the field.
var (
	// ErrFormat is malformed input: a line that is not a JSON object, a
	// field of the wrong type, a value that is not UTF-8, a Parquet file
	// that does not parse or whose schema does not fit.
	ErrFormat = errors.New("dataset: malformed data")
	// ErrField is a field the mapping names that a row or schema lacks.
	ErrField = errors.New("dataset: missing field")
	// ErrLimit is input over one of the limits above.
	ErrLimit = errors.New("dataset: over a limit")
	// ErrLayout is a path that holds no split the configuration names.
	ErrLayout = errors.New("dataset: no such split")
	// ErrConfig is a configuration that cannot be used.
	ErrConfig = errors.New("dataset: invalid configuration")
)

// IsData reports whether err is about the data or its mapping (any of the
// errors above), as opposed to the file system.
func IsData(err error) bool {
	for _, e := range []error{ErrFormat, ErrField, ErrLimit, ErrLayout, ErrConfig} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Row is one record's fields, as text: the fields a mapping asked for.
type Row map[string]string

// conversationMark starts a Row value that is a conversation: the JSON
// list of message objects a JSONL field held, as written after the mark.
// A JSON string value cannot start with it (text refuses a leading NUL),
// so the two kinds of value never mix up.
const conversationMark = "\x00conversation\x00"

// Conversation returns the JSON list of messages field f holds, and
// whether it holds one (rather than text).
func (r Row) Conversation(f string) (string, bool) {
	return strings.CutPrefix(r[f], conversationMark)
}

// ReadJSONL reads rows from JSON Lines: one JSON object per line, blank
// lines skipped. Each object must hold every field in fields as a string,
// a number (taken as written, e.g. 46 or 4.5) or a conversation: a JSON
// list of message objects ({"role": ..., "content": ...}, kept as written;
// Row.Conversation); other keys are ignored. name names the input in errors ("train.jsonl:12: field
// \"answer\": ..."). At most max rows are read (more is ErrLimit).
func ReadJSONL(name string, r io.Reader, fields []string, max int) ([]Row, error) {
	if len(fields) == 0 {
		return nil, fmt.Errorf("%w: no fields to read", ErrConfig)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var rows []Row
	for line := 1; ; line++ {
		b, err := readLine(br)
		if errors.Is(err, io.EOF) && len(b) == 0 {
			return rows, nil
		}
		if errors.Is(err, ErrLimit) {
			return nil, fmt.Errorf("%w: %s:%d: line longer than %d bytes", ErrLimit, name, line, MaxLineBytes)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("dataset: %s:%d: %w", name, line, err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			if errors.Is(err, io.EOF) {
				return rows, nil
			}
			continue
		}
		if len(rows) == max {
			return nil, fmt.Errorf("%w: %s: more than %d rows", ErrLimit, name, max)
		}
		row, perr := parseLine(b, fields)
		if perr != nil {
			return nil, fmt.Errorf("%w: %s:%d: %w", errors.Unwrap(perr), name, line, perr)
		}
		rows = append(rows, row)
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
	}
}

// readLine returns the next line without its newline, at most
// MaxLineBytes long (ErrLimit otherwise); io.EOF with the last line.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLineBytes+1 {
			return nil, ErrLimit
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}

// fieldError is a problem with one field; errors.Unwrap gives its class.
type fieldError struct {
	class error
	msg   string
}

func (e *fieldError) Error() string { return e.msg }
func (e *fieldError) Unwrap() error { return e.class }

func fieldErrorf(class error, format string, args ...any) error {
	return &fieldError{class, fmt.Sprintf(format, args...)}
}

// parseLine decodes one JSON object and takes fields from it.
func parseLine(b []byte, fields []string) (Row, error) {
	if !utf8.Valid(b) {
		return nil, fieldErrorf(ErrFormat, "not UTF-8")
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		what := "null"
		if err != nil {
			what = err.Error()
		}
		return nil, fieldErrorf(ErrFormat, "not a JSON object: %s", what)
	}
	if dec.More() {
		return nil, fieldErrorf(ErrFormat, "more than one JSON value on the line")
	}
	row := make(Row, len(fields))
	for _, f := range fields {
		raw, ok := obj[f]
		if !ok {
			return nil, fieldErrorf(ErrField, "no field %q (the line has %s)", f, keys(obj))
		}
		v, err := text(raw)
		if err != nil {
			return nil, fieldErrorf(ErrFormat, "field %q: %v", f, err)
		}
		row[f] = v
	}
	return row, nil
}

// text is a JSON string's value, a number's literal, or a conversation
// after conversationMark.
func text(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", errors.New("empty")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		if len(s) > MaxValueBytes {
			return "", fmt.Errorf("%d bytes, at most %d", len(s), MaxValueBytes)
		}
		if strings.HasPrefix(s, "\x00") {
			return "", errors.New("a string starting with NUL")
		}
		return s, nil
	case '[':
		if len(raw) > MaxConversationBytes {
			return "", fmt.Errorf("a conversation of %d bytes, at most %d", len(raw), MaxConversationBytes)
		}
		var msgs []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return "", fmt.Errorf("a list that is not a conversation (a list of message objects): %v", err)
		}
		if len(msgs) == 0 {
			return "", errors.New("an empty conversation")
		}
		for i, m := range msgs {
			var role string
			if m == nil || json.Unmarshal(m["role"], &role) != nil || role == "" {
				return "", fmt.Errorf("message %d has no role", i)
			}
		}
		return conversationMark + string(raw), nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if len(raw) > 64 {
			return "", fmt.Errorf("a number of %d digits", len(raw))
		}
		return string(raw), nil
	}
	return "", fmt.Errorf("want a string or a number, got %s", jsonKind(raw[0]))
}

func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "something else"
}

func keys(obj map[string]json.RawMessage) string {
	if len(obj) == 0 {
		return "no fields"
	}
	ks := make([]string, 0, len(obj))
	for k := range obj {
		ks = append(ks, strconv.Quote(k))
	}
	slices.Sort(ks)
	if len(ks) > 10 {
		ks = append(ks[:10], "...")
	}
	return "fields " + strings.Join(ks, ", ")
}

// ReadParquet reads rows from a Parquet file of size bytes: every field in
// fields must be a top-level column that is neither repeated nor nested,
// of type string (BYTE_ARRAY, UTF-8) or a whole number (INT32, INT64); a
// null value is ErrFormat. At most max rows are read (more is ErrLimit,
// checked against the footer before any data is read). The file is parsed
// with github.com/parquet-go/parquet-go; a panic inside it on hostile
// input is returned as ErrFormat.
func ReadParquet(name string, r io.ReaderAt, size int64, fields []string, max int) (rows []Row, err error) {
	if len(fields) == 0 {
		return nil, fmt.Errorf("%w: no fields to read", ErrConfig)
	}
	if size > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s: %d bytes, at most %d", ErrLimit, name, size, MaxFileBytes)
	}
	defer func() {
		if p := recover(); p != nil {
			rows, err = nil, fmt.Errorf("%w: %s: the Parquet reader failed: %v", ErrFormat, name, p)
		}
	}()
	f, err := parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: not a Parquet file: %v", ErrFormat, name, err)
	}
	n := f.NumRows()
	if n < 0 || n > int64(max) {
		return nil, fmt.Errorf("%w: %s: %d rows, at most %d", ErrLimit, name, n, max)
	}
	schema := f.Schema()
	if len(schema.Columns()) > MaxColumns {
		return nil, fmt.Errorf("%w: %s: %d columns, at most %d", ErrLimit, name, len(schema.Columns()), MaxColumns)
	}
	cols := make([]int, len(fields))
	for i, fd := range fields {
		leaf, ok := schema.Lookup(fd)
		if !ok {
			return nil, fmt.Errorf("%w: %s: no column %q (the schema has %s)", ErrField, name, fd, columnNames(schema))
		}
		if err := checkColumn(leaf); err != nil {
			return nil, fmt.Errorf("%w: %s: column %q: %v", ErrFormat, name, fd, err)
		}
		cols[i] = leaf.ColumnIndex
	}
	var sum int64
	for _, rg := range f.RowGroups() {
		if rg.NumRows() < 0 {
			return nil, fmt.Errorf("%w: %s: a row group of %d rows", ErrFormat, name, rg.NumRows())
		}
		sum += rg.NumRows()
	}
	if sum != n {
		return nil, fmt.Errorf("%w: %s: the row groups hold %d rows, the footer says %d", ErrFormat, name, sum, n)
	}
	// Columns grow with the values actually decoded, not with the row
	// counts the footer claims.
	values := make([][]string, len(fields))
	for g, rg := range f.RowGroups() {
		chunks := rg.ColumnChunks()
		for i, c := range cols {
			if c >= len(chunks) {
				return nil, fmt.Errorf("%w: %s: row group %d has %d columns", ErrFormat, name, g, len(chunks))
			}
			before := len(values[i])
			if values[i], err = readColumn(chunks[c], values[i], rg.NumRows(), fields[i]); err != nil {
				return nil, fmt.Errorf("%w: %s: row group %d: %w", errors.Unwrap(err), name, g, err)
			}
			if got := int64(len(values[i]) - before); got != rg.NumRows() {
				return nil, fmt.Errorf("%w: %s: row group %d: column %q has %d values for %d rows", ErrFormat, name, g, fields[i], got, rg.NumRows())
			}
		}
	}
	rows = make([]Row, n)
	for r := range rows {
		rows[r] = make(Row, len(fields))
		for i, fd := range fields {
			rows[r][fd] = values[i][r]
		}
	}
	return rows, nil
}

func columnNames(s *parquet.Schema) string {
	var names []string
	for _, f := range s.Fields() {
		names = append(names, strconv.Quote(f.Name()))
		if len(names) == 10 {
			names = append(names, "...")
			break
		}
	}
	if len(names) == 0 {
		return "no columns"
	}
	return "columns " + strings.Join(names, ", ")
}

// checkColumn accepts a flat string or whole-number column.
func checkColumn(leaf parquet.LeafColumn) error {
	if len(leaf.Path) != 1 || leaf.MaxRepetitionLevel != 0 {
		return fmt.Errorf("is nested or repeated (want a plain string or number column)")
	}
	t := leaf.Node.Type()
	switch t.Kind() {
	case parquet.ByteArray:
		if lt := t.LogicalType(); lt != nil && lt.Value != nil {
			switch lt.Value.(type) {
			case *format.StringType, *format.EnumType, *format.JsonType:
			default:
				return fmt.Errorf("is %s, want a string", t)
			}
		}
	case parquet.Int32, parquet.Int64:
	default:
		return fmt.Errorf("is %s, want a string or a whole number", t)
	}
	return nil
}

// readColumn appends one column chunk's values (at most want) to out.
func readColumn(cc parquet.ColumnChunk, out []string, want int64, field string) ([]string, error) {
	if v := cc.NumValues(); v != want {
		return nil, fieldErrorf(ErrFormat, "column %q has %d values for %d rows", field, v, want)
	}
	pages := cc.Pages()
	defer pages.Close()
	buf := make([]parquet.Value, 256)
	start := len(out)
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fieldErrorf(ErrFormat, "column %q: %v", field, err)
		}
		vr := p.Values()
		for {
			k, rerr := vr.ReadValues(buf)
			for _, v := range buf[:k] {
				row := len(out) - start
				if int64(row) >= want {
					parquet.Release(p)
					return nil, fieldErrorf(ErrFormat, "column %q has more values than rows", field)
				}
				s, verr := valueText(v)
				if verr != nil {
					parquet.Release(p)
					return nil, fieldErrorf(ErrFormat, "row %d: column %q: %v", row, field, verr)
				}
				out = append(out, s)
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				parquet.Release(p)
				return nil, fieldErrorf(ErrFormat, "column %q: %v", field, rerr)
			}
		}
		parquet.Release(p)
	}
}

func valueText(v parquet.Value) (string, error) {
	switch v.Kind() {
	case parquet.ByteArray:
		b := v.ByteArray()
		if len(b) > MaxValueBytes {
			return "", fmt.Errorf("%d bytes, at most %d", len(b), MaxValueBytes)
		}
		if !utf8.Valid(b) {
			return "", errors.New("not UTF-8")
		}
		if len(b) > 0 && b[0] == 0 {
			return "", errors.New("a string starting with NUL")
		}
		return string(b), nil
	case parquet.Int32:
		return strconv.FormatInt(int64(v.Int32()), 10), nil
	case parquet.Int64:
		return strconv.FormatInt(v.Int64(), 10), nil
	}
	if v.IsNull() {
		return "", errors.New("null")
	}
	return "", fmt.Errorf("a %s value", v.Kind())
}
