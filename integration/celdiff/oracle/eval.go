package main

// `celdiff-oracle eval`: evaluates every selector of the corpus (plus seeded random ones) against
// every corpus device with the real Kubernetes DRA CEL environment
// (k8s.io/dynamic-resource-allocation/cel, StoredExpressions, ConsumableCapacity and
// ListTypeAttributes on, default cost limit) and prints JSON lines:
//
//	{"devices": [...]}                                       first line
//	{"expr": "...", "source": "corpus:12", "compileError": "...", "results": [...]}
//
// where each result is {"match": bool, "cost": n} or {"error": "...", "cost": n}. A selector with a
// comprehension is evaluated several times: iterating a Go map visits its entries in a random
// order, so a short-circuiting comprehension over device.attributes (or a domain) may cost more or
// less from one evaluation to the next; such results also carry "costMin" and "costMax", and the
// selector is marked "orderDependent" when any device's cost varied.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

func toQualified(d *corpusDevice) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	out := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(d.Attributes))
	for name, a := range d.Attributes {
		out[resourceapi.QualifiedName(name)] = a
	}
	return out
}

type evalResult struct {
	Match   *bool  `json:"match,omitempty"`
	Error   string `json:"error,omitempty"`
	Cost    uint64 `json:"cost"`
	CostMin uint64 `json:"costMin,omitempty"`
	CostMax uint64 `json:"costMax,omitempty"`
}

// comprehensionMacros are the macro calls whose cost can depend on map iteration order.
var comprehensionMacros = regexp.MustCompile(`\.(all|exists|exists_one|existsOne|map|filter|transformList|transformMap|transformMapEntry|sortBy)\(`)

// orderMayMatter: the selector iterates (or may iterate) a map: a comprehension, and a map in it
// (the device's attribute or capacity maps, or a map literal).
func orderMayMatter(expr string) bool {
	return comprehensionMacros.MatchString(expr) &&
		(strings.Contains(expr, "device.attributes") || strings.Contains(expr, "device.capacity") ||
			strings.Contains(expr, "{"))
}

// orderRepeats is how often a selector with a comprehension is evaluated per device. Go iterates
// a small map from a random starting slot, so each of its orders turns up within a few dozen tries.
const orderRepeats = 64

type evalLine struct {
	Expr         string `json:"expr"`
	Source       string `json:"source"`
	CompileError string `json:"compileError,omitempty"`
	MaxCost      uint64 `json:"maxCost,omitempty"`
	// OrderDependent: the runtime cost varied between evaluations of the same device.
	OrderDependent bool         `json:"orderDependent,omitempty"`
	Results        []evalResult `json:"results,omitempty"`
}

// compileRecovering compiles like the API server, but reports a cel-go panic (found by the syntax
// mutations: its homogeneous-literal validator indexes an empty list) as the text
// "cel-go panic: ..." instead of ending the run.
func compileRecovering(compile func(string, dracel.Options) dracel.CompilationResult,
	expr string) (result dracel.CompilationResult, panicked string) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprintf("cel-go panic: %v", r)
		}
	}()
	return compile(expr, dracel.Options{}), ""
}

func evalCorpus(path string, random int, seed int64, withCorpus bool, mutate int, mutateFrom string) error {
	c, err := readCorpus(path)
	if err != nil {
		return err
	}
	var selectors []corpusSelector
	if withCorpus {
		selectors = append(selectors, c.Selectors...)
	}
	selectors = append(selectors, randomSelectors(random, seed, c.Devices)...)
	if mutate > 0 {
		m, err := readCorpus(mutateFrom)
		if err != nil {
			return err
		}
		selectors = append(selectors, mutateSelectors(mutate, seed, m.Selectors)...)
	}

	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"devices": c.Devices}); err != nil {
		return err
	}
	compiler := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true})
	ctx := context.Background()
	for _, sel := range selectors {
		line := evalLine{Expr: sel.Expr, Source: sel.Source}
		result, panicked := compileRecovering(compiler.CompileCELExpression, sel.Expr)
		if panicked != "" {
			line.CompileError = panicked
		} else if result.Error != nil {
			line.CompileError = result.Error.Error()
		} else {
			line.MaxCost = result.MaxCost
			for _, d := range c.Devices {
				dev := dracel.Device{Driver: d.Driver, AllowMultipleAllocations: d.AllowMultipleAllocations,
					Attributes: toQualified(d), Capacity: d.capacity}
				match, details, err := result.DeviceMatches(ctx, dev)
				r := evalResult{}
				if details != nil && details.ActualCost() != nil {
					r.Cost = *details.ActualCost()
				}
				if orderMayMatter(sel.Expr) && r.Cost < 100000 {
					lo, hi := r.Cost, r.Cost
					for i := 1; i < orderRepeats; i++ {
						_, d, _ := result.DeviceMatches(ctx, dev)
						if d != nil && d.ActualCost() != nil {
							lo, hi = min(lo, *d.ActualCost()), max(hi, *d.ActualCost())
						}
					}
					if lo != hi {
						r.CostMin, r.CostMax = lo, hi
						line.OrderDependent = true
					}
				}
				if err != nil {
					r.Error = err.Error()
				} else {
					m := match
					r.Match = &m
				}
				line.Results = append(line.Results, r)
			}
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}
