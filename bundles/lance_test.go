package bundles

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeST writes a safetensors file of F32 tensors of one value each (the value i+1 for the i-th
// name in sorted order), two floats a tensor.
func writeST(t *testing.T, path string, vals map[string]float32) {
	t.Helper()
	names := slices.Sorted(maps.Keys(vals))
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	for i, n := range names {
		hdr[n] = map[string]any{"dtype": "F32", "shape": []int{2}, "data_offsets": []int{8 * i, 8*i + 8}}
	}
	raw, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(raw)))
	b = append(b, raw...)
	for _, n := range names {
		for range 2 {
			b = binary.LittleEndian.AppendUint32(b, mathF32(vals[n]))
		}
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mathF32(v float32) uint32 { return math.Float32bits(v) }

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConvertLance: Lance's release layout becomes the understanding path in Iris's layout: the
// generation expert and the bridges left out (and counted in the metadata), the tower under
// vit_model. with Lance_3B's own vit_model.* tensors winning, the config with model_type lance,
// the tower's keys, image_token_id = video_token_id and output_vocab_size = len(tokenizer).
func TestConvertLance(t *testing.T) {
	from, out := t.TempDir(), t.TempDir()
	llm, vit := filepath.Join(from, lanceLLMDir), filepath.Join(from, lanceViTDir)
	for _, d := range []string{llm, vit} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeST(t, filepath.Join(llm, "model.safetensors"), map[string]float32{
		"language_model.model.embed_tokens.weight":                      1,
		"language_model.model.layers.0.self_attn.q_norm.weight":         2,
		"language_model.model.layers.0.self_attn.q_proj_moe_gen.weight": 3,
		"language_model.model.norm_moe_gen.weight":                      4,
		"language_model.lm_head.weight":                                 5,
		"vae2llm.weight":                                                6,
		"vit_model.merger.ln_q.weight":                                  7,
	})
	writeST(t, filepath.Join(vit, "vit.safetensors"), map[string]float32{
		"patch_embed.proj.weight": 8,
		"merger.ln_q.weight":      9,
	})
	writeJSONFile(t, filepath.Join(llm, "llm_config.json"), map[string]any{
		"model_type": "qwen2_5_vl", "hidden_size": 8, "video_token_id": 151656, "image_token_id": 151655,
		"vision_config": map[string]any{"spatial_merge_size": 2, "tokens_per_second": 2}, "tie_word_embeddings": true,
	})
	writeJSONFile(t, filepath.Join(vit, "config.json"), map[string]any{"depth": 32, "hidden_size": 1280, "out_hidden_size": 2048})
	vocab := map[string]int{}
	for i := range 10 {
		vocab[fmt.Sprint("t", i)] = i
	}
	writeJSONFile(t, filepath.Join(llm, "tokenizer.json"), map[string]any{
		"model":        map[string]any{"vocab": vocab},
		"added_tokens": []any{map[string]any{"id": 9, "content": "t9"}, map[string]any{"id": 10, "content": "<|im_end|>"}, map[string]any{"id": 11, "content": "<|video_pad|>"}},
	})
	if !lanceRelease(from) {
		t.Fatal("the release layout was not recognised")
	}
	var progress strings.Builder
	if err := convertLance(context.Background(), from, out, &progress); err != nil {
		t.Fatal(err)
	}
	cfg, err := readJSON(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	vision, _ := cfg["vision_config"].(map[string]any)
	for key, want := range map[string]any{"model_type": "lance", "image_token_id": 151656.0, "video_token_id": 151656.0,
		"output_vocab_size": 12.0, "tie_word_embeddings": false, "hidden_size": 8.0} {
		if cfg[key] != want {
			t.Errorf("config %s = %v, want %v", key, cfg[key], want)
		}
	}
	if vision["depth"] != 32.0 || vision["spatial_merge_size"] != 2.0 || vision["out_hidden_size"] != 2048.0 {
		t.Errorf("vision_config %v: want the tower's keys over llm_config's", vision)
	}
	got, err := readSafetensorsHeader(filepath.Join(out, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"language_model.lm_head.weight", "language_model.model.embed_tokens.weight",
		"language_model.model.layers.0.self_attn.q_norm.weight", "vit_model.merger.ln_q.weight", "vit_model.patch_embed.proj.weight"}
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, want) {
		t.Fatalf("tensors %v, want %v", names, want)
	}
	raw, err := os.ReadFile(filepath.Join(out, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) float32 {
		e := got[name]
		return math.Float32frombits(binary.LittleEndian.Uint32(raw[e.base+e.Offsets[0]:]))
	}
	for name, v := range map[string]float32{"language_model.lm_head.weight": 5, "vit_model.merger.ln_q.weight": 7, "vit_model.patch_embed.proj.weight": 8} {
		if value(name) != v {
			t.Errorf("%s holds %v, want %v", name, value(name), v)
		}
	}
	if !strings.Contains(progress.String(), "left out: 3 tensors, 24 bytes") {
		t.Errorf("progress %q does not count what was left out", progress.String())
	}
	if _, err := os.Stat(filepath.Join(out, "tokenizer.json")); err != nil {
		t.Error(err)
	}

	// a release without tokenizer.json is refused with what is missing
	if err := os.Remove(filepath.Join(llm, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	if err := convertLance(context.Background(), from, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("no tokenizer.json: %v", err)
	}
}

// TestLanceImageLimits: a Lance bundle takes any aspect ratio (the bucket transform crops a
// 1x32768 strip as it crops a photo), unlike the default limit of 200, and reads images as
// Lance's loader does; the other defaults stay.
func TestLanceImageLimits(t *testing.T) {
	img := DefaultImage
	overrideImage(&img, Families["lance"].Image)
	if img.MaxAspect != 32768 || img.Read != ReadPILWhite || img.MaxPixels != DefaultImage.MaxPixels || img.MaxBytes != DefaultImage.MaxBytes {
		t.Errorf("lance image limits %+v", img)
	}
	if Families["qwen2_5_vl"].Image != (Image{}) {
		t.Error("qwen2_5_vl overrides the default image limits")
	}
}
