// allocdiff: the upstream peer of devlet's allocator (k8s.io/dynamic-resource-allocation v0.37.2).
//
//	allocdiff cases -seed 1 -count 300 -dir OUT   # seeded problems + upstream's outcome, one JSON per case
//	allocdiff cases -adversarial ...              # the same from the adversarial families
//	allocdiff run FILE NODE [GATES]               # upstream's outcome for a List of objects
//	allocdiff bench -nodes 500 -pods 5000 -workload W.json -stats S.json
//
// The C++ side (allocdiff_test, allocdiff_bench) reads these files and runs devlet's allocator on
// the same input.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/dynamic-resource-allocation/cel"
)

type runtimeRawExtension = runtime.RawExtension

func newCache() *cel.Cache {
	return cel.NewCache(1000, cel.Features{EnableConsumableCapacity: true})
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: allocdiff cases|run|bench ...")
		os.Exit(2)
	}
	ctx := context.Background()
	switch os.Args[1] {
	case "cases":
		fs := flag.NewFlagSet("cases", flag.ExitOnError)
		seed := fs.Int64("seed", 1, "generator seed")
		count := fs.Int("count", 100, "number of cases")
		dir := fs.String("dir", ".", "output directory")
		gates := fs.String("gates", "", "feature gates (A=true,B=false); any alpha allocator gate on also makes the generator use derived attributes and compatibility groups")
		adversarial := fs.Bool("adversarial", false, "draw from the adversarial families (adversarial.go) instead of the random generator")
		_ = fs.Parse(os.Args[2:])
		features := defaultFeatures
		if *gates != "" {
			f, err := parseGates(*gates)
			if err != nil {
				fail(err)
			}
			features = f
		}
		alpha := features.DerivedAttributes || features.CompatibilityGroups
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			fail(err)
		}
		cache := newCache()
		for i := 0; i < *count; i++ {
			var list []byte
			family := "random"
			if *adversarial {
				list, family = generateAdversarial(*seed, i)
			} else {
				list = generateCase(ctx, *seed, i, cache, features, alpha)
			}
			c, err := decodeList(list)
			if err != nil {
				fail(err)
			}
			out := timeUpstream(ctx, c, "node-1", cache, features)
			data, err := json.Marshal(map[string]any{
				"seed": *seed, "index": i, "node": "node-1", "gates": *gates, "family": family,
				"objects": json.RawMessage(list), "upstream": out,
			})
			if err != nil {
				fail(err)
			}
			if err := os.WriteFile(filepath.Join(*dir, fmt.Sprintf("case-%05d.json", i)), data, 0o644); err != nil {
				fail(err)
			}
		}
	case "run":
		if len(os.Args) != 4 && len(os.Args) != 5 {
			fail(fmt.Errorf("usage: allocdiff run FILE NODE [GATES]"))
		}
		features := defaultFeatures
		if len(os.Args) == 5 {
			f, err := parseGates(os.Args[4])
			if err != nil {
				fail(err)
			}
			features = f
		}
		data, err := os.ReadFile(os.Args[2])
		if err != nil {
			fail(err)
		}
		c, err := decodeList(data)
		if err != nil {
			fail(err)
		}
		out := runUpstreamWith(ctx, c, os.Args[3], newCache(), features)
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	case "bench":
		runBench(ctx, os.Args[2:])
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "allocdiff:", err)
	os.Exit(2)
}
