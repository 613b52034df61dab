// Package deepseekocr2_test runs the DeepSeek-OCR-2 family through the engine: the family's
// parity sweep (core/internal/models/deepseekocr2/testdata/model.json, from
// scripts/reference/golden_deepseek_ocr2_model.py) loaded from checkpoint directories by the
// models table and generated with engine.Generate (prefill, then decode steps over the KV pool).
package deepseekocr2_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models"
)

// run loads dir with the models table and generates every case of ck, checking the tokens.
func run(t *testing.T, sw *fixture.DeepseekSweep, ck *fixture.DeepseekCheckpoint, dir string) {
	t.Helper()
	b, err := cpu.New(cpu.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	m, err := models.Load(dir, b, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, c := range ck.Cases {
		t.Run(c.Name, func(t *testing.T) {
			res, err := engine.Generate(context.Background(), m, engine.Request{IDs: c.InputIDs,
				Images: []model.Image{sw.Image(c.Tiles)}, MaxNewTokens: len(c.Tokens), IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Tokens, c.Tokens) {
				t.Errorf("tokens %v, want %v", res.Tokens, c.Tokens)
			}
		})
	}
}

// TestSweepThroughEngine: every checkpoint of the family's sweep, loaded by the models table
// from its config.json and safetensors and run by engine.Generate (the image encoded, a
// prefill, then decode steps over the KV pool), gives transformers' greedy tokens on each case
// (0 to 6 local tiles, the question before or after the image).
func TestSweepThroughEngine(t *testing.T) {
	sw, err := fixture.LoadDeepseekSweep()
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Checkpoints) < 8 {
		t.Fatalf("%d checkpoints", len(sw.Checkpoints))
	}
	for i := range sw.Checkpoints {
		ck := &sw.Checkpoints[i]
		t.Run(ck.Name, func(t *testing.T) {
			dir := t.TempDir()
			if err := ck.Write(dir, nil, nil); err != nil {
				t.Fatal(err)
			}
			run(t, sw, ck, dir)
		})
	}
}

// originalRenames are transformers 5.17's conversion_mapping.py renames of deepseek_ocr2 run
// backwards: a transformers name to the original release's (deepseek-ai/DeepSeek-OCR-2).
var originalRenames = []struct {
	re   *regexp.Regexp
	orig string
}{
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.layers\.(\d+)\.layer_norm1\.`), "model.sam_model.blocks.$1.norm1."},
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.layers\.(\d+)\.layer_norm2\.`), "model.sam_model.blocks.$1.norm2."},
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.layers\.(\d+)\.`), "model.sam_model.blocks.$1."},
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.patch_embed\.projection\.`), "model.sam_model.patch_embed.proj."},
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.pos_embed$`), "model.sam_model.pos_embed"},
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.neck\.conv1\.`), "model.sam_model.neck.0."},
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.neck\.layer_norm1\.`), "model.sam_model.neck.1."},
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.neck\.conv2\.`), "model.sam_model.neck.2."},
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.neck\.layer_norm2\.`), "model.sam_model.neck.3."},
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.proj\.conv1\.`), "model.sam_model.net_2."},
	{regexp.MustCompile(`^model\.vision_tower\.sam_encoder\.proj\.conv2\.`), "model.sam_model.net_3."},
	{regexp.MustCompile(`^model\.vision_tower\.vision_encoder\.layers\.`), "model.qwen2_model.model.model.layers."},
	{regexp.MustCompile(`^model\.vision_tower\.vision_encoder\.norm\.`), "model.qwen2_model.model.model.norm."},
	{regexp.MustCompile(`^model\.vision_tower\.query_768_resolution\.`), "model.qwen2_model.query_768."},
	{regexp.MustCompile(`^model\.vision_tower\.query_1024_resolution\.`), "model.qwen2_model.query_1024."},
	{regexp.MustCompile(`^model\.multi_modal_projector\.`), "model.projector.layers."},
	{regexp.MustCompile(`^model\.view_separator$`), "model.view_seperator"}, //nolint:misspell // the original's name
	{regexp.MustCompile(`^model\.language_model\.`), "model."},
}

// TestOriginalLayout: the same weights in the original release's layout (its tensor names, each
// routed expert a module of its own: mlp.experts.E.{gate,up,down}_proj.weight) give the same
// tokens as the transformers layout, on every case of two checkpoints (one greedy, one
// group-limited with two shared experts).
func TestOriginalLayout(t *testing.T) {
	sw, err := fixture.LoadDeepseekSweep()
	if err != nil {
		t.Fatal(err)
	}
	rename := func(name string) string {
		if strings.Contains(name, ".mlp.experts.") { // split below
			return ""
		}
		for _, r := range originalRenames {
			if r.re.MatchString(name) {
				return r.re.ReplaceAllString(name, r.orig)
			}
		}
		return name
	}
	for _, name := range []string{"e8_k2_s1", "e16_k3_s2_group"} {
		ck, err := sw.Checkpoint(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			experts := func(add func(string, []int, []float32)) {
				for _, ts := range ck.Tensors {
					layer, ok := strings.CutSuffix(ts.Name, "mlp.experts.gate_up_proj")
					if !ok {
						continue
					}
					gu, shape, _ := ck.TensorValues(ts.Name)
					dn, dshape, _ := ck.TensorValues(layer + "mlp.experts.down_proj")
					e, twoI, h := shape[0], shape[1], shape[2]
					inter := twoI / 2
					layer = strings.Replace(layer, "model.language_model.", "model.", 1)
					for x := range e {
						base := x * twoI * h
						add(fmt.Sprintf("%smlp.experts.%d.gate_proj.weight", layer, x), []int{inter, h}, gu[base:base+inter*h])
						add(fmt.Sprintf("%smlp.experts.%d.up_proj.weight", layer, x), []int{inter, h}, gu[base+inter*h:base+twoI*h])
						d := x * dshape[1] * dshape[2]
						add(fmt.Sprintf("%smlp.experts.%d.down_proj.weight", layer, x), []int{dshape[1], dshape[2]}, dn[d:d+dshape[1]*dshape[2]])
					}
				}
			}
			if err := ck.Write(dir, rename, experts); err != nil {
				t.Fatal(err)
			}
			entries, err := ml.ReadSafetensorsHeader(filepath.Join(dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			var original int
			for _, e := range entries {
				if strings.Contains(e.Name, "vision_tower") || strings.Contains(e.Name, "language_model") || strings.HasSuffix(e.Name, "gate_up_proj") {
					t.Fatalf("tensor %s is in the transformers layout", e.Name)
				}
				if strings.Contains(e.Name, "sam_model.") || strings.Contains(e.Name, "qwen2_model.") || strings.Contains(e.Name, ".mlp.experts.0.") {
					original++
				}
			}
			if original == 0 {
				t.Fatal("no tensor of the original layout written")
			}
			run(t, sw, ck, dir)
		})
	}
}
