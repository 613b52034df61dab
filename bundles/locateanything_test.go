package bundles

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestBuildLocateAnything builds a bundle from the remote-code checkpoint layout (config.json of
// model_type locateanything with its token ids, the remote code's .py files beside the weights, the
// processor's preprocessor_config.json): the plugin gets in_token_limit, generation.grounding holds
// config.json's ids, the context holds the largest image span, and no .py file is bundled.
func TestBuildLocateAnything(t *testing.T) {
	dir := t.TempDir()
	added := `{"id": 151665, "content": "<IMG_CONTEXT>", "special": true}, {"id": 151666, "content": "<img>", "special": true},
		{"id": 151667, "content": "</img>", "special": true}`
	files := map[string]string{
		"config.json": `{"model_type": "locateanything", "image_token_index": 151665, "coord_start_token_id": 151677,
			"coord_end_token_id": 152677, "box_start_token_id": 151668, "box_end_token_id": 151669,
			"ref_start_token_id": 151672, "ref_end_token_id": 151673,
			"vision_config": {"model_type": "moonvit", "patch_size": 14, "merge_kernel_size": [2, 2]},
			"text_config": {"max_position_embeddings": 32768, "eos_token_id": 151645}}`,
		"model.safetensors":                  "weights-bytes",
		"tokenizer.json":                     `{"version": "1.0", "added_tokens": [` + added + `]}`,
		"preprocessor_config.json":           `{"image_processor_type": "LocateAnythingImageProcessor", "merge_kernel_size": [2, 2], "in_token_limit": 25600}`,
		"processor_config.json":              `{"image_token": "<IMG_CONTEXT>"}`,
		"modeling_locateanything.py":         "# remote code",
		"image_processing_locateanything.py": "# remote code",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Build(t.Context(), BuildOptions{From: dir, Family: "locateanything", Out: filepath.Join(t.TempDir(), "la"), Plugin: writePlugin(t)})
	if err != nil {
		t.Fatal(err)
	}
	m := b.Manifest
	if m.Plugin.ABI != 2 || m.Plugin.Params["in_token_limit"] != int64(25600) || m.Engine.ContextLength != 8192 ||
		!slices.Equal(m.Generation.StopIDs, []int32{151645}) {
		t.Errorf("plugin %+v, context %d, stops %v", m.Plugin, m.Engine.ContextLength, m.Generation.StopIDs)
	}
	if g := m.Generation.Grounding; g == nil || *g != laGrounding {
		t.Errorf("grounding %+v, want %+v", g, laGrounding)
	}
	for _, f := range m.Files() {
		if filepath.Ext(f.Path) == ".py" {
			t.Errorf("bundled %s", f.Path)
		}
	}
	if _, err := Load(b.Dir); err != nil {
		t.Errorf("loading the bundle: %v", err)
	}
}
