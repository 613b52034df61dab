package bundles

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCheckpoint lays out a minimal Hugging Face checkpoint directory (contents are not a model:
// the bundle format only copies and digests them).
func writeCheckpoint(t *testing.T, modelType string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"config.json":              `{"model_type": "` + modelType + `", "max_position_embeddings": 128000, "eos_token_id": 151645}`,
		"model.safetensors":        "weights-bytes",
		"tokenizer.json":           `{"version": "1.0"}`,
		"tokenizer_config.json":    `{}`,
		"preprocessor_config.json": `{"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "image_mean": [0.48145466, 0.4578275, 0.40821073], "size": {"shortest_edge": 3136, "longest_edge": 12845056}, "image_processor_type": "Qwen2VLImageProcessor"}`,
		"generation_config.json":   `{"eos_token_id": [151645, 151643], "max_new_tokens": 64}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func writePlugin(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "qwen2_5_vl.wasm")
	if err := os.WriteFile(p, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func buildTestBundle(t *testing.T) *Bundle {
	t.Helper()
	out := filepath.Join(t.TempDir(), "tiny")
	var progress bytes.Buffer
	b, err := Build(t.Context(), BuildOptions{From: writeCheckpoint(t, "qwen2_5_vl"), Family: "qwen2_5_vl", Out: out, Plugin: writePlugin(t), Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress.String(), "model.safetensors") {
		t.Errorf("no progress line for the weights: %q", progress.String())
	}
	return b
}

func TestBuildThenLoad(t *testing.T) {
	b := buildTestBundle(t)
	m := b.Manifest
	if m.Name != "tiny" || m.Family != "qwen2_5_vl" || m.Engine.Backend != "cpu" || m.Engine.Precision != "fp32" {
		t.Fatalf("manifest = %+v", m)
	}
	if m.Engine.ContextLength != 4096 || m.Generation.MaxNewTokens != 64 {
		t.Fatalf("context %d, max_new_tokens %d", m.Engine.ContextLength, m.Generation.MaxNewTokens)
	}
	if got := m.Generation.StopIDs; len(got) != 2 || got[0] != 151645 || got[1] != 151643 {
		t.Fatalf("stop ids %v", got)
	}
	if len(m.Plugin.Params) != 2 || m.Plugin.Params["min_pixels"] != int64(3136) || m.Plugin.Params["max_pixels"] != int64(12845056) {
		t.Fatalf("plugin params %v", m.Plugin.Params)
	}
	if bu := m.Image.Budgets; bu == nil || bu.Bounds != [2]int64{3136, 12845056} || bu.High != bu.Bounds || bu.Low != [2]int64{3136, 256 * 28 * 28} {
		t.Fatalf("image budgets %+v", bu)
	}
	loaded, err := Load(b.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Digest != b.Digest || len(b.Digest) != 64 {
		t.Fatalf("digest %q vs %q", loaded.Digest, b.Digest)
	}
	st, err := Verify(b.Dir)
	if err != nil || len(st) != 7 {
		t.Fatalf("verify: %v %+v", err, st)
	}
}

func TestFlippedByteRefusedByName(t *testing.T) {
	b := buildTestBundle(t)
	for _, f := range b.Manifest.Files() {
		t.Run(f.Path, func(t *testing.T) {
			p := b.Path(f.Path)
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			flipped := bytes.Clone(orig)
			flipped[len(flipped)/2] ^= 0x01
			if err := os.WriteFile(p, flipped, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.WriteFile(p, orig, 0o644) })
			_, err = Load(b.Dir)
			if !errors.Is(err, ErrDigest) {
				t.Fatalf("load after flipping a byte of %s: %v, want ErrDigest", f.Path, err)
			}
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != f.Path {
				t.Fatalf("error %v does not name %s", err, f.Path)
			}
			if _, err := Verify(b.Dir); err == nil {
				t.Fatalf("verify passed after flipping %s", f.Path)
			}
		})
	}
	if _, err := Load(b.Dir); err != nil {
		t.Fatalf("restored bundle does not load: %v", err)
	}
}

func TestMissingFileRefused(t *testing.T) {
	b := buildTestBundle(t)
	if err := os.Remove(b.Path("tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(b.Dir)
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("load with a missing file: %v", err)
	}
}

func TestBuildErrors(t *testing.T) {
	plugin := writePlugin(t)
	tests := []struct {
		name    string
		opts    func() BuildOptions
		wantErr string
	}{
		{"unknown family", func() BuildOptions {
			return BuildOptions{From: writeCheckpoint(t, "qwen2_5_vl"), Family: "llava", Out: t.TempDir(), Plugin: plugin}
		}, `unknown family "llava"`},
		{"wrong model type", func() BuildOptions {
			return BuildOptions{From: writeCheckpoint(t, "qwen3_vl"), Family: "qwen2_5_vl", Out: t.TempDir(), Plugin: plugin}
		}, `config.json says "qwen3_vl"`},
		{"output not empty", func() BuildOptions {
			out := t.TempDir()
			_ = os.WriteFile(filepath.Join(out, "x"), nil, 0o644)
			return BuildOptions{From: writeCheckpoint(t, "qwen2_5_vl"), Family: "qwen2_5_vl", Out: out, Plugin: plugin}
		}, "not empty"},
		{"no weights", func() BuildOptions {
			from := writeCheckpoint(t, "qwen2_5_vl")
			_ = os.Remove(filepath.Join(from, "model.safetensors"))
			return BuildOptions{From: from, Family: "qwen2_5_vl", Out: t.TempDir(), Plugin: plugin}
		}, "no *.safetensors"},
		{"preprocessing the plugin does not implement", func() BuildOptions {
			from := writeCheckpoint(t, "qwen2_5_vl")
			_ = os.WriteFile(filepath.Join(from, "preprocessor_config.json"), []byte(`{"patch_size": 16}`), 0o644)
			return BuildOptions{From: from, Family: "qwen2_5_vl", Out: t.TempDir(), Plugin: plugin}
		}, "patch_size is 16, but the qwen2_5_vl plugin implements 14"},
		{"missing plugin", func() BuildOptions {
			return BuildOptions{From: writeCheckpoint(t, "qwen2_5_vl"), Family: "qwen2_5_vl", Out: t.TempDir(), Plugin: "/nonexistent.wasm"}
		}, "plugin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts()
			before, _ := os.ReadDir(filepath.Dir(o.Out))
			_, err := Build(t.Context(), o)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build: %v, want %q", err, tt.wantErr)
			}
			if after, _ := os.ReadDir(filepath.Dir(o.Out)); len(after) != len(before) {
				t.Fatalf("a failed build left files behind: %v", after)
			}
		})
	}
}
