// Command celdiff-oracle evaluates CEL the way Kubernetes does, as the reference for devlet's
// C++ CEL engine (see README.md beside this file).
//
//	celdiff-oracle eval -corpus corpus.txt -random 2000 -seed 1   DRA selector results (JSON lines)
//	celdiff-oracle eval -corpus syntax.txt -random 0 -mutate 1000 -mutate-from corpus.txt
//	                                                  the same for syntax errors (seeded mutations)
//	celdiff-oracle bench -corpus ../../allocator/cel/bench/selectors.txt   cel-go timings
//	celdiff-oracle golden-quantity [-random N] | golden-semver    golden data for unit tests
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: celdiff-oracle eval|bench|golden-quantity|golden-semver [flags]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	random := fs.Int("random", 300, "eval: random selectors to add; golden-quantity: random inputs")
	seed := fs.Int64("seed", 1, "eval: seed of the random selectors")
	corpusPath := fs.String("corpus", "corpus.txt", "eval/bench: the corpus file")
	withCorpus := fs.Bool("selectors", true, "eval: include the corpus selectors (not only random ones)")
	mutate := fs.Int("mutate", 0, "eval: seeded syntax mutations of the -mutate-from selectors to add")
	mutateFrom := fs.String("mutate-from", "", "eval: the corpus whose selectors -mutate mutates (default -corpus)")
	minTime := fs.Duration("min-time", time.Second, "bench: minimum measuring time per selector")
	_ = fs.Parse(os.Args[2:])
	var err error
	switch cmd {
	case "eval":
		from := *mutateFrom
		if from == "" {
			from = *corpusPath
		}
		err = evalCorpus(*corpusPath, *random, *seed, *withCorpus, *mutate, from)
	case "bench":
		err = benchCorpus(*corpusPath, *minTime)
	case "golden-quantity":
		err = goldenQuantity(*random)
	case "golden-semver":
		err = goldenSemver()
	default:
		fmt.Fprintln(os.Stderr, "usage: celdiff-oracle eval|bench|golden-quantity|golden-semver [flags]")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
