package main

// Seeded random DRA selectors from a small typed grammar. Most attribute references name
// attributes that exist with the type the production expects; some name missing attributes,
// unknown domains or the wrong type, so runtime errors (no such key, no matching overload,
// overflow, division by zero, bad quantity/semver text) are exercised as much as results.

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
)

type attrRef struct {
	domain, id string
}

type generator struct {
	rng *rand.Rand
	// Attribute references by type: "int", "bool", "string", "version", "ints", "strings", ...
	byType   map[string][]attrRef
	capacity []attrRef
	domains  []string
	vars     int
	// wide turns on the productions added after seeds 1-40 were fixed (wide.go); seeds 1-40
	// keep the exact stream they had, so the CI seeds and the recorded results stay valid.
	wide bool
	// wider: the productions of wider.go (seeds >= 141).
	wider bool
}

func newGenerator(seed int64, devices []*corpusDevice) *generator {
	g := &generator{rng: rand.New(rand.NewSource(seed)), byType: map[string][]attrRef{},
		wide: seed >= wideGrammarFirstSeed, wider: seed >= widerGrammarFirstSeed}
	seenDomain := map[string]bool{}
	seen := map[string]bool{}
	add := func(typ string, r attrRef) {
		key := typ + "|" + r.domain + "|" + r.id
		if !seen[key] {
			seen[key] = true
			g.byType[typ] = append(g.byType[typ], r)
		}
		if !seenDomain[r.domain] {
			seenDomain[r.domain] = true
			g.domains = append(g.domains, r.domain)
		}
	}
	for _, d := range devices {
		names := make([]string, 0, len(d.Attributes))
		for n := range d.Attributes {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a := d.Attributes[n]
			r := split(n, d.Driver)
			switch {
			case a.IntValue != nil:
				add("int", r)
			case a.BoolValue != nil:
				add("bool", r)
			case a.StringValue != nil:
				add("string", r)
			case a.VersionValue != nil:
				add("version", r)
			case a.IntValues != nil:
				add("ints", r)
			case a.BoolValues != nil:
				add("bools", r)
			case a.StringValues != nil:
				add("strings", r)
			case a.VersionValues != nil:
				add("versions", r)
			}
		}
		caps := make([]string, 0, len(d.Capacity))
		for n := range d.Capacity {
			caps = append(caps, n)
		}
		sort.Strings(caps)
		for _, n := range caps {
			r := split(n, d.Driver)
			key := "cap|" + r.domain + "|" + r.id
			if !seen[key] {
				seen[key] = true
				g.capacity = append(g.capacity, r)
			}
		}
	}
	sort.Strings(g.domains)
	return g
}

func split(name, driver string) attrRef {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return attrRef{name[:i], name[i+1:]}
	}
	return attrRef{driver, name}
}

func (g *generator) pick(n int) int        { return g.rng.Intn(n) }
func (g *generator) chance(p float64) bool { return g.rng.Float64() < p }

func (g *generator) oneOf(options ...string) string { return options[g.pick(len(options))] }

// ref renders an attribute reference of the wanted type (sometimes a missing one).
func (g *generator) ref(typ string) string {
	var r attrRef
	refs := g.byType[typ]
	switch {
	case len(refs) == 0 || g.chance(0.06):
		r = attrRef{g.oneOf(append(g.domains, "unknown.example.com")...), g.oneOf("missing", "model", "x")}
	case g.chance(0.08):
		// Right name, possibly the wrong type: any attribute at all.
		all := []attrRef{}
		for _, v := range g.byType {
			all = append(all, v...)
		}
		sort.Slice(all, func(i, j int) bool { return all[i].domain+all[i].id < all[j].domain+all[j].id })
		r = all[g.pick(len(all))]
	default:
		r = refs[g.pick(len(refs))]
	}
	return g.render("attributes", r)
}

func (g *generator) render(field string, r attrRef) string {
	base := fmt.Sprintf("device.%s[%q]", field, r.domain)
	switch g.pick(4) {
	case 0:
		return fmt.Sprintf("%s[%q]", base, r.id)
	default:
		return base + "." + r.id
	}
}

func (g *generator) capRef() string {
	if len(g.capacity) == 0 || g.chance(0.06) {
		return g.render("capacity", attrRef{g.oneOf(g.domains...), "missing"})
	}
	return g.render("capacity", g.capacity[g.pick(len(g.capacity))])
}

var (
	intLits      = []string{"0", "1", "2", "3", "7", "8", "16", "40", "80", "100", "1024", "-1", "-5", "9223372036854775807", "-9223372036854775808", "4611686018427387904"}
	stringLits   = []string{`""`, `"a100"`, `"h100"`, `"gpu"`, `"nvidia"`, `"fish"`, `"bird"`, `"gpu.example.com"`, `"Tesla"`, `"a"`, `"ABC"`, `"x-y-z"`, `"12"`, `" pad "`}
	regexLits    = []string{`"^a"`, `"[0-9]+"`, `"h.*0$"`, `"(?i)tesla"`, `"^$"`, `"a|b"`, `"[^a]?sym"`}
	quantityLits = []string{"0", "1", "1k", "1Ki", "1Mi", "1Gi", "16Gi", "40Gi", "80Gi", "100m", "1.5", "1.5Gi", "1e3", "2G", "200M", "0.2G", "10", "-1", "1n", "9223372036854775807", "1Ei", "bad", "200K", "Mi", ""}
	semverLits   = []string{"0.0.1", "1.0.0", "1.2.3", "12.2.0", "12.4.1", "2.0.0-rc.1", "2.0.0", "1.0.0-alpha", "v1.2", "1.2", "01.2.3", "x"}
)

func (g *generator) boolExpr(depth int) string {
	if depth <= 0 {
		return g.boolAtom(0)
	}
	switch g.pick(10) {
	case 0:
		return g.boolExpr(depth-1) + " && " + g.boolExpr(depth-1)
	case 1:
		return g.boolExpr(depth-1) + " || " + g.boolExpr(depth-1)
	case 2:
		return "!(" + g.boolExpr(depth-1) + ")"
	case 3:
		return "(" + g.boolExpr(depth-1) + " ? " + g.boolExpr(depth-1) + " : " + g.boolExpr(depth-1) + ")"
	case 4:
		g.vars++
		v := fmt.Sprintf("v%d", g.vars)
		return fmt.Sprintf("cel.bind(%s, %s, %s > 0 || %s)", v, g.intExpr(depth-1), v, g.boolExpr(depth-1))
	default:
		return g.boolAtom(depth - 1)
	}
}

func (g *generator) boolAtom(depth int) string {
	cmp := g.oneOf("==", "!=", "<", "<=", ">", ">=")
	if g.chance(0.3) {
		return g.extraAtom(depth, cmp)
	}
	switch g.pick(22) {
	case 0:
		return fmt.Sprintf("device.driver == %s", g.oneOf(`"gpu.example.com"`, `"nic.example.com"`, `"x"`))
	case 1:
		return g.intExpr(depth) + " " + cmp + " " + g.intExpr(depth)
	case 2:
		return g.stringExpr(depth) + " " + g.oneOf("==", "!=", "<", ">") + " " + g.stringExpr(depth)
	case 3:
		return fmt.Sprintf("%s.%s(%s)", g.stringExpr(depth), g.oneOf("startsWith", "endsWith", "contains"), g.stringExpr(depth))
	case 4:
		return fmt.Sprintf("%s.matches(%s)", g.stringExpr(depth), g.oneOf(regexLits...))
	case 5:
		return fmt.Sprintf("%s.%s(%s)", g.quantityExpr(depth), g.oneOf("isGreaterThan", "isLessThan"), g.quantityExpr(depth))
	case 6:
		return fmt.Sprintf("%s.compareTo(%s) %s %s", g.quantityExpr(depth), g.quantityExpr(depth), cmp, g.oneOf("-1", "0", "1"))
	case 7:
		return fmt.Sprintf("%s %s %s", g.quantityExpr(depth), g.oneOf("==", "!="), g.quantityExpr(depth))
	case 8:
		return fmt.Sprintf("%s.%s(%s)", g.semverExpr(depth), g.oneOf("isGreaterThan", "isLessThan"), g.semverExpr(depth))
	case 9:
		return fmt.Sprintf("%s %s %s", g.semverExpr(depth), g.oneOf("==", "!="), g.semverExpr(depth))
	case 10:
		return g.ref("bool")
	case 11:
		r := g.ref(g.oneOf("int", "string", "bool", "version"))
		if i := strings.LastIndex(r, "."); i > 0 && g.chance(0.5) && !strings.HasSuffix(r, "]") {
			return "has(" + r + ")"
		}
		return fmt.Sprintf("%s in device.attributes[%q]", g.oneOf(`"model"`, `"memory"`, `"missing"`, `"cuda"`), g.oneOf(append(g.domains, "unknown.example.com")...))
	case 12:
		return fmt.Sprintf("%s in device.%s", g.oneOf(`"gpu.example.com"`, `"dra.example.com"`, `"unknown.example.com"`), g.oneOf("attributes", "capacity"))
	case 13:
		d := g.oneOf(append(g.domains, "unknown.example.com")...)
		return fmt.Sprintf("device.attributes[%q].?%s.orValue(%s) %s", d, g.oneOf("model", "memory", "missing", "virtual"), g.oneOf(`""`, "0", "false"), g.oneOf("== \"a100\"", "!= 0", "== false"))
	case 14:
		d := g.oneOf(append(g.domains, "unknown.example.com")...)
		m := g.oneOf("exists", "all", "exists_one")
		return fmt.Sprintf("device.attributes[%q].%s(k, %s)", d, m, g.oneOf(`k.startsWith("m")`, `k.size() > 4`, `k == "model"`, `k != ""`))
	case 15:
		return fmt.Sprintf("device.attributes.%s(d, %s)", g.oneOf("exists", "all", "exists_one"), g.oneOf(`d.endsWith(".com")`, `d == "gpu.example.com"`, `size(device.attributes[d]) > 1`))
	case 16:
		d := g.oneOf(append(g.domains, "unknown.example.com")...)
		return fmt.Sprintf("device.attributes[%q].filter(k, %s).size() %s %s", d, g.oneOf(`k.contains("e")`, `k.size() < 6`), cmp, g.oneOf("0", "1", "2"))
	case 17:
		switch g.pick(4) {
		case 0:
			return fmt.Sprintf("%s.exists(x, x > %s)", g.ref("ints"), g.oneOf(intLits...))
		case 1:
			return fmt.Sprintf("%s in %s", g.oneOf(intLits...), g.ref("ints"))
		case 2:
			return fmt.Sprintf("%s.includes(%s)", g.ref(g.oneOf("strings", "string")), g.oneOf(stringLits...))
		default:
			return fmt.Sprintf("%s.all(v, v.isGreaterThan(semver(%q)))", g.ref("versions"), g.oneOf(semverLits...))
		}
	case 18:
		return fmt.Sprintf("isQuantity(%q)", g.oneOf(quantityLits...))
	case 19:
		if g.chance(0.5) {
			return fmt.Sprintf("isSemver(%q)", g.oneOf(semverLits...))
		}
		return fmt.Sprintf("isSemver(%q, true)", g.oneOf(semverLits...))
	case 20:
		return fmt.Sprintf("%s.isInteger()", g.quantityExpr(depth))
	default:
		return g.oneOf("true", "false", "device.allowMultipleAllocations", "device.allowMultipleAllocations == false")
	}
}

func (g *generator) intExpr(depth int) string {
	if depth <= 0 || g.chance(0.4) {
		switch g.pick(4) {
		case 0, 1:
			return g.ref("int")
		default:
			return g.oneOf(intLits...)
		}
	}
	switch g.pick(9) {
	case 0, 1:
		return "(" + g.intExpr(depth-1) + " " + g.oneOf("+", "-", "*", "/", "%") + " " + g.intExpr(depth-1) + ")"
	case 2:
		return "size(" + g.stringExpr(depth-1) + ")"
	case 3:
		return g.stringExpr(depth-1) + ".size()"
	case 4:
		return g.quantityExpr(depth-1) + ".compareTo(" + g.quantityExpr(depth-1) + ")"
	case 5:
		return g.semverExpr(depth-1) + "." + g.oneOf("major", "minor", "patch") + "()"
	case 6:
		return g.quantityExpr(depth-1) + ".asInteger()"
	case 7:
		return "int(" + g.oneOf(`"12"`, `"-3"`, `"x"`, "2.5", "1e30", g.quantityExpr(depth-1)+".asApproximateFloat()") + ")"
	default:
		return g.stringExpr(depth-1) + ".indexOf(" + g.oneOf(stringLits...) + ")"
	}
}

func (g *generator) stringExpr(depth int) string {
	if depth <= 0 || g.chance(0.4) {
		switch g.pick(5) {
		case 0, 1:
			return g.ref("string")
		case 2:
			return "device.driver"
		default:
			return g.oneOf(stringLits...)
		}
	}
	switch g.pick(7) {
	case 0:
		return g.stringExpr(depth-1) + " + " + g.stringExpr(depth-1)
	case 1:
		return g.stringExpr(depth-1) + "." + g.oneOf("lowerAscii", "upperAscii", "trim") + "()"
	case 2:
		return fmt.Sprintf("%s.substring(%s)", g.stringExpr(depth-1), g.oneOf("0", "1", "2", "5", "-1"))
	case 3:
		return "string(" + g.intExpr(depth-1) + ")"
	case 4:
		return fmt.Sprintf("%s.replace(%s, %s)", g.stringExpr(depth-1), g.oneOf(stringLits...), g.oneOf(stringLits...))
	case 5:
		return fmt.Sprintf("%s.split(%s)[%s]", g.stringExpr(depth-1), g.oneOf(`"."`, `"-"`, `""`), g.oneOf("0", "1"))
	default:
		return fmt.Sprintf("%s.charAt(%s)", g.stringExpr(depth-1), g.oneOf("0", "1", "3", "100"))
	}
}

func (g *generator) quantityExpr(depth int) string {
	if depth <= 0 || g.chance(0.5) {
		if g.chance(0.5) {
			return g.capRef()
		}
		return "quantity(" + strconv.Quote(g.oneOf(quantityLits...)) + ")"
	}
	switch g.pick(2) {
	case 0:
		return fmt.Sprintf("%s.%s(%s)", g.quantityExpr(depth-1), g.oneOf("add", "sub"), g.quantityExpr(depth-1))
	default:
		return fmt.Sprintf("%s.%s(%s)", g.quantityExpr(depth-1), g.oneOf("add", "sub"), g.oneOf(intLits...))
	}
}

func (g *generator) semverExpr(depth int) string {
	_ = depth
	switch g.pick(3) {
	case 0:
		return g.ref("version")
	case 1:
		return "semver(" + strconv.Quote(g.oneOf(semverLits...)) + ")"
	default:
		return "semver(" + strconv.Quote(g.oneOf(semverLits...)) + ", true)"
	}
}

func randomSelectors(n int, seed int64, devices []*corpusDevice) []corpusSelector {
	g := newGenerator(seed, devices)
	out := make([]corpusSelector, 0, n)
	for i := 0; i < n; i++ {
		g.vars = 0
		out = append(out, corpusSelector{Expr: g.boolExpr(1 + g.pick(3)), Source: fmt.Sprintf("random:%d:%d", seed, i)})
	}
	return out
}

var doubleLits = []string{"0.0", "1.5", "-2.5", "80.0", "1e10", "1e300", "0.1", "3.0"}
var uintLits = []string{"0u", "1u", "80u", "18446744073709551615u"}

// urlLits mixes what url.ParseRequestURI accepts (absolute URIs and paths, IPv6 hosts, escapes,
// queries, fragments) with what it rejects (relative paths, bad escapes, ports, colons).
var urlLits = []string{`"https://example.com:8443/a%2Fb?x=1&y=2&x=3#frag"`, `"/absolute/path"`,
	`"http://[::1]:80/"`, `"relative/path"`, `"http://h/%zz"`, `"https://a:b:c/"`, `"foo://h:80:90/p"`,
	`"mailto:x@y"`, `"//host/p q"`, `""`, `"HTTP://User:Pw@Example.com/?a+b=c%20d;e"`, `"*"`}

// extraAtom covers the rest of the standard library users reach for: doubles and uints and
// cross-type numeric comparison, list and map literals, indexing, two-variable comprehensions,
// optional chains, list/set extension functions, type(), string formatting, and errors inside
// ternaries and logical operators.
func (g *generator) extraAtom(depth int, cmp string) string {
	d := g.oneOf(append(g.domains, "unknown.example.com")...)
	n := 26
	if g.wide {
		n += wideAtoms
	}
	if g.wider {
		n += widerAtoms
	}
	k := g.pick(n)
	if k >= 26+wideAtoms {
		return g.widerAtom(depth, cmp, k-26-wideAtoms)
	}
	if k >= 26 {
		return g.wideAtom(depth, cmp, k-26)
	}
	switch k {
	case 0:
		return fmt.Sprintf("double(%s) %s %s", g.intExpr(depth), cmp, g.oneOf(doubleLits...))
	case 1:
		return fmt.Sprintf("%s %s %s", g.ref("int"), cmp, g.oneOf(append(doubleLits, uintLits...)...))
	case 2:
		return fmt.Sprintf("%s.asApproximateFloat() %s %s", g.quantityExpr(depth), cmp, g.oneOf(doubleLits...))
	case 3:
		return fmt.Sprintf("(%s %s %s) %s %s", g.oneOf(doubleLits...), g.oneOf("+", "-", "*", "/"), g.oneOf(doubleLits...), cmp, g.oneOf(doubleLits...))
	case 4:
		return fmt.Sprintf("uint(%s) %s %s %s %s", g.intExpr(depth), g.oneOf("+", "-", "*", "/", "%"), g.oneOf(uintLits...), cmp, g.oneOf(uintLits...))
	case 5:
		return fmt.Sprintf("%s in [%s, %s, %s]", g.ref(g.oneOf("string", "int")), g.oneOf(stringLits...), g.oneOf(stringLits...), g.oneOf(stringLits...))
	case 6:
		return fmt.Sprintf("%s in [%s, %s]", g.ref("int"), g.oneOf(intLits...), g.oneOf(intLits...))
	case 7:
		return fmt.Sprintf("[%s, %s].%s(x, x %s %s)", g.intExpr(depth), g.intExpr(depth), g.oneOf("exists", "all", "exists_one"), cmp, g.oneOf(intLits...))
	case 8:
		return fmt.Sprintf("%s[%s] %s %s", g.ref("ints"), g.oneOf("0", "1", "2", "-1", "10"), cmp, g.oneOf(intLits...))
	case 9:
		return fmt.Sprintf("{%s: %s, %s: %s}[%s] %s %s", g.oneOf(`"a"`, `"b"`), g.intExpr(depth), g.oneOf(`"c"`, `"d"`), g.oneOf(intLits...), g.oneOf(`"a"`, `"c"`, `"z"`), cmp, g.oneOf(intLits...))
	case 10:
		return fmt.Sprintf("device.attributes[%q].%s(k, v, %s)", d, g.oneOf("all", "exists", "existsOne"), g.oneOf(`k.size() > 3 && v != ""`, `v == 80`, `type(v) == string`, `k == "model" || v == true`, `v != null`))
	case 11:
		return fmt.Sprintf("device.attributes[?%q].?%s.orValue(%s) %s %s", d, g.oneOf("model", "memory", "missing", "virtual", "tags"), g.oneOf(`""`, "0", "false", "[]"), g.oneOf("==", "!="), g.oneOf(`"a100"`, "80", "true", "[]"))
	case 12:
		return fmt.Sprintf("optional.of(%s).or(optional.none()).value() %s %s", g.intExpr(depth), cmp, g.oneOf(intLits...))
	case 13:
		return fmt.Sprintf("%s.%s() %s %s", g.ref("ints"), g.oneOf("sum", "max", "min", "size"), cmp, g.oneOf(intLits...))
	case 14:
		return fmt.Sprintf("%s.%s == %s", g.ref(g.oneOf("ints", "strings")), g.oneOf("sort()", "distinct()", "reverse()", "slice(0, 1)", "flatten()"), g.oneOf("[1, 2, 3]", `["bird", "fish"]`, "[]", "[4]"))
	case 15:
		return fmt.Sprintf("sets.%s(%s, %s)", g.oneOf("contains", "intersects", "equivalent"), g.ref(g.oneOf("ints", "strings")), g.oneOf("[1]", `["fish"]`, "[]", "[1, 2, 3]"))
	case 16:
		return fmt.Sprintf("type(%s) == %s", g.ref(g.oneOf("int", "string", "bool", "version", "ints")), g.oneOf("int", "string", "bool", "list", "double", "type(semver(\"1.0.0\"))"))
	case 17:
		return fmt.Sprintf("%q.format([%s]) == %s", g.oneOf("%s", "%d", "%s-%s", "%.2f", "%x"), g.oneOf(g.stringExpr(depth), g.intExpr(depth), g.oneOf(doubleLits...)), g.oneOf(stringLits...))
	case 18:
		return fmt.Sprintf("%s.join(%s) %s %s", g.ref("strings"), g.oneOf(`","`, `""`), g.oneOf("==", "!="), g.oneOf(`"fish,bird"`, `"horse"`, `""`))
	case 19:
		return fmt.Sprintf("(%s ? %s : %s)", g.boolAtom(0), g.oneOf("1 / 0 == 0", "[][0] == 1", `{"a": 1}["b"] == 1`), g.boolAtom(0))
	case 20:
		return fmt.Sprintf("(%s %s %s)", g.oneOf("1 / 0 == 0", "int(\"x\" + device.driver) == 1", g.ref("bool")), g.oneOf("&&", "||"), g.boolAtom(0))
	case 21:
		return fmt.Sprintf("dyn(%s) %s dyn(%s)", g.ref(g.oneOf("int", "string", "version", "bool")), g.oneOf("==", "!="), g.oneOf(append(intLits, append(stringLits, doubleLits...)...)...))
	case 22:
		return fmt.Sprintf("%s.lastIndexOf(%s) %s %s", g.stringExpr(depth), g.oneOf(stringLits...), cmp, g.oneOf("-1", "0", "2"))
	case 24:
		// The URL library: a literal, an attribute or a string built from one.
		u := g.oneOf(append(urlLits, g.stringExpr(depth), `"https://" + `+g.stringExpr(depth)+` + "/x"`)...)
		switch g.pick(4) {
		case 0:
			return "isURL(" + u + ")"
		case 1:
			return fmt.Sprintf("url(%s).%s() %s %s", u, g.oneOf("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath"), g.oneOf("==", "!="), g.oneOf(append(stringLits, `"https"`, `"example.com"`, `"/absolute/path"`)...))
		case 2:
			// No short-circuit over the query map: Go iterates it in a random order.
			return fmt.Sprintf("url(%s).getQuery().%s", u, g.oneOf(`size() > 0`, `exists(k, k == "q")`, `?x.orValue([]).size() == 2`))
		default:
			return fmt.Sprintf("url(%s) %s url(%s)", u, g.oneOf("==", "!="), g.oneOf(urlLits...))
		}
	case 25:
		// Type values: the declared library types and type(x) of library values.
		return fmt.Sprintf("type(%s) %s %s", g.oneOf(`ip("10.0.0.1")`, `cidr("10.0.0.0/8")`, `url("/a")`, `format.uuid()`, g.quantityExpr(depth), g.ref("string")), g.oneOf("==", "!="), g.oneOf("net.IP", "net.CIDR", "string", `type(url("/b"))`, "type(format.dns1123Label())", `type(quantity("1"))`))
	default:
		return fmt.Sprintf("device.attributes.transformMap(k, v, size(v))[%q] %s %s", d, cmp, g.oneOf("0", "3", "10"))
	}
}
