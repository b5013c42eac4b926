package main

// `celdiff-oracle bench`: the cel-go side of allocator/cel/bench. For each "name: expression"
// selector of the file, against its first device, it measures
//
//   - deviceMatchesNs: CompilationResult.DeviceMatches, what the Kubernetes scheduler pays per
//     device and selector (it builds the attribute maps on every call), and
//   - evalNs: Program.ContextEval with the activation built once (cel-go evaluation alone),
//
// as medians of -reps runs of at least -min-time each, printed as JSON lines.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"time"

	"github.com/blang/semver/v4"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiservercel "k8s.io/apiserver/pkg/cel"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"
)

// withDefault is a map whose lookups of missing keys yield a default value (the DRA environment
// answers an unknown attribute domain with an empty map).
type withDefault struct {
	traits.Mapper
	fallback ref.Val
}

func (m withDefault) Find(key ref.Val) (ref.Val, bool) {
	if v, ok := m.Mapper.Find(key); ok {
		return v, true
	}
	return m.fallback, true
}

var benchName = regexp.MustCompile(`^([A-Za-z0-9_]+): (.*)$`)

type benchLine struct {
	Name            string  `json:"name"`
	Expr            string  `json:"expr"`
	Result          bool    `json:"result"`
	DeviceMatchesNs float64 `json:"deviceMatchesNs"`
	EvalNs          float64 `json:"evalNs"`
}

// measure returns the median ns/op of `reps` runs of at least minTime each.
func measure(minTime time.Duration, reps int, op func()) float64 {
	var samples []float64
	for r := 0; r < reps; r++ {
		n := 1
		for {
			start := time.Now()
			for i := 0; i < n; i++ {
				op()
			}
			elapsed := time.Since(start)
			if elapsed >= minTime {
				samples = append(samples, float64(elapsed.Nanoseconds())/float64(n))
				break
			}
			n *= 2
		}
	}
	sort.Float64s(samples)
	return samples[len(samples)/2]
}

func benchCorpus(path string, minTime time.Duration) error {
	c, err := readCorpus(path)
	if err != nil {
		return err
	}
	if len(c.Devices) == 0 {
		return fmt.Errorf("%s: no device", path)
	}
	d := c.Devices[0]
	device := dracel.Device{Driver: d.Driver, AllowMultipleAllocations: d.AllowMultipleAllocations,
		Attributes: toQualified(d), Capacity: d.capacity}
	compiler := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true})
	ctx := context.Background()
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	for _, sel := range c.Selectors {
		m := benchName.FindStringSubmatch(sel.Expr)
		if m == nil {
			return fmt.Errorf("%s: selector %q is not 'name: expression'", path, sel.Expr)
		}
		result := compiler.CompileCELExpression(m[2], dracel.Options{})
		if result.Error != nil {
			return fmt.Errorf("%s: %s: %v", path, m[1], result.Error)
		}
		match, _, err := result.DeviceMatches(ctx, device)
		if err != nil {
			return fmt.Errorf("%s: %s: %v", path, m[1], err)
		}
		line := benchLine{Name: m[1], Expr: m[2], Result: match}
		line.DeviceMatchesNs = measure(minTime, 5, func() {
			if _, _, err := result.DeviceMatches(ctx, device); err != nil {
				panic(err)
			}
		})
		activation := buildActivation(result, device)
		line.EvalNs = measure(minTime, 5, func() {
			if _, _, err := result.Program.ContextEval(ctx, activation); err != nil {
				panic(err)
			}
		})
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

// buildActivation builds, once, the variables DeviceMatches builds on every call (the same
// shapes: plain Go maps for attributes and capacity, with an empty map for unknown domains).
func buildActivation(result dracel.CompilationResult, input dracel.Device) map[string]any {
	attributes := map[string]any{}
	for name, attr := range input.Attributes {
		r := split(string(name), input.Driver)
		domain, id := r.domain, r.id
		if attributes[domain] == nil {
			attributes[domain] = map[string]any{}
		}
		var v any
		switch {
		case attr.IntValue != nil:
			v = *attr.IntValue
		case attr.BoolValue != nil:
			v = *attr.BoolValue
		case attr.StringValue != nil:
			v = *attr.StringValue
		case attr.VersionValue != nil:
			sv, err := semver.Parse(*attr.VersionValue)
			if err != nil {
				panic(err)
			}
			v = apiservercel.Semver{Version: sv}
		}
		attributes[domain].(map[string]any)[id] = v
	}
	capacity := map[string]any{}
	for name, q := range input.Capacity {
		r := split(string(name), input.Driver)
		if capacity[r.domain] == nil {
			capacity[r.domain] = map[string]apiservercel.Quantity{}
		}
		value := q.Value
		capacity[r.domain].(map[string]apiservercel.Quantity)[r.id] = apiservercel.Quantity{Quantity: &value}
	}
	adapter := result.Environment.CELTypeAdapter()
	empty := adapter.NativeToValue(map[string]any{})
	return map[string]any{
		"device": map[string]any{
			"driver":                   input.Driver,
			"allowMultipleAllocations": ptr.Deref(input.AllowMultipleAllocations, false),
			"attributes":               withDefault{types.NewStringInterfaceMap(adapter, attributes), empty},
			"capacity":                 withDefault{types.NewStringInterfaceMap(adapter, capacity), empty},
		},
	}
}
