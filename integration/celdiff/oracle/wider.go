package main

// The grammar of seeds >= widerGrammarFirstSeed adds, to the wide grammar, the areas where
// issue 16 §3 found disagreements: doubles in format() (%e and %f with and without a precision,
// infinities, NaN, -0.0, large and tiny values; their text surfaced in an error message so the
// values are compared, not only the outcome), optional chaining (`.?k`, `[?k]`, then plain and
// optional qualifiers) over values of every kind, has() over them, and optional list and map
// entries that mix optionals from selections (also on empty literals) with optional.of(x).

import "fmt"

// widerGrammarFirstSeed is the first seed of this grammar; seeds 41-140 keep the wide grammar's
// stream (searched before).
const widerGrammarFirstSeed = 141

// widerAtoms is the number of productions widerAtom adds to extraAtom.
const widerAtoms = 5

var (
	formatDoubleLits = []string{"0.0", "-0.0", "1.5", "-2.5", "1234567.5", "-999.95", "0.000123456", "1e-7",
		"1e21", "1e100", "1e-300", "9.9999999", "1.7976931348623157e308", "5e-324", "1.0 / 3.0",
		`double("NaN")`, `double("Infinity")`, `double("-Infinity")`, `-double("Infinity")`}
	// mixedValues are values of every kind, as a map value or an optional's content.
	mixedValues = []string{"dyn(null)", "dyn(0)", "dyn(1u)", "dyn(1.5)", "dyn('s')", "dyn(b'x')", "dyn(true)",
		"dyn([1])", "dyn([])", "dyn({'f': 1})", "dyn({'x': 1})", "dyn({1: 'f'})", "dyn({'f': {'g': 2}})",
		"dyn(timestamp(0))", "dyn(duration('1s'))", "dyn(quantity('1'))", "dyn(optional.of(1))",
		"dyn(optional.none())", "dyn(type(1))", "device", "device.attributes"}
	optionalQualifiers = []string{".f", ".?f", ".g", ".?g", "[0]", "[?0]", "['f']", "[?'f']", "[1]", "[?'x']",
		".driver", ".?attributes", "[?true]", "[0u]", "[?1.0]"}
)

func (g *generator) formatDouble(depth int) string {
	switch g.pick(4) {
	case 0:
		return "double(" + g.intExpr(depth) + ")"
	case 1:
		return g.oneOf(formatDoubleLits...) + " " + g.oneOf("+", "-", "*", "/") + " " + g.oneOf(formatDoubleLits...)
	default:
		return g.oneOf(formatDoubleLits...)
	}
}

// surfaced compares a string's value through a failing map lookup, whose error text carries it
// ("no such key: <text>"), or through its size and contents.
func (g *generator) surfaced(s string) string {
	switch g.pick(3) {
	case 0:
		return fmt.Sprintf(`{"": 0}[%s] == 0`, s)
	case 1:
		return fmt.Sprintf("%s.size() == %s", s, g.oneOf("6", "8", "13", "14", "16"))
	default:
		return fmt.Sprintf("%s.%s(%s)", s, g.oneOf("contains", "startsWith", "endsWith"), g.oneOf(`"×10⁰"`, `" "`, `","`, `"∞"`, `"NaN"`, `"e+"`, `"Infinity"`, `".0"`))
	}
}

// optionalChain is an optional selection or index on a value of any kind, then qualifiers.
func (g *generator) optionalChain() string {
	v := g.oneOf(mixedValues...)
	var base string
	switch g.pick(4) {
	case 0:
		base = fmt.Sprintf("{'k': %s}.?k", v)
	case 1:
		base = fmt.Sprintf("{true: %s}[?true]", v)
	case 2:
		base = fmt.Sprintf("[%s][?0]", v)
	default:
		base = fmt.Sprintf("optional.of(%s)", v)
	}
	for n := 1 + g.pick(3); n > 0; n-- {
		base += g.oneOf(optionalQualifiers...)
	}
	return base
}

// optionalEntry is an optional list or map entry's value: an optional from a selection, or
// optional.of / optional.none().
func (g *generator) optionalEntry() string {
	switch g.pick(6) {
	case 0:
		return g.oneOf("{}.?c", "{}[?'c']", "[][?0]", "{}[?1]")
	case 1:
		return fmt.Sprintf("{'k': %s}.?k", g.oneOf("1", "'a'", "dyn(1)", "[1]", "1.5", "null"))
	case 2:
		return fmt.Sprintf("device.attributes[%q].?%s", g.oneOf(append(g.domains, "unknown.example.com")...), g.oneOf("model", "memory", "nope"))
	case 3:
		return "optional.none()"
	default:
		return fmt.Sprintf("optional.of(%s)", g.oneOf("42", "'s'", "1.5", "[1]", "dyn(42)", "null", g.ref("int")))
	}
}

func (g *generator) widerAtom(depth int, cmp string, k int) string {
	switch k {
	case 0:
		verb := g.oneOf("%e", "%f", "%.0e", "%.2e", "%.12e", "%.20e", "%.0f", "%.1f", "%.3f", "%.10f", "%s")
		return g.surfaced(fmt.Sprintf("%q.format([%s])", verb, g.formatDouble(depth)))
	case 1:
		// Several clauses, doubles inside lists and maps, and "NaN"/"Infinity" strings.
		arg := g.oneOf(fmt.Sprintf("[%s, %s]", g.formatDouble(depth), g.formatDouble(depth)),
			fmt.Sprintf("{'a': %s}", g.formatDouble(depth)), `"NaN"`, `"Infinity"`, `"-Infinity"`)
		return g.surfaced(fmt.Sprintf("%q.format([%s, %s])", g.oneOf("%s %e", "%s|%f", "%s %.3e", "%s:%.1f"), arg, g.formatDouble(depth)))
	case 2:
		chain := g.optionalChain()
		switch g.pick(4) {
		case 0:
			return chain + ".hasValue()"
		case 1:
			return fmt.Sprintf("%s.orValue(%s) %s %s", chain, g.oneOf("0", "1", "2"), g.oneOf("==", "!="), g.oneOf("0", "1", "2"))
		case 2:
			return fmt.Sprintf("%s %s optional.none()", chain, g.oneOf("==", "!="))
		default:
			return fmt.Sprintf("has(%s.f)", chain)
		}
	case 3:
		v := g.oneOf(mixedValues...)
		switch g.pick(3) {
		case 0:
			return fmt.Sprintf("has({'k': %s}.k%s.f)", v, g.oneOf("", ".f", "['f']"))
		case 1:
			return fmt.Sprintf("has(%s.f)", v)
		default:
			return fmt.Sprintf("cel.bind(%s, %s, has(%s.f))", "x", v, "x")
		}
	default:
		// Optional list and map entries mixing selections with optional.of(x).
		n := 2 + g.pick(2)
		entries := ""
		for i := 0; i < n; i++ {
			if i > 0 {
				entries += ", "
			}
			if g.chance(0.85) {
				entries += "?" + g.optionalEntry()
			} else {
				entries += g.oneOf("42", "'s'", "{}.c", "[][0]", "{}['c']")
			}
		}
		if g.chance(0.3) {
			return fmt.Sprintf("{?'a': %s, %s'b': %s}.size() %s %s", g.optionalEntry(), g.oneOf("", "?"), g.optionalEntry(), cmp, g.oneOf("0", "1", "2"))
		}
		return fmt.Sprintf("[%s]%s", entries, g.oneOf(".size() "+cmp+" 1", " == [42]", ".map(x, x == 42).size() == 1", "[0] == 42"))
	}
}
