package main

import (
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/plugintest"
)

// TestCases runs the reference conformance cases natively; core/internal/plugin/plugintest runs
// the same file against the compiled module.
func TestCases(t *testing.T) {
	s, err := plugintest.LoadSuite("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	s.Run(t, plugintest.Native(family{}))
}
