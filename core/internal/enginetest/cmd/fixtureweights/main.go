// Command fixtureweights writes the parity fixtures' weights (core/internal/enginetest/testdata/qwen2_5_vl:
// tiny-untied/model.safetensors, tiny-tied/model.safetensors) from their seeded manifests, each
// checked against its committed sha256 (fixture.WriteFixtureWeights). scripts/unpack-fixtures.sh
// runs it where Go is installed; scripts/reference/seeded.py is the numpy writer of the same bytes.
//
//	go run ./core/internal/enginetest/cmd/fixtureweights [-out PATH] [MODEL ...]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
)

func main() {
	out := flag.String("out", "", "with one model: write here instead of its model.safetensors")
	flag.Parse()
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "fixtureweights:", err)
		os.Exit(1)
	}
}

func run(out string, models []string) error {
	if len(models) == 0 {
		all, err := fixture.FixtureModels()
		if err != nil {
			return err
		}
		models = all
	}
	if out != "" && len(models) != 1 {
		return fmt.Errorf("-out needs exactly one model")
	}
	for _, m := range models {
		path := out
		if path == "" {
			path = filepath.Join(fixture.ModelDir(m), "model.safetensors")
		}
		if err := fixture.WriteFixtureWeights(m, path); err != nil {
			return err
		}
		fmt.Printf("fixtureweights: wrote %s\n", path)
	}
	return nil
}
