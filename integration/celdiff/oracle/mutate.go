package main

// Seeded syntax mutations of corpus selectors: the typing mistakes a person makes in a selector
// (a token deleted, inserted, doubled or swapped with its neighbour), to compare the syntax-error
// texts of both engines on inputs nobody wrote by hand. The selectors are split into tokens by a
// deliberately rough scanner (it only has to find plausible cut points; the engines decide what
// the result means).

import (
	"fmt"
	"math/rand"
	"strings"
)

// span is one token of a selector: [start, end) in bytes.
type span struct{ start, end int }

// roughTokens splits a selector into identifier/number runs, quoted strings, two-character
// operators and single characters; blanks separate tokens and belong to none.
func roughTokens(s string) []span {
	var out []span
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
			continue
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j < len(s) {
				j++
			}
			out = append(out, span{i, min(j, len(s))})
			i = min(j, len(s))
			continue
		case isWordByte(c):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			out = append(out, span{i, j})
			i = j
			continue
		}
		if i+1 < len(s) {
			switch s[i : i+2] {
			case "==", "!=", "<=", ">=", "&&", "||":
				out = append(out, span{i, i + 2})
				i += 2
				continue
			}
		}
		out = append(out, span{i, i + 1})
		i++
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		c >= 0x80
}

// insertions are the tokens a mutation may insert: punctuation, operators, mistyped operators,
// keywords, reserved words, literals and a stray backtick or quote.
var insertions = []string{
	"(", ")", "[", "]", "{", "}", ".", ",", "?", ":", "!", "-", "+", "*", "/", "%", "<", ">",
	"==", "!=", "<=", ">=", "&&", "||", "=", "&", "|", "in", "true", "null", "if", "x", "1",
	"1u", "1.5", `"s"`, `"`, "'", "`", "#", ".?", "[?",
}

// mutateSelectors returns n seeded mutations of the given selectors (each: one token deleted,
// inserted before another, doubled, or swapped with the next one). Duplicates are dropped.
func mutateSelectors(n int, seed int64, from []corpusSelector) []corpusSelector {
	if len(from) == 0 || n <= 0 {
		return nil
	}
	rng := rand.New(rand.NewSource(seed))
	seen := map[string]bool{}
	for _, s := range from {
		seen[s.Expr] = true
	}
	var out []corpusSelector
	for attempts := 0; len(out) < n && attempts < 20*n; attempts++ {
		src := from[rng.Intn(len(from))].Expr
		toks := roughTokens(src)
		if len(toks) == 0 {
			continue
		}
		k := rng.Intn(len(toks))
		t := toks[k]
		var m string
		switch rng.Intn(4) {
		case 0: // delete
			m = src[:t.start] + src[t.end:]
		case 1: // insert before
			m = src[:t.start] + insertions[rng.Intn(len(insertions))] + src[t.start:]
		case 2: // double
			m = src[:t.end] + src[t.start:t.end] + src[t.end:]
		default: // swap with the next token
			if k+1 >= len(toks) {
				continue
			}
			u := toks[k+1]
			m = src[:t.start] + src[u.start:u.end] + src[t.end:u.start] + src[t.start:t.end] + src[u.end:]
		}
		m = strings.TrimSpace(m)
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, corpusSelector{Expr: m, Source: fmt.Sprintf("mutation:%d", len(out)+1)})
	}
	return out
}
