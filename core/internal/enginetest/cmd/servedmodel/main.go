// Command servedmodel writes the checkpoint directory of a family's served golden
// (testdata/<family>/served.json): a model of the family's shape sweep regenerated from its seed,
// with the processor settings, tokenizer and generation config a hub download has. The demo
// builds its Qwen3-VL bundle from it; random weights, so its words mean nothing.
//
//	go run ./core/internal/enginetest/cmd/servedmodel -family qwen3_vl -out .build/models/qwen3-seeded
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	_ "github.com/iris-vlm/iris/core/internal/models" // the families' config defaults
)

func main() {
	family := flag.String("family", "qwen3_vl", "model type of the served golden")
	out := flag.String("out", "", "directory to write (created; must not hold a checkpoint)")
	flag.Parse()
	if err := run(*family, *out); err != nil {
		fmt.Fprintln(os.Stderr, "servedmodel:", err)
		os.Exit(1)
	}
}

func run(family, out string) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	s, err := fixture.WriteServedModel(out, family)
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	fmt.Printf("servedmodel: %s checkpoint %s (seeded) in %s\n", family, s.Model, out)
	return nil
}
