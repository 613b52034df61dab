// Command servedmodel writes the checkpoint directory of a family's served golden
// (testdata/<family>/served.json): a model of the family's shape sweep regenerated from its seed,
// with the processor settings, tokenizer and generation config a hub download has. The demo
// builds its Qwen3-VL bundle from it; random weights, so its words mean nothing. -golden names
// another served golden of the family, e.g. LocateAnything's grounded_box.json, whose checkpoint
// has its weights constructed to answer with a box.
//
//	go run ./core/internal/enginetest/cmd/servedmodel -family qwen3_vl -out .build/models/qwen3-seeded
//	go run ./core/internal/enginetest/cmd/servedmodel -family locateanything -golden grounded_box.json -out .build/models/la-box
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
	golden := flag.String("golden", "served.json", "the served golden's file under testdata/<family>")
	out := flag.String("out", "", "directory to write (created; must not hold a checkpoint)")
	flag.Parse()
	if err := run(*family, *golden, *out); err != nil {
		fmt.Fprintln(os.Stderr, "servedmodel:", err)
		os.Exit(1)
	}
}

func run(family, golden, out string) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	s, err := fixture.WriteServedModelFrom(out, family, golden)
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	how := "seeded"
	if s.Construction != nil {
		how = "seeded, constructed"
	}
	fmt.Printf("servedmodel: %s checkpoint %s (%s) in %s\n", family, s.Model, how, out)
	return nil
}
