package plugintest

import (
	"path/filepath"
	"testing"

	"github.com/iris-vlm/iris/core/internal/plugin"
	sdktest "github.com/iris-vlm/iris/sdk-wasm/plugintest"
)

// TestFamiliesUnderWasm runs each family's conformance suite (plugins/<family>/testdata/
// cases.json, the file the plugin's native tests run) against the module compiled from source
// and loaded by the real host: the second half of "test natively, then as wasm".
func TestFamiliesUnderWasm(t *testing.T) {
	h := NewHost(t, plugin.Options{})
	for _, family := range []string{"qwen2_5_vl", "qwen3_vl", "internvl", "phi4_multimodal", "locateanything", "lance", "deepseek_ocr2"} {
		t.Run(family, func(t *testing.T) {
			dir, err := FamilyDir(family)
			if err != nil {
				t.Fatal(err)
			}
			suite, err := sdktest.LoadSuite(filepath.Join(dir, "testdata", "cases.json"))
			if err != nil {
				t.Fatal(err)
			}
			p := Load(t, h, family, Build(t, dir), plugin.Limits{})
			suite.Run(t, Runner(p))
		})
	}
}
