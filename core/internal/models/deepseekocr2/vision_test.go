package deepseekocr2

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
)

// visionConfigJSON is vision_config as the golden scripts write it.
type visionConfigJSON struct {
	SAM struct {
		HiddenSize         int    `json:"hidden_size"`
		NumHiddenLayers    int    `json:"num_hidden_layers"`
		NumAttentionHeads  int    `json:"num_attention_heads"`
		OutputChannels     int    `json:"output_channels"`
		MLPDim             int    `json:"mlp_dim"`
		GlobalAttnIndexes  []int  `json:"global_attn_indexes"`
		DownsampleChannels [2]int `json:"downsample_channels"`
	} `json:"sam_config"`
	Encoder struct {
		HiddenSize        int `json:"hidden_size"`
		IntermediateSize  int `json:"intermediate_size"`
		NumHiddenLayers   int `json:"num_hidden_layers"`
		NumAttentionHeads int `json:"num_attention_heads"`
		NumKeyValueHeads  int `json:"num_key_value_heads"`
		RopeParameters    struct {
			RopeTheta float64 `json:"rope_theta"`
		} `json:"rope_parameters"`
	} `json:"encoder_config"`
}

// config is the tower's settings (the classes' defaults where the golden leaves a key out:
// window 14, 1024 px views of 16 px patches, epsilons 1e-6).
func (j *visionConfigJSON) config(textHidden int) VisionConfig {
	var c VisionConfig
	s, e := j.SAM, j.Encoder
	c.SAM.Hidden, c.SAM.Layers, c.SAM.Heads, c.SAM.MLP = s.HiddenSize, s.NumHiddenLayers, s.NumAttentionHeads, s.MLPDim
	c.SAM.Window, c.SAM.Global, c.SAM.OutChannels, c.SAM.Down = 14, s.GlobalAttnIndexes, s.OutputChannels, s.DownsampleChannels
	c.SAM.ImageSize, c.SAM.Patch, c.SAM.Eps = 1024, 16, 1e-6
	c.Encoder.Hidden, c.Encoder.Layers, c.Encoder.Heads = e.HiddenSize, e.NumHiddenLayers, e.NumAttentionHeads
	c.Encoder.KVHeads, c.Encoder.Intermediate, c.Encoder.Eps, c.Encoder.Theta = e.NumKeyValueHeads, e.IntermediateSize, 1e-6, e.RopeParameters.RopeTheta
	c.TextHidden = textHidden
	return c
}

type visionGolden struct {
	Config struct {
		TextConfig struct {
			HiddenSize int `json:"hidden_size"`
		} `json:"text_config"`
		VisionConfig visionConfigJSON `json:"vision_config"`
	}
	PixelSeeds struct {
		Global int
		Tiles  []int
		Scale  float64
	} `json:"pixel_seeds"`
	Tensors []goldenTensor
	Cases   []struct {
		Name        string
		Tiles, Rows int
		Out         string
	}
}

// goldenTensor is a tensor of a golden checkpoint: its values a formula of seed, scale, offset.
type goldenTensor struct {
	Name          string
	Shape         []int
	Seed          int
	Scale, Offset float64
}

func (g *visionGolden) config() VisionConfig {
	return g.Config.VisionConfig.config(g.Config.TextConfig.HiddenSize)
}

// weightValues is the golden script's weight(n, seed, scale, offset).
func weightValues(n, seed int, scale, offset float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		u := float64((i*7919+seed*104729)%2003)/2003.0 - 0.5
		v[i] = float32(u*scale + offset)
	}
	return v
}

// writeCheckpoint writes the golden's tensors as one F32 safetensors file.
func writeCheckpoint(t *testing.T, dir string, g *visionGolden) {
	t.Helper()
	writeTensors(t, dir, g.Tensors, weightValues)
}

// writeTensors writes tensors as one F32 safetensors file, their values from values.
func writeTensors(t *testing.T, dir string, tensors []goldenTensor, values func(n, seed int, scale, offset float64) []float32) {
	t.Helper()
	hdr := map[string]any{}
	var data []byte
	for _, ts := range tensors {
		n := 1
		for _, d := range ts.Shape {
			n *= d
		}
		start := len(data)
		for _, x := range values(n, ts.Seed, ts.Scale, ts.Offset) {
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
	buf = append(append(buf, h...), data...)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// viewRows lays a view's [3, size, size] pixels out as the plugin's 64x64 patch rows (3·16·16
// values each), the patches past the view's size zero (a tile's padding).
func viewRows(px []float32, size int) []float32 {
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

// runVision binds the golden's checkpoint (its tensors named in zero set to 0) and returns, per
// case, the largest difference from transformers' output over the local tiles' rows and over the
// rest (the global view's and the separator), and the largest output.
func runVision(t *testing.T, g *visionGolden, zero map[string]bool) (tiles, worst, scale []float64) {
	t.Helper()
	dir := t.TempDir()
	gz := *g
	gz.Tensors = append([]goldenTensor(nil), g.Tensors...)
	for i := range gz.Tensors {
		if zero[gz.Tensors[i].Name] {
			gz.Tensors[i].Scale, gz.Tensors[i].Offset = 0, 0
		}
	}
	writeCheckpoint(t, dir, &gz)
	ck, err := ml.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	b, err := cpu.New(cpu.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := g.config()
	ld := ml.NewLoader(b, ck)
	v := BindVision(ld, cfg)
	if ld.Err() != nil {
		t.Fatal(ld.Err())
	}
	global := viewRows(weightValues(3*1024*1024, g.PixelSeeds.Global, g.PixelSeeds.Scale, 0), 1024)
	for _, c := range g.Cases {
		img := model.Image{Grid: model.Grid{T: c.Tiles + 1, H: 64, W: 64}}
		for i := range c.Tiles {
			img.Pixels = append(img.Pixels, viewRows(weightValues(3*768*768, g.PixelSeeds.Tiles[i], g.PixelSeeds.Scale, 0), 768)...)
			img.Masks = append(img.Masks, model.PatchRect{W: 48, H: 48})
		}
		img.Pixels = append(img.Pixels, global...)
		if img.Masks != nil {
			img.Masks = append(img.Masks, model.PatchRect{W: 64, H: 64})
		}
		rows, err := v.ImageRows(img)
		if err != nil || rows != c.Rows {
			t.Fatalf("%s: ImageRows = %d, %v; want %d", c.Name, rows, err, c.Rows)
		}
		res, _ := b.Alloc(rows, cfg.TextHidden, ml.F32)
		if err := v.Ops(b, img, res); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, rows*cfg.TextHidden)
		b.Read(got, res)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		want := f32s(t, c.Out)
		var tw, w, s float64
		split := c.Tiles * 144 * cfg.TextHidden // a 768 tile's 12x12 queries each
		for i := range got {
			d := math.Abs(float64(got[i] - want[i]))
			if i < split {
				tw = math.Max(tw, d)
			} else {
				w = math.Max(w, d)
			}
			s = math.Max(s, math.Abs(float64(want[i])))
		}
		tiles, worst, scale = append(tiles, tw), append(worst, w), append(scale, s)
	}
	return tiles, worst, scale
}

func readVision(t *testing.T) *visionGolden {
	t.Helper()
	raw, err := os.ReadFile("testdata/vision.json")
	if err != nil {
		t.Fatal(err)
	}
	var g visionGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 2 || len(g.Tensors) < 40 {
		t.Fatalf("golden: %d cases, %d tensors", len(g.Cases), len(g.Tensors))
	}
	return &g
}

// TestVisionGolden: the tower (SAM's windowed and global layers with their relative positions,
// the neck, the downsampling, the encoder with its hybrid mask, the projector, the separator)
// equals transformers' DeepseekOcr2Model.get_image_features on a global view alone and with two
// local tiles (the tiles' 48x48 grid resampling the position table and the global layer's
// relative-position tables), scripts/reference/golden_deepseek_ocr2_vision.py.
func TestVisionGolden(t *testing.T) {
	g := readVision(t)
	tiles, worst, scale := runVision(t, g, nil)
	for i, c := range g.Cases {
		t.Logf("%s: max |diff| %g on the tiles' rows, %g on the rest (outputs up to %g)", c.Name, tiles[i], worst[i], scale[i])
		if d := math.Max(tiles[i], worst[i]); d > 1e-4*math.Max(scale[i], 1) {
			t.Errorf("%s: max |diff| %g against transformers (outputs up to %g)", c.Name, d, scale[i])
		}
	}
}

// TestVisionGoldenCatchesMutations: the golden depends on SAM's relative positions (every
// layer's tables zeroed: the bias SAM's random init leaves near zero), its position table and a
// single layer's tables, windowed or global, on the tiles' rows (resampled tables) and the global
// view's alike: a tower that drops any of them is at least 10x the parity tolerance away.
func TestVisionGoldenCatchesMutations(t *testing.T) {
	g := readVision(t)
	names := func(match func(string) bool) map[string]bool {
		out := map[string]bool{}
		for _, ts := range g.Tensors {
			if match(ts.Name) {
				out[ts.Name] = true
			}
		}
		if len(out) == 0 {
			t.Fatal("no tensor matched")
		}
		return out
	}
	for _, m := range []struct {
		name string
		zero map[string]bool
	}{
		{"relative positions zeroed", names(func(n string) bool { return strings.Contains(n, "rel_pos") })},
		{"the first window layer's relative positions zeroed", names(func(n string) bool { return strings.Contains(n, "layers.0.attn.rel_pos") })},
		{"the global layer's relative positions zeroed", names(func(n string) bool { return strings.Contains(n, "layers.1.attn.rel_pos") })},
		{"the position table zeroed", names(func(n string) bool { return strings.HasSuffix(n, "pos_embed") })},
	} {
		tiles, worst, scale := runVision(t, g, m.zero)
		for i, c := range g.Cases {
			bound := 1e-3 * math.Max(scale[i], 1)
			if worst[i] <= bound || (c.Tiles > 0 && tiles[i] <= bound) {
				t.Errorf("%s: %s lands within %g (tiles) and %g (global view) of the golden", m.name, c.Name, tiles[i], worst[i])
			}
		}
	}
}
