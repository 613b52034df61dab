package bundles

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeInternVL lays out a tiny InternVL3 -hf checkpoint directory from testdata/internvl (the
// files gpu_checkpoint.py writes for gpu_internvl3_tiny.config.json; tokenizer.json cut to its
// added tokens), with edit applied to one of its JSON files.
func writeInternVL(t *testing.T, file string, edit func(map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("testdata", "internvl")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == file && edit != nil {
			var doc map[string]any
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			edit(doc)
			if raw, err = json.Marshal(doc); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("weights-bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBuildInternVL(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		pre    func(map[string]any)
		want   map[string]any
	}{
		{"preprocessor defaults", nil, nil, map[string]any{"max_patches": int64(12), "min_patches": int64(1)}},
		{"single tile by --param", map[string]any{"max_patches": int64(1)}, nil, map[string]any{"max_patches": int64(1), "min_patches": int64(1)}},
		{"checkpoint without the keys", nil, func(m map[string]any) { delete(m, "max_patches"); delete(m, "min_patches") }, map[string]any{}},
		{"checkpoint's own range", nil, func(m map[string]any) { m["max_patches"] = 6.0; m["min_patches"] = 2.0 }, map[string]any{"max_patches": int64(6), "min_patches": int64(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := writeInternVL(t, "preprocessor_config.json", tt.pre)
			b, err := Build(t.Context(), BuildOptions{From: from, Family: "internvl", Out: filepath.Join(t.TempDir(), "iv"), Plugin: writePlugin(t), Params: tt.params})
			if err != nil {
				t.Fatal(err)
			}
			m := b.Manifest
			if m.Family != "internvl" || m.Plugin.ABI != 2 || m.Image.Budgets != nil {
				t.Fatalf("family %q, abi %d, budgets %+v", m.Family, m.Plugin.ABI, m.Image.Budgets)
			}
			if got := m.Generation.StopIDs; len(got) != 1 || got[0] != 151645 {
				t.Fatalf("stop ids %v, want [151645]", got)
			}
			if m.Engine.ContextLength != 4096 {
				t.Fatalf("context %d", m.Engine.ContextLength)
			}
			if len(m.Plugin.Params) != len(tt.want) {
				t.Fatalf("params %v, want %v", m.Plugin.Params, tt.want)
			}
			for k, v := range tt.want {
				if m.Plugin.Params[k] != v {
					t.Fatalf("params %v, want %v", m.Plugin.Params, tt.want)
				}
			}
			if _, err := Load(b.Dir); err != nil {
				t.Fatalf("load: %v", err)
			}
		})
	}
}

func TestBuildInternVLRefused(t *testing.T) {
	tests := []struct {
		name, file string
		edit       func(map[string]any)
		wantErr    string
	}{
		{"tiles of another size", "preprocessor_config.json", func(m map[string]any) { m["size"] = map[string]any{"height": 384.0, "width": 384.0} },
			"size.height is 384, but the internvl plugin implements 448"},
		{"other statistics", "preprocessor_config.json", func(m map[string]any) { m["image_mean"] = []any{0.5, 0.5, 0.5} },
			"image_mean is [0.5 0.5 0.5]"},
		{"bilinear", "preprocessor_config.json", func(m map[string]any) { m["resample"] = 2.0 }, "resample is 2"},
		{"another pixel shuffle", "config.json", func(m map[string]any) { m["downsample_ratio"] = 0.25 },
			"config.json: downsample_ratio is 0.25, but the internvl family implements 0.5"},
		{"patch 16", "config.json", func(m map[string]any) { m["vision_config"].(map[string]any)["patch_size"] = []any{16.0, 16.0} },
			"vision_config.patch_size is [16 16]"},
		{"CLS feature", "config.json", func(m map[string]any) { m["vision_feature_select_strategy"] = "full" },
			"vision_feature_select_strategy is full"},
		{"image token id elsewhere", "config.json", func(m map[string]any) { m["image_token_id"] = 151655.0 },
			`tokenizer.json gives "<IMG_CONTEXT>" the id 151667, config.json's image_token_id is 151655`},
		{"tokenizer without <img>", "tokenizer.json", func(m map[string]any) {
			var keep []any
			for _, e := range m["added_tokens"].([]any) {
				if e.(map[string]any)["content"] != "<img>" {
					keep = append(keep, e)
				}
			}
			m["added_tokens"] = keep
		}, `tokenizer.json: no added token "<img>"`},
		{"a Qwen checkpoint", "config.json", func(m map[string]any) { m["model_type"] = "qwen2_5_vl" }, `config.json says "qwen2_5_vl"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := writeInternVL(t, tt.file, tt.edit)
			out := filepath.Join(t.TempDir(), "iv")
			_, err := Build(t.Context(), BuildOptions{From: from, Family: "internvl", Out: out, Plugin: writePlugin(t)})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build: %v, want %q", err, tt.wantErr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("a refused build left %s behind", out)
			}
		})
	}
}
