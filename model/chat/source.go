package chat

import (
	"fmt"
	"strings"
)

// prepare checks a template's source and rewrites it for the engine:
//
//   - every `EXPR | tojson(ARGS)` and `EXPR | trim(ARGS)` filter and every
//     `EXPR.strip()`, `.lstrip()` and `.rstrip()` inside a tag becomes a call
//     `gym_tojson(EXPR, ARGS)`, ... of this package's Python-faithful
//     version (rewriteCalls says why), because the engine's filters cannot
//     be replaced;
//   - a template the engine could not render safely is refused: a macro
//     that calls itself or a macro defined after it, a `recursive` loop
//     (both could recurse without end and overflow the stack, which no
//     recover catches), and a call of a method that mutates a list or
//     dict (transformers' ImmutableSandboxedEnvironment refuses those
//     too; refusing them here also means no value can contain itself).
//
// It works on the tags' tokens, so text outside tags and string literals
// are never touched.
func prepare(src string) (string, error) {
	var out strings.Builder
	var macros []string // names, in definition order
	i := 0
	for i < len(src) {
		j := strings.Index(src[i:], "{")
		for j >= 0 && i+j+1 < len(src) && !strings.ContainsRune("{%#", rune(src[i+j+1])) {
			k := strings.Index(src[i+j+1:], "{")
			if k < 0 {
				j = -1
				break
			}
			j += k + 1
		}
		if j < 0 || i+j+1 >= len(src) {
			out.WriteString(src[i:])
			break
		}
		out.WriteString(src[i : i+j])
		i += j
		open := src[i : i+2]
		if open == "{#" {
			end := strings.Index(src[i+2:], "#}")
			if end < 0 {
				return "", fmt.Errorf("comment at byte %d is not closed", i)
			}
			out.WriteString(src[i : i+2+end+2])
			i += 2 + end + 2
			continue
		}
		closer := "}}"
		if open == "{%" {
			closer = "%}"
		}
		toks, end, err := lexTag(src, i+2, closer)
		if err != nil {
			return "", err
		}
		body := src[i+2 : end]
		words := tagWords(toks, body)
		if open == "{%" && len(words) > 0 && words[0] == "raw" {
			// Copy through the matching endraw untouched.
			rest := src[end+2:]
			k := 0
			for {
				m := strings.Index(rest[k:], "{%")
				if m < 0 {
					return "", fmt.Errorf("raw block at byte %d is not closed", i)
				}
				k += m
				rtoks, rend, err := lexTag(rest, k+2, "%}")
				if err == nil {
					if w := tagWords(rtoks, rest[k+2:rend]); len(w) > 0 && w[0] == "endraw" {
						out.WriteString(src[i : end+2+rend+2])
						i = end + 2 + rend + 2
						break
					}
				}
				k += 2
			}
			continue
		}
		if open == "{%" && len(words) > 1 && words[0] == "macro" {
			macros = append(macros, words[1])
		}
		if err := checkTag(toks, body, macros, i); err != nil {
			return "", err
		}
		body, err = rewriteCalls(body)
		if err != nil {
			return "", fmt.Errorf("tag at byte %d: %w", i, err)
		}
		out.WriteString(open)
		out.WriteString(body)
		out.WriteString(closer)
		i = end + 2
	}
	if err := checkMacros(out.String(), macros); err != nil {
		return "", err
	}
	return out.String(), nil
}

// token is one lexical token of a tag: an identifier, a number, a string
// literal or a punctuation character; start and end are offsets into the
// tag's body.
type token struct {
	kind       byte // 'i' identifier, 'n' number, 's' string, 'p' punctuation
	start, end int
}

// lexTag reads the tokens of a tag whose body starts at src[from] up to
// closer (outside string literals); end is the offset of closer in src.
// Offsets of the tokens are relative to from.
func lexTag(src string, from int, closer string) ([]token, int, error) {
	var toks []token
	i := from
	for i < len(src) {
		c := src[i]
		switch {
		case strings.HasPrefix(src[i:], closer):
			return toks, i, nil
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return nil, 0, fmt.Errorf("string at byte %d is not closed", i)
			}
			toks = append(toks, token{'s', i - from, j + 1 - from})
			i = j + 1
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			toks = append(toks, token{'i', i - from, j - from})
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '_') {
				j++
			}
			if j+1 < len(src) && src[j] == '.' && src[j+1] >= '0' && src[j+1] <= '9' {
				j++
				for j < len(src) && src[j] >= '0' && src[j] <= '9' {
					j++
				}
			}
			toks = append(toks, token{'n', i - from, j - from})
			i = j
		default:
			toks = append(toks, token{'p', i - from, i + 1 - from})
			i++
		}
	}
	return nil, 0, fmt.Errorf("tag at byte %d is not closed", from-2)
}

// tagWords are the identifiers at the start of a statement tag, after a
// whitespace-control sign.
func tagWords(toks []token, body string) []string {
	var w []string
	for _, t := range toks {
		s := body[t.start:t.end]
		if t.kind == 'p' && (s == "-" || s == "+") && len(w) == 0 {
			continue
		}
		if t.kind != 'i' {
			break
		}
		w = append(w, s)
	}
	return w
}

// mutating are the methods ImmutableSandboxedEnvironment refuses on lists,
// dicts and sets.
var mutating = map[string]bool{"append": true, "extend": true, "insert": true, "pop": true, "remove": true,
	"reverse": true, "sort": true, "clear": true, "popitem": true, "setdefault": true, "update": true,
	"add": true, "discard": true, "difference_update": true, "intersection_update": true,
	"symmetric_difference_update": true}

func checkTag(toks []token, body string, macros []string, at int) error {
	text := func(k int) string { return body[toks[k].start:toks[k].end] }
	for k, t := range toks {
		if t.kind != 'i' {
			continue
		}
		s := text(k)
		if s == "recursive" {
			return fmt.Errorf("%w: tag at byte %d: recursive loops are not supported", ErrTemplate, at)
		}
		if k > 0 && text(k-1) == "." && k+1 < len(toks) && text(k+1) == "(" && mutating[s] {
			return fmt.Errorf("%w: tag at byte %d: .%s() mutates a value, which transformers' sandbox refuses", ErrTemplate, at, s)
		}
	}
	return nil
}

// checkMacros refuses a macro whose body calls itself or a macro defined
// after it: with calls only to earlier macros no call chain can loop.
func checkMacros(src string, macros []string) error {
	if len(macros) == 0 {
		return nil
	}
	// Find each macro's body: from its tag to its endmacro.
	idx := 0
	for n, name := range macros {
		start, end, err := macroBody(src, idx, name)
		if err != nil {
			return err
		}
		idx = end
		body := src[start:end]
		for _, later := range macros[n:] {
			if callsName(body, later) {
				return fmt.Errorf("%w: macro %s calls %s, defined at or after it (recursion is not supported)", ErrTemplate, name, later)
			}
		}
	}
	return nil
}

// macroBody finds the text between the macro tag defining name (at or
// after from) and its endmacro.
func macroBody(src string, from int, name string) (int, int, error) {
	i := from
	depth, start := 0, -1
	for {
		m := strings.Index(src[i:], "{%")
		if m < 0 {
			return 0, 0, fmt.Errorf("%w: macro %s is not closed", ErrTemplate, name)
		}
		i += m
		toks, end, err := lexTag(src, i+2, "%}")
		if err != nil {
			return 0, 0, err
		}
		w := tagWords(toks, src[i+2:end])
		switch {
		case len(w) > 1 && w[0] == "macro":
			if start < 0 && w[1] == name {
				start = end + 2
			} else if start >= 0 {
				depth++
			}
		case len(w) > 0 && w[0] == "endmacro" && start >= 0:
			if depth == 0 {
				return start, i, nil
			}
			depth--
		}
		i = end + 2
	}
}

// callsName reports whether a tag in src calls name: the identifier
// followed by "(".
func callsName(src, name string) bool {
	for i := 0; ; {
		m := strings.Index(src[i:], "{")
		if m < 0 || i+m+1 >= len(src) {
			return false
		}
		i += m
		closer := ""
		switch src[i+1] {
		case '{':
			closer = "}}"
		case '%':
			closer = "%}"
		default:
			i++
			continue
		}
		toks, end, err := lexTag(src, i+2, closer)
		if err != nil {
			return true // unreadable: treat as a call, refusing the template
		}
		body := src[i+2 : end]
		for k := 0; k+1 < len(toks); k++ {
			if toks[k].kind == 'i' && body[toks[k].start:toks[k].end] == name && body[toks[k+1].start:toks[k+1].end] == "(" &&
				(k == 0 || body[toks[k-1].start:toks[k-1].end] != ".") {
				return true
			}
		}
		i = end + 2
	}
}

// keywords cannot be the value a filter applies to.
var keywords = map[string]bool{"in": true, "if": true, "else": true, "elif": true, "not": true, "and": true,
	"or": true, "is": true, "for": true, "set": true, "with": true, "import": true, "from": true, "as": true}

// filterCalls are the filters rewritten into calls of this package's
// functions, and methodCalls the argument-less string methods: the
// engine's own differ from Python's (tojson sorts keys and escapes HTML
// when given an indent; trim, strip, lstrip and rstrip do not take
// Python's whitespace, which includes \x1c to \x1f, \v and \f).
var (
	filterCalls = map[string]string{"tojson": "gym_tojson", "trim": "gym_trim"}
	methodCalls = map[string]string{"strip": "gym_strip", "lstrip": "gym_lstrip", "rstrip": "gym_rstrip"}
)

// rewriteCalls turns the filters of filterCalls and the methods of
// methodCalls in a tag's body into calls, innermost first.
func rewriteCalls(body string) (string, error) {
	for range 256 {
		toks, _, err := lexTag(body+"\x00", 0, "\x00")
		if err != nil {
			return "", err
		}
		text := func(k int) string { return body[toks[k].start:toks[k].end] }
		k, fn := -1, ""
		for n := 0; n+1 < len(toks) && k < 0; n++ {
			if toks[n+1].kind != 'i' || toks[n].kind != 'p' {
				continue
			}
			switch text(n) {
			case "|":
				if f, ok := filterCalls[text(n+1)]; ok {
					k, fn = n, f
				}
			case ".":
				if f, ok := methodCalls[text(n+1)]; ok && n+3 < len(toks) && text(n+2) == "(" && text(n+3) == ")" {
					k, fn = n, f
				}
			}
		}
		if k < 0 {
			return body, nil
		}
		end := toks[k+1].end
		args := ""
		if text(k) == "." {
			end = toks[k+3].end
		} else if k+2 < len(toks) && text(k+2) == "(" {
			c, ok := matchForward(toks, body, k+2)
			if !ok {
				return "", fmt.Errorf("%w: %s( is not closed", ErrTemplate, text(k+1))
			}
			args = strings.TrimSpace(body[toks[k+2].end:toks[c].start])
			end = toks[c].end
		}
		s, err := operandStart(toks, body, k-1)
		if err != nil {
			return "", fmt.Errorf("%w (%s)", err, text(k+1))
		}
		call := strings.TrimRight(fn+"("+body[toks[s].start:toks[k].start], " \t\r\n")
		if args != "" {
			call += ", " + args
		}
		call += ")"
		body = body[:toks[s].start] + call + body[end:]
	}
	return "", fmt.Errorf("%w: too many filters to rewrite in one tag", ErrTemplate)
}

// operandStart is the index of the first token of the postfix expression
// (a name, literal or parenthesised group with its attributes, subscripts,
// calls and earlier filters) that ends at token j.
func operandStart(toks []token, body string, j int) (int, error) {
	text := func(k int) string { return body[toks[k].start:toks[k].end] }
	fail := fmt.Errorf("%w: cannot tell what the filter or method applies to", ErrTemplate)
	if j < 0 {
		return 0, fail
	}
	var s int
	switch t := toks[j]; {
	case t.kind == 'p' && strings.Contains(")]}", text(j)):
		o, ok := matchBack(toks, body, j)
		if !ok {
			return 0, fail
		}
		s = o
		if (text(o) == "(" || text(o) == "[") && o > 0 {
			if p := toks[o-1]; p.kind == 'i' && !keywords[text(o-1)] || p.kind == 's' || p.kind == 'p' && strings.Contains(")]", text(o-1)) {
				return operandStart(toks, body, o-1) // a call or a subscript
			}
		}
	case t.kind == 'i' && !keywords[text(j)], t.kind == 's', t.kind == 'n':
		s = j
	default:
		return 0, fail
	}
	if s >= 2 && (text(s-1) == "." || text(s-1) == "|") {
		return operandStart(toks, body, s-2) // an attribute, or an earlier filter's value
	}
	return s, nil
}

func matchBack(toks []token, body string, j int) (int, bool) {
	depth := 0
	for k := j; k >= 0; k-- {
		switch body[toks[k].start:toks[k].end] {
		case ")", "]", "}":
			if toks[k].kind == 'p' {
				depth++
			}
		case "(", "[", "{":
			if toks[k].kind == 'p' {
				depth--
				if depth == 0 {
					return k, true
				}
			}
		}
	}
	return 0, false
}

func matchForward(toks []token, body string, j int) (int, bool) {
	depth := 0
	for k := j; k < len(toks); k++ {
		if toks[k].kind != 'p' {
			continue
		}
		switch body[toks[k].start:toks[k].end] {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
			if depth == 0 {
				return k, true
			}
		}
	}
	return 0, false
}
