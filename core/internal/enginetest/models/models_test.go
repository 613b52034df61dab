package models_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models"
)

// TestFamilyTables proves the three family tables agree: every model type the engine runs has
// its config defaults (model.ParseConfig) and a bundle family (bundles.Families, whose fixed
// geometry the plugin is built with) whose geometry the checkpoint's config matches.
func TestFamilyTables(t *testing.T) {
	if got, want := models.ModelTypes(), model.ConfigModelTypes(); !slices.Equal(got, want) {
		t.Errorf("families %v, config defaults for %v", got, want)
	}
	configs := map[string]string{
		"qwen2_5_vl":      filepath.Join(fixture.ModelDir("tiny-untied"), "config.json"),
		"qwen3_vl":        filepath.Join(fixture.Root(), "configs", "qwen3_vl_2b_hub.json"),
		"internvl":        filepath.Join(fixture.Root(), "configs", "internvl3_2b_hf.json"),
		"phi4_multimodal": filepath.Join(fixture.Root(), "configs", "phi4_multimodal_hf.json"),
		// no copy of the hub file is reachable: the remote code's layout with families.md §6.2's
		// values (MoonViTConfig's defaults, Qwen2.5-3B's decoder, 152681 rows)
		"locateanything": filepath.Join(fixture.Root(), "configs", "locateanything_3b_reconstructed.json"),
		"lance":          filepath.Join(fixture.Root(), "configs", "lance_3b.json"),
		// reconstructed from the sources (docs/plugins.md): transformers instantiates it at
		// 3,389,119,360 parameters, the released checkpoint's count
		"deepseek_ocr2": filepath.Join(fixture.Root(), "configs", "deepseek_ocr2_hf.json"),
	}
	for _, mt := range models.ModelTypes() {
		var fam *bundles.Family
		for _, f := range bundles.Families {
			if slices.Contains(f.ModelTypes, mt) {
				fam = &f
			}
		}
		if fam == nil {
			t.Errorf("model type %s: no bundle family", mt)
			continue
		}
		path, ok := configs[mt]
		if !ok {
			t.Errorf("model type %s: no config to check its geometry with", mt)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := model.ParseConfig(data)
		if err != nil {
			t.Fatal(err)
		}
		v := cfg.Vision
		for key, got := range map[string]int{"patch_size": v.PatchSize, "temporal_patch_size": v.TemporalPatchSize, "merge_size": v.MergeSize} {
			fixed, ok := fam.Fixed[key]
			if !ok { // a family whose plugin fixes its geometry otherwise (InternVL's 448-pixel tiles)
				continue
			}
			if want, _ := fixed.(float64); int(want) != got {
				t.Errorf("%s: bundle family fixes %s = %v, the engine reads %d", mt, key, fam.Fixed[key], got)
			}
		}
	}
	// bundle families the engine does not run yet are listed, so the gap is seen
	for name, f := range bundles.Families {
		runs := false
		for _, mt := range f.ModelTypes {
			runs = runs || slices.Contains(models.ModelTypes(), mt)
		}
		if !runs {
			t.Logf("bundle family %s: no engine family yet", name)
		}
	}
}

// TestLoadRefuses: an unknown model type is ErrUnsupported, and the backend is closed.
func TestLoadRefuses(t *testing.T) {
	b, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := models.Load(t.TempDir(), b, models.Options{}); err == nil {
		t.Error("a directory without a checkpoint loaded")
	}
	if b.Kernels() != "" {
		t.Error("the backend was left open after a failed load")
	}
	b2, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	lim := model.DefaultLimits(&model.Config{Text: model.TextConfig{MaxPositions: 64}, Vision: model.VisionConfig{PatchSize: 14}})
	if _, err := models.Load(fixture.ModelDir("tiny-tied"), b2, models.Options{KVTokens: 63, Limits: &lim}); err == nil || !strings.Contains(err.Error(), "less than one context") {
		t.Errorf("a KV pool of 63 tokens for a 64-token context: %v", err)
	}
	b2, err = cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := models.Load(fixture.ModelDir("tiny-tied"), b2, models.Options{KVTokens: 64, Limits: &lim})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if used, total := m.(model.Pooled).KVUse(); used != 0 || total != 4 {
		t.Errorf("KV pool %d/%d blocks, want 0/4 (64 tokens of 16)", used, total)
	}
	s, err := m.NewSequence(64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := m.NewSequence(16); !errors.Is(err, ml.ErrKVFull) {
		t.Errorf("a sequence over the pool: %v", err)
	}
}
