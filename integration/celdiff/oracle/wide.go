package main

// The wider grammar of seeds >= wideGrammarFirstSeed: timestamps and durations (arithmetic,
// getters with time zones), format() of lists and maps, optional indexing with a computed key,
// lists and maps of library values (Quantity, Semver, IP, CIDR) compared and sorted,
// indexOf/lastIndexOf with offsets, transformList/transformMap/transformMapEntry, and the IP,
// CIDR, format, strings, lists and math members the corpus has.

import (
	"fmt"
	"strconv"
)

// wideGrammarFirstSeed is the first seed that uses the wide grammar. Seeds below it (CI runs
// 1-3, 4-40 were searched before) produce the selectors they always did.
const wideGrammarFirstSeed = 41

// wideAtoms is the number of productions wideAtom adds to extraAtom.
const wideAtoms = 14

var (
	timestampLits = []string{"2024-01-01T00:00:00Z", "2024-02-29T23:59:59.999Z", "2020-01-01T00:00:00+01:00",
		"2023-06-15T12:30:45.123456789-07:00", "1970-01-01T00:00:00Z", "0001-01-01T00:00:00Z",
		"9999-12-31T23:59:59Z", "2024-02-30T00:00:00Z", "2024-01-01", "2024-03-10T02:30:00+05:30", "x"}
	durationLits = []string{"1h", "1.5h", "-30m", "1h30m", "100ms", "1us", "1ns", "0s", "1x", "", "290h",
		"3600s", "-1.5s", "2562047h", "1d"}
	zoneLits = []string{`"UTC"`, `"America/New_York"`, `"Europe/Berlin"`, `"+05:30"`, `"-08:00"`, `"02:00"`,
		`"Asia/Kolkata"`, `"Bad/Zone"`, `""`, `"Z"`}
	ipLits   = []string{"10.0.0.1", "10.1.2.3", "192.168.0.1", "127.0.0.1", "::1", "2001:db8::1", "fe80::1", "0.0.0.0", "1.2.3", "::ffff:1.2.3.4", "x"}
	cidrLits = []string{"10.0.0.0/8", "10.1.0.0/16", "192.168.0.0/24", "2001:db8::/32", "::/0", "10.0.0.1/8", "1.2.3.4/33", "10.0.0.0"}
)

func (g *generator) newVar() string {
	g.vars++
	return fmt.Sprintf("v%d", g.vars)
}

func (g *generator) timestampExpr(depth int) string {
	if depth <= 0 || g.chance(0.5) {
		return "timestamp(" + strconv.Quote(g.oneOf(timestampLits...)) + ")"
	}
	switch g.pick(3) {
	case 0:
		return g.timestampExpr(depth-1) + " + " + g.durationExpr(depth-1)
	case 1:
		return g.timestampExpr(depth-1) + " - " + g.durationExpr(depth-1)
	default:
		return "timestamp(" + g.oneOf(g.intExpr(depth-1), g.stringExpr(depth-1)) + ")"
	}
}

func (g *generator) durationExpr(depth int) string {
	if depth <= 0 || g.chance(0.5) {
		return "duration(" + strconv.Quote(g.oneOf(durationLits...)) + ")"
	}
	switch g.pick(4) {
	case 0:
		return "(" + g.durationExpr(depth-1) + " " + g.oneOf("+", "-") + " " + g.durationExpr(depth-1) + ")"
	case 1:
		return "(" + g.timestampExpr(depth-1) + " - " + g.timestampExpr(depth-1) + ")"
	case 2:
		return "duration(" + g.stringExpr(depth-1) + ")"
	default:
		return "duration(string(" + g.intExpr(depth-1) + ") + " + g.oneOf(`"s"`, `"ms"`, `"h"`, `""`) + ")"
	}
}

func (g *generator) ipExpr() string {
	if g.chance(0.2) {
		return "ip(" + g.ref("string") + ")"
	}
	if g.chance(0.2) {
		return "cidr(" + strconv.Quote(g.oneOf(cidrLits...)) + ").ip()"
	}
	return "ip(" + strconv.Quote(g.oneOf(ipLits...)) + ")"
}

func (g *generator) cidrExpr() string {
	if g.chance(0.15) {
		return "cidr(" + g.ref("string") + ")"
	}
	if g.chance(0.2) {
		return "cidr(" + strconv.Quote(g.oneOf(cidrLits...)) + ").masked()"
	}
	return "cidr(" + strconv.Quote(g.oneOf(cidrLits...)) + ")"
}

// libValue renders a value of one library type (the same type for the same kind).
func (g *generator) libValue(kind, depth int) string {
	switch kind {
	case 0:
		return g.quantityExpr(depth)
	case 1:
		return g.semverExpr(depth)
	case 2:
		return g.ipExpr()
	case 3:
		return g.cidrExpr()
	case 4:
		return g.timestampExpr(depth)
	default:
		return g.durationExpr(depth)
	}
}

func (g *generator) libList(kind, depth int) string {
	n := g.pick(4)
	out := "["
	for i := 0; i < n; i++ {
		if i > 0 {
			out += ", "
		}
		out += g.libValue(kind, depth)
	}
	return out + "]"
}

func (g *generator) wideAtom(depth int, cmp string, k int) string {
	d := g.oneOf(append(g.domains, "unknown.example.com")...)
	switch k {
	case 0:
		// Timestamp getters, with and without a time zone.
		getter := g.oneOf("getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek",
			"getDayOfYear", "getHours", "getMinutes", "getSeconds", "getMilliseconds")
		zone := ""
		if g.chance(0.6) {
			zone = g.oneOf(zoneLits...)
		}
		return fmt.Sprintf("%s.%s(%s) %s %s", g.timestampExpr(depth), getter, zone, cmp, g.oneOf(intLits...))
	case 1:
		getter := g.oneOf("getHours", "getMinutes", "getSeconds", "getMilliseconds")
		return fmt.Sprintf("%s.%s() %s %s", g.durationExpr(depth), getter, cmp, g.oneOf(intLits...))
	case 2:
		if g.chance(0.5) {
			return fmt.Sprintf("%s %s %s", g.timestampExpr(depth), cmp, g.timestampExpr(depth))
		}
		return fmt.Sprintf("%s %s %s", g.durationExpr(depth), cmp, g.durationExpr(depth))
	case 3:
		// Conversions of time values to string and int, and back.
		switch g.pick(4) {
		case 0:
			return fmt.Sprintf("string(%s) %s %s", g.timestampExpr(depth), g.oneOf("==", "!="), g.oneOf(append(stringLits, `"2024-01-01T00:00:00Z"`)...))
		case 1:
			return fmt.Sprintf("string(%s) %s %s", g.durationExpr(depth), g.oneOf("==", "!="), g.oneOf(append(stringLits, `"3600s"`, `"5400s"`)...))
		case 2:
			return fmt.Sprintf("int(%s) %s %s", g.timestampExpr(depth), cmp, g.oneOf(intLits...))
		default:
			return fmt.Sprintf("%s in [%s, %s]", g.durationExpr(depth), g.durationExpr(depth), g.durationExpr(depth))
		}
	case 4:
		// format() of lists, maps and library values.
		arg := g.oneOf("[1, 2]", `["a", "b"]`, "[]", `{"a": 1}`, `{"b": [1.5], "a": "x"}`, "[[1], [2.5]]",
			g.libList(g.pick(6), depth), fmt.Sprintf("{%q: %s}", "k", g.libValue(g.pick(6), depth)),
			g.ref(g.oneOf("ints", "strings", "versions", "bools")), "[true, null]", "{1: 2, 0: 3}",
			"[b\"ab\"]", g.libValue(g.pick(6), depth))
		return fmt.Sprintf("%q.format([%s]) %s %s", g.oneOf("%s", "%s-%d", "%v", "%d", "%.1f", "%x", "%X", "%o", "%b", "%e"), arg, g.oneOf("==", "!="), g.oneOf(append(stringLits, `"[1, 2]"`, `"{a: 1}"`)...))
	case 5:
		// Optional index with a computed key.
		v := g.newVar()
		switch g.pick(4) {
		case 0:
			return fmt.Sprintf("cel.bind(%s, %s, device.attributes[%q][?%s].hasValue())", v, g.oneOf(`"model"`, `"memory"`, `"mo" + "del"`, g.stringExpr(depth)), d, v)
		case 1:
			return fmt.Sprintf("device.attributes[?%s].hasValue() %s %s", g.oneOf(`"gpu.example.com"`, g.stringExpr(depth), `device.driver`), g.oneOf("==", "!="), g.oneOf("true", "false"))
		case 2:
			return fmt.Sprintf("[1, 2, 3][?%s].orValue(%s) %s %s", g.intExpr(depth), g.oneOf(intLits...), cmp, g.oneOf(intLits...))
		default:
			return fmt.Sprintf("{\"a\": 1, \"b\": 2}[?%s].orValue(0) %s %s", g.stringExpr(depth), cmp, g.oneOf("0", "1", "2"))
		}
	case 6:
		// Equality and membership of lists and maps holding library values.
		kind := g.pick(6)
		switch g.pick(3) {
		case 0:
			return fmt.Sprintf("%s %s %s", g.libList(kind, depth), g.oneOf("==", "!="), g.libList(g.oneOfInt(kind, g.pick(6)), depth))
		case 1:
			return fmt.Sprintf("%s in %s", g.libValue(kind, depth), g.libList(kind, depth))
		default:
			return fmt.Sprintf("{\"a\": %s} %s {\"a\": %s}", g.libValue(kind, depth), g.oneOf("==", "!="), g.libValue(kind, depth))
		}
	case 7:
		// sort() and friends on lists of library values.
		kind := g.pick(6)
		list := g.libList(kind, depth)
		switch g.pick(3) {
		case 0:
			return fmt.Sprintf("%s.sort() %s %s", list, g.oneOf("==", "!="), g.libList(kind, depth))
		case 1:
			return fmt.Sprintf("%s.sort().size() %s %s", list, cmp, g.oneOf("0", "1", "2"))
		default:
			return fmt.Sprintf("%s.%s().size() %s %s", list, g.oneOf("distinct", "reverse", "flatten"), cmp, g.oneOf("0", "1", "2"))
		}
	case 8:
		// indexOf/lastIndexOf with an offset.
		return fmt.Sprintf("%s.%s(%s, %s) %s %s", g.stringExpr(depth), g.oneOf("indexOf", "lastIndexOf"), g.oneOf(stringLits...), g.oneOf("0", "1", "2", "3", "-1", "100", g.intExpr(depth)), cmp, g.oneOf("-1", "0", "1", "2"))
	case 9:
		// transformList, transformMap, transformMapEntry on attribute maps, lists and literals.
		switch g.pick(5) {
		case 0:
			return fmt.Sprintf("device.attributes[%q].transformMapEntry(k, v, {k + %s: v}).size() %s %s", d, g.oneOf(`""`, `"x"`), cmp, g.oneOf("0", "1", "3"))
		case 1:
			return fmt.Sprintf("device.attributes[%q].transformMap(k, v, %s, k).size() %s %s", d, g.oneOf(`k.size() > 4`, `type(v) == int`, `v != ""`), cmp, g.oneOf("0", "1", "3"))
		case 2:
			return fmt.Sprintf("%s.transformList(i, v, %s) %s %s", g.ref("ints"), g.oneOf("v * i", "i", "v + 1", "v / i"), g.oneOf("==", "!="), g.oneOf("[0, 2]", "[]", "[0, 1, 2]"))
		case 3:
			return fmt.Sprintf("%s.transformMap(i, v, %s)[%s] %s %s", g.ref(g.oneOf("ints", "strings")), g.oneOf("v", "i", "string(v)"), g.oneOf("0", "1", "5"), g.oneOf("==", "!="), g.oneOf("0", "1", `"fish"`))
		default:
			return fmt.Sprintf("{\"a\": 1, \"b\": 2}.transformMapEntry(k, v, %s) %s %s", g.oneOf(`{v: k}`, `{k: v * 2}`, `{"z": v}`, `v > 1 ? {k: v} : {}`), g.oneOf("==", "!="), g.oneOf(`{1: "a", 2: "b"}`, `{"a": 2, "b": 4}`, `{"z": 2}`, "{}"))
		}
	case 10:
		// IP and CIDR members.
		switch g.pick(6) {
		case 0:
			return fmt.Sprintf("%s.%s()", g.ipExpr(), g.oneOf("isLoopback", "isUnspecified", "isGlobalUnicast", "isLinkLocalMulticast", "isLinkLocalUnicast", "isCanonical"))
		case 1:
			return fmt.Sprintf("%s.family() %s %s", g.ipExpr(), cmp, g.oneOf("4", "6"))
		case 2:
			return fmt.Sprintf("%s.containsIP(%s)", g.cidrExpr(), g.oneOf(g.ipExpr(), strconv.Quote(g.oneOf(ipLits...))))
		case 3:
			return fmt.Sprintf("%s.containsCIDR(%s)", g.cidrExpr(), g.oneOf(g.cidrExpr(), strconv.Quote(g.oneOf(cidrLits...))))
		case 4:
			return fmt.Sprintf("%s.prefixLength() %s %s", g.cidrExpr(), cmp, g.oneOf("0", "8", "16", "32"))
		default:
			return fmt.Sprintf("%s(%s)", g.oneOf("isIP", "isCIDR"), g.oneOf(g.stringExpr(depth), strconv.Quote(g.oneOf(append(ipLits, cidrLits...)...))))
		}
	case 11:
		// String and format-library members: quote, reverse, format validators.
		switch g.pick(3) {
		case 0:
			return fmt.Sprintf("strings.quote(%s) %s %s", g.stringExpr(depth), g.oneOf("==", "!="), g.oneOf(stringLits...))
		case 1:
			return fmt.Sprintf("%s.reverse() %s %s", g.stringExpr(depth), g.oneOf("==", "!="), g.oneOf(stringLits...))
		default:
			return fmt.Sprintf("format.%s().validate(%s).hasValue()", g.oneOf("dns1123Label", "dns1123Subdomain", "qualifiedName", "labelValue", "uri", "uuid", "byte", "date", "datetime", "dns1035Label", "namedFormat"), g.stringExpr(depth))
		}
	case 12:
		// The lists library: sortBy, range, first/last, and math.
		switch g.pick(4) {
		case 0:
			return fmt.Sprintf("%s.sortBy(x, %s) %s %s", g.ref(g.oneOf("ints", "strings", "versions")), g.oneOf("x", "-x", "x.size()", "string(x)"), g.oneOf("==", "!="), g.oneOf("[1, 2, 3]", `["bird", "fish"]`, "[]"))
		case 1:
			return fmt.Sprintf("lists.range(%s).size() %s %s", g.oneOf("0", "3", "-1", g.intExpr(depth)), cmp, g.oneOf("0", "3"))
		case 2:
			return fmt.Sprintf("%s.%s().orValue(0) %s %s", g.ref("ints"), g.oneOf("first", "last"), cmp, g.oneOf(intLits...))
		default:
			return fmt.Sprintf("math.%s(%s, %s) %s %s", g.oneOf("greatest", "least"), g.intExpr(depth), g.intExpr(depth), cmp, g.oneOf(intLits...))
		}
	default:
		// Library values through dyn() and as map values in comprehensions.
		kind := g.pick(6)
		return fmt.Sprintf("%s.%s(x, %s)", g.libList(kind, depth), g.oneOf("exists", "all", "exists_one"), g.oneOf("x == "+g.libValue(kind, depth), "dyn(x) != null", "type(x) == type("+g.libValue(kind, depth)+")"))
	}
}

// oneOfInt picks one of the given ints.
func (g *generator) oneOfInt(options ...int) int { return options[g.pick(len(options))] }
