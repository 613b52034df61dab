// Package deepseekocr2_test runs the DeepSeek-OCR-2 family through the engine: the family's
// parity sweep (core/internal/models/deepseekocr2/testdata/model.json, from
// scripts/reference/golden_deepseek_ocr2_model.py) loaded from checkpoint directories by the
// models table and generated with engine.Generate (prefill, then decode steps over the KV pool).
package deepseekocr2_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models"
)

const golden = "../../models/deepseekocr2/testdata/model.json"

type sweep struct {
	PixelSeeds struct {
		Global int
		Tiles  []int
		Scale  float64
	} `json:"pixel_seeds"`
	Checkpoints []struct {
		Name         string
		TextConfig   json.RawMessage `json:"text_config"`
		VisionConfig json.RawMessage `json:"vision_config"`
		Tensors      []struct {
			Name          string
			Shape         []int
			Seed          int
			Scale, Offset float64
		}
		Cases []struct {
			Name     string
			Tiles    int
			InputIDs []int32 `json:"input_ids"`
			Tokens   []int32
		}
	}
}

// splitmix is the golden's weight values (the top 24 bits of splitmix64((seed << 32) + i) over
// 2^24, minus 0.5, times scale plus offset, rounded once to float32).
func splitmix(n, seed int, scale, offset float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		z := uint64(seed)<<32 + uint64(i) + 0x9E3779B97F4A7C15
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		z ^= z >> 31
		v[i] = float32((float64(z>>40)/float64(1<<24)-0.5)*scale + offset)
	}
	return v
}

// pixels are the golden's views: ((i·7919 + seed·104729) mod 2003) / 2003 − 0.5, times scale, a
// [3, size, size] view laid out as the plugin's 64x64 patch rows (3·16·16 values), the patches
// past size zero.
func pixels(size, seed int, scale float64) []float32 {
	px := make([]float32, 3*size*size)
	for i := range px {
		px[i] = float32((float64((i*7919+seed*104729)%2003)/2003.0 - 0.5) * scale)
	}
	const side, patch = 64, 16
	out := make([]float32, side*side*3*patch*patch)
	for py := range size / patch {
		for pxx := range size / patch {
			row := out[(py*side+pxx)*3*patch*patch:]
			for c := range 3 {
				for y := range patch {
					for x := range patch {
						row[(c*patch+y)*patch+x] = px[(c*size+py*patch+y)*size+pxx*patch+x]
					}
				}
			}
		}
	}
	return out
}

// writeCheckpoint writes checkpoint k of sw as a transformers 5 directory: config.json and one
// F32 model.safetensors.
func writeCheckpoint(t *testing.T, sw *sweep, k int) string {
	t.Helper()
	ck := &sw.Checkpoints[k]
	dir := t.TempDir()
	cfg, err := json.Marshal(map[string]any{"model_type": "deepseek_ocr2", "text_config": ck.TextConfig,
		"vision_config": ck.VisionConfig, "image_token_id": 128815, "tie_word_embeddings": false})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	hdr := map[string]any{}
	var data []byte
	for _, ts := range ck.Tensors {
		n := 1
		for _, d := range ts.Shape {
			n *= d
		}
		start := len(data)
		for _, x := range splitmix(n, ts.Seed, ts.Scale, ts.Offset) {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
		}
		hdr[ts.Name] = map[string]any{"dtype": "F32", "shape": ts.Shape, "data_offsets": []int{start, len(data)}}
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	buf := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), append(append(buf, h...), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSweepThroughEngine: every checkpoint of the family's sweep, loaded by the models table
// from its config.json and safetensors and run by engine.Generate (the image encoded, a
// prefill, then decode steps over the KV pool), gives transformers' greedy tokens on each case
// (0 to 6 local tiles, the question before or after the image).
func TestSweepThroughEngine(t *testing.T) {
	raw, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	var sw sweep
	if err := json.Unmarshal(raw, &sw); err != nil {
		t.Fatal(err)
	}
	if len(sw.Checkpoints) < 8 {
		t.Fatalf("%d checkpoints", len(sw.Checkpoints))
	}
	global := pixels(1024, sw.PixelSeeds.Global, sw.PixelSeeds.Scale)
	for k := range sw.Checkpoints {
		ck := &sw.Checkpoints[k]
		t.Run(ck.Name, func(t *testing.T) {
			b, err := cpu.New(cpu.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			m, err := models.Load(writeCheckpoint(t, &sw, k), b, models.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, c := range ck.Cases {
				t.Run(c.Name, func(t *testing.T) {
					img := model.Image{Grid: model.Grid{T: c.Tiles + 1, H: 64, W: 64}}
					for i := range c.Tiles {
						img.Pixels = append(img.Pixels, pixels(768, sw.PixelSeeds.Tiles[i], sw.PixelSeeds.Scale)...)
						img.Masks = append(img.Masks, model.PatchRect{W: 48, H: 48})
					}
					img.Pixels = append(img.Pixels, global...)
					if img.Masks != nil {
						img.Masks = append(img.Masks, model.PatchRect{W: 64, H: 64})
					}
					res, err := engine.Generate(context.Background(), m, engine.Request{IDs: c.InputIDs, Images: []model.Image{img},
						MaxNewTokens: len(c.Tokens), IgnoreEOS: true})
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(res.Tokens, c.Tokens) {
						t.Errorf("tokens %v, want %v", res.Tokens, c.Tokens)
					}
				})
			}
		})
	}
}
