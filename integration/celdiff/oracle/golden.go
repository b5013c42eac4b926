package main

// Golden data for devlet's Quantity and Semver ports, computed with the upstream Go code
// (k8s.io/apimachinery resource.Quantity, Kubernetes' CEL semver library semantics through
// blang/semver). `celdiff-oracle golden-quantity` and `golden-semver` print JSON lines that
// allocator/cel/tests/data/*.jsonl keep; regenerate them with scripts in this folder's README.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/cel/library"
)

type quantityFacts struct {
	OK     bool   `json:"ok"`
	String string `json:"str,omitempty"`
	Int    *int64 `json:"int,omitempty"`
	Float  string `json:"float,omitempty"`
	Sign   int    `json:"sign"`
	Error  string `json:"error,omitempty"`
	value  *resource.Quantity
}

func facts(q resource.Quantity) quantityFacts {
	f := quantityFacts{OK: true, Sign: q.Sign()}
	if v, ok := q.AsInt64(); ok {
		f.Int = &v
	}
	f.Float = strconv.FormatFloat(q.AsApproximateFloat64(), 'g', -1, 64)
	f.String = q.String()
	f.value = &q
	return f
}

// quantityInputs: hand-picked edge cases plus seeded random strings over the grammar's alphabet.
func quantityInputs(random int) []string {
	inputs := []string{
		"0", "00", "-0", "+0", "1", "+1", "-1", "01", "007", "1.0", "1.", ".5", ".", "-", "+", "",
		"1k", "1K", "200K", "200k", "1M", "1G", "1T", "1P", "1E", "1000E", "1000000E", "1m", "1u",
		"1n", "0.1n", "0.5n", "1.5n", "-0.1n", "100m", "1500m", "1.5", "1.500", "0.500", "1.5G",
		"1Ki", "8Ki", "1024Ki", "1025Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei", "8Ei", "7Ei", "-8Ei",
		"1.5Gi", "0.5Ki", ".5Ki", "0.001Ki", "1023", "1024", "1025", "Ki", "Mi", "Gi", "Ti", "Pi",
		"Ei", "e5", "E", "1e3", "1E3", "1e-3", "1e+3", "1e", "1ee3", "1Ee3", "1e-9", "1e-10",
		"1e-20", "0e-20", ".e-20", "-e-20", "5.e-20", "1e18", "1e19", "1e100", "1e308", "1e309",
		"-1e309", "1e-400", "1e4294967296", "1e9223372036854775807", "1e9223372036854775808",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "999999999999999999",
		"1000000000000000000", "9999999999999999999999999999999999999G", "12.34567890123456789",
		"0.000000000000000001", "123456789012345678", "1234567890123456789", "1.1.M", "1+1.0M",
		"0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1", "1 ", "1,3G", "Three",
		"1.3G", "1.3Gi", "10000k", "50000000G", "50k", "100Mi", "150Mi", "200M", "0.2G", "50M",
		"50Mi", "1.5Mi", "3.5Ki", "-1.5Gi", "1536Mi", "2048", "2048Mi", "1048576Ki", "1.0001Ki",
		"123Ki", "4Gi", "16Gi", "80Gi", "40Gi", "1e6", "1e-6", "100u", "-100u", "1500u", "0.0001",
		"3e2", "3e-2", "3e-11", "12e6", "-12e6", "+5Mi", "1.5e3", "1.5e-3", "1.5E3", "1.23456e5",
		"1Mi1", "1k1", "--1", "+-1", "1-", "1e-", "1e+", "1.5.5", "1..5", "1/2", "0x10", "1_000",
		"\u00b51", "1\u00b5",
	}
	rng := rand.New(rand.NewSource(42))
	alphabet := []string{"0", "1", "5", "9", ".", "-", "+", "e", "E", "i", "k", "K", "m", "M",
		"G", "T", "P", "n", "u", "Ki", "Mi", "Gi", "Ei", "000", "12", "e-", "e+"}
	for ; random > 0; random-- {
		n := 1 + rng.Intn(6)
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		inputs = append(inputs, b.String())
	}
	return inputs
}

func goldenQuantity(random int) error {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	type parseLine struct {
		Op string `json:"op"`
		In string `json:"in"`
		quantityFacts
	}
	type binLine struct {
		Op  string        `json:"op"`
		X   string        `json:"x"`
		Y   string        `json:"y"`
		Cmp int           `json:"cmp"`
		Add quantityFacts `json:"add"`
		Sub quantityFacts `json:"sub"`
	}
	type intLine struct {
		Op  string        `json:"op"`
		X   string        `json:"x"`
		Y   int64         `json:"y"`
		Add quantityFacts `json:"add"`
		Sub quantityFacts `json:"sub"`
	}
	var valid []string
	for _, in := range quantityInputs(random) {
		line := parseLine{Op: "parse", In: in}
		q, err := resource.ParseQuantity(in)
		if err != nil {
			line.quantityFacts = quantityFacts{OK: false, Error: err.Error()}
		} else {
			line.quantityFacts = facts(q)
			valid = append(valid, in)
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	// Pairs: every valid input against a fixed panel, so the file stays readable in size.
	panel := []string{"0", "1", "-1", "1k", "1Ki", "1.5Gi", "100m", "1n", "0.1n", "1e3", "1e-3",
		"9223372036854775807", "-9223372036854775808", "1Ei", "1e100", "2048Mi", "999999999999999999"}
	for _, x := range valid {
		for _, y := range panel {
			qx := resource.MustParse(x)
			qy := resource.MustParse(y)
			line := binLine{Op: "binary", X: x, Y: y, Cmp: qx.Cmp(qy)}
			a := qx.DeepCopy()
			a.Add(qy)
			line.Add = facts(a)
			s := qx.DeepCopy()
			s.Sub(qy)
			line.Sub = facts(s)
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
		for _, y := range []int64{0, 1, -1, 1000, 1 << 62, -1 << 63, 1<<63 - 1} {
			qx := resource.MustParse(x)
			line := intLine{Op: "int", X: x, Y: y}
			a := qx.DeepCopy()
			a.Add(*resource.NewQuantity(y, resource.DecimalExponent))
			line.Add = facts(a)
			s := qx.DeepCopy()
			s.Sub(*resource.NewQuantity(y, resource.DecimalExponent))
			line.Sub = facts(s)
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
	}
	return nil
}

// semverNormalizeAndParse evaluates semver(s, true) with the real Kubernetes CEL semver library.
func semverNormalizeAndParse(s string) (semver.Version, error) {
	env, err := cel.NewEnv(library.SemverLib(library.SemverVersion(1)), cel.Variable("s", cel.StringType))
	if err != nil {
		return semver.Version{}, err
	}
	ast, iss := env.Compile("semver(s, true)")
	if iss.Err() != nil {
		return semver.Version{}, iss.Err()
	}
	prg, err := env.Program(ast)
	if err != nil {
		return semver.Version{}, err
	}
	val, _, err := prg.Eval(map[string]any{"s": s})
	if err != nil {
		return semver.Version{}, err
	}
	v, ok := val.Value().(semver.Version)
	if !ok {
		return semver.Version{}, fmt.Errorf("unexpected value %v", val)
	}
	return v, nil
}

func goldenSemver() error {
	inputs := []string{
		"1.0.0", "0.0.0", "1.2.3", "v1.2.3", "1.2", "1", "v1", "v1.2", "01.2.3", "1.02.3", "1.2.03",
		"v01.02.03", "1.2.3-alpha", "1.2.3-alpha.1", "1.2.3-alpha.01", "1.2.3-0", "1.2.3-00",
		"1.2.3-rc.1+build.5", "1.2.3+build", "1.2.3+build.01", "1.2.3+", "1.2.3-", "1.2.3-a..b",
		"1.2.3-a_b", "1.2-alpha", "1-rc", "v1.2+b", "1.2.3.4", "1..3", ".1.2", "1.2.", "", "v",
		"vv1.2.3", "V1.2.3", " 1.2.3", "1.2.3 ", "18446744073709551615.0.0", "18446744073709551616.0.0",
		"9223372036854775808.1.1", "1.2.3-18446744073709551616", "1.2.3-x-y-z.-", "1.2.3-\u00e9",
		"0.0.1", "v0.0.1", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
		"1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "2.0.0", "2.1.0", "2.1.1", "1.2.3-a.b.c.d",
		"00", "000.0.0", "v000.000.000", "0.0", "1.0", "10.20", "1.2.3-A", "1.2.3-a", "1.2.3-1a",
		"1.2.3-a1", "1.2.3-1", "1.2.3-2", "1.2.3-10", "1.2.3+a.b", "1.2.3-a+b-c", "1.2.3+b+c",
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	type parsed struct {
		OK    bool   `json:"ok"`
		Str   string `json:"str,omitempty"`
		Major uint64 `json:"major,omitempty"`
		Minor uint64 `json:"minor,omitempty"`
		Patch uint64 `json:"patch,omitempty"`
		Error string `json:"error,omitempty"`
	}
	type line struct {
		Op        string `json:"op"`
		In        string `json:"in"`
		Strict    parsed `json:"strict"`
		Normalize parsed `json:"normalize"`
	}
	toParsed := func(v semver.Version, err error) parsed {
		if err != nil {
			return parsed{Error: err.Error()}
		}
		return parsed{OK: true, Str: v.String(), Major: v.Major, Minor: v.Minor, Patch: v.Patch}
	}
	var valid []semver.Version
	var validText []string
	for _, in := range inputs {
		v, err := semver.Parse(in)
		n, nerr := semverNormalizeAndParse(in)
		if err := enc.Encode(line{Op: "parse", In: in, Strict: toParsed(v, err), Normalize: toParsed(n, nerr)}); err != nil {
			return err
		}
		if err == nil {
			valid = append(valid, v)
			validText = append(validText, in)
		}
	}
	type cmpLine struct {
		Op  string `json:"op"`
		X   string `json:"x"`
		Y   string `json:"y"`
		Cmp int    `json:"cmp"`
	}
	for i := range valid {
		for j := range valid {
			if err := enc.Encode(cmpLine{Op: "compare", X: validText[i], Y: validText[j], Cmp: valid[i].Compare(valid[j])}); err != nil {
				return err
			}
		}
	}
	return nil
}
