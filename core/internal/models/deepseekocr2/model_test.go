package deepseekocr2

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
)

// splitmixValues is golden_deepseek_ocr2_model.py's weight(): u = the top 24 bits of
// splitmix64((seed << 32) + i) over 2^24, minus 0.5; value = u·scale + offset, rounded once.
func splitmixValues(n, seed int, scale, offset float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		z := uint64(seed)<<32 + uint64(i) + 0x9E3779B97F4A7C15
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		z ^= z >> 31
		u := float64(z>>40)/float64(1<<24) - 0.5
		v[i] = float32(u*scale + offset)
	}
	return v
}

type modelGolden struct {
	PixelSeeds struct {
		Global int
		Tiles  []int
		Scale  float64
	} `json:"pixel_seeds"`
	Checkpoints []goldenCheckpoint
}

// goldenCheckpoint is one checkpoint of the model golden: its text config, tensors and cases.
type goldenCheckpoint struct {
	Name         string
	VisionConfig visionConfigJSON `json:"vision_config"`
	TextConfig   struct {
		VocabSize         int     `json:"vocab_size"`
		HiddenSize        int     `json:"hidden_size"`
		IntermediateSize  int     `json:"intermediate_size"`
		NumHiddenLayers   int     `json:"num_hidden_layers"`
		NumAttentionHeads int     `json:"num_attention_heads"`
		NumKeyValueHeads  int     `json:"num_key_value_heads"`
		RMSNormEps        float64 `json:"rms_norm_eps"`
		RopeParameters    struct {
			RopeTheta float64 `json:"rope_theta"`
		} `json:"rope_parameters"`
		NRoutedExperts      int      `json:"n_routed_experts"`
		NumExpertsPerTok    int      `json:"num_experts_per_tok"`
		NSharedExperts      int      `json:"n_shared_experts"`
		MoEIntermediateSize int      `json:"moe_intermediate_size"`
		TopkMethod          string   `json:"topk_method"`
		NGroup              int      `json:"n_group"`
		TopkGroup           int      `json:"topk_group"`
		RoutedScalingFactor float64  `json:"routed_scaling_factor"`
		MLPLayerTypes       []string `json:"mlp_layer_types"`
	} `json:"text_config"`
	Tensors []goldenTensor
	Cases   []struct {
		Name     string
		Tiles    int
		InputIDs []int32 `json:"input_ids"`
		Tokens   []int32
		Steps    []struct {
			IDs    []int32
			Logits []float64
			Gap    float64
		}
	}
}

// TestModelGolden is the CPU parity sweep: the family end to end on 8 tiny checkpoints made from
// transformers' own class with the real vocabulary (experts 4 to 16, top-k 1 to 3, 0 to 2 shared
// experts, greedy and group-limited routing, scaling factors, dense/sparse layer mixes, widths,
// heads and grouped KV heads, SAM widths, depths and global layers), each on two images of 0 to 6
// local tiles, some with the question first: the vision tower's rows scattered over the prompt's
// <image> placeholders, the decoder over the whole sequence, greedy; each step's top 8 logits (ids
// and values within 1e-4 of logits up to ~20) and the 6 greedy tokens equal
// DeepseekOcr2ForConditionalGeneration.generate's (scripts/reference/golden_deepseek_ocr2_model.py).
// Each step reruns the whole sequence (no KV cache: that is the engine's).
func TestModelGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/model.json")
	if err != nil {
		t.Fatal(err)
	}
	var g modelGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(cpu.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	global := viewRows(weightValues(3*1024*1024, g.PixelSeeds.Global, g.PixelSeeds.Scale, 0), 1024)
	tiles := make([][]float32, len(g.PixelSeeds.Tiles))
	tile := func(i int) []float32 {
		if tiles[i] == nil {
			tiles[i] = viewRows(weightValues(3*768*768, g.PixelSeeds.Tiles[i], g.PixelSeeds.Scale, 0), 768)
		}
		return tiles[i]
	}
	if len(g.Checkpoints) < 8 {
		t.Fatalf("%d checkpoints, the sweep has 8", len(g.Checkpoints))
	}
	for ci := range g.Checkpoints {
		ck := &g.Checkpoints[ci]
		t.Run(ck.Name, func(t *testing.T) {
			vis, dec := bindGolden(t, b, &g, ci)
			for _, cs := range ck.Cases {
				t.Run(cs.Name, func(t *testing.T) {
					img := model.Image{Grid: model.Grid{T: cs.Tiles + 1, H: 64, W: 64}}
					for i := range cs.Tiles {
						img.Pixels = append(img.Pixels, tile(i)...)
						img.Masks = append(img.Masks, model.PatchRect{W: 48, H: 48})
					}
					img.Pixels = append(img.Pixels, global...)
					if img.Masks != nil {
						img.Masks = append(img.Masks, model.PatchRect{W: 64, H: 64})
					}
					checkGeneration(t, b, vis, dec, img, cs.InputIDs, cs.Tokens, cs.Steps)
				})
			}
		})
	}
}

// bindGolden writes checkpoint ci of g and binds its tower and decoder on b.
func bindGolden(t *testing.T, b ml.Backend, g *modelGolden, ci int) (*Vision, *Decoder) {
	t.Helper()
	ck := &g.Checkpoints[ci]
	tc := ck.TextConfig
	cfg := TextConfig{Hidden: tc.HiddenSize, Layers: tc.NumHiddenLayers, Heads: tc.NumAttentionHeads, KVHeads: tc.NumKeyValueHeads,
		HeadDim: tc.HiddenSize / tc.NumAttentionHeads, Intermediate: tc.IntermediateSize, Vocab: tc.VocabSize,
		Eps: tc.RMSNormEps, Theta: tc.RopeParameters.RopeTheta}
	cfg.MoE = MoEConfig{Experts: tc.NRoutedExperts, TopK: tc.NumExpertsPerTok, Inter: tc.MoEIntermediateSize,
		Shared: tc.NSharedExperts, Scale: tc.RoutedScalingFactor}
	if tc.TopkMethod == "group_limited_greedy" {
		cfg.MoE.Groups, cfg.MoE.TopGroups = tc.NGroup, tc.TopkGroup
	}
	for _, k := range tc.MLPLayerTypes {
		cfg.MoE.Sparse = append(cfg.MoE.Sparse, k == "sparse")
	}
	dir := t.TempDir()
	writeTensors(t, dir, ck.Tensors, splitmixValues)
	c, err := ml.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ld := ml.NewLoader(b, c)
	vis := BindVision(ld, ck.VisionConfig.config(cfg.Hidden))
	dec, err := BindDecoder(ld, cfg)
	if err == nil {
		dec.BindHead(ld)
		err = ld.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	return vis, dec
}

// checkGeneration encodes img, then greedily extends ids one token at a time, the whole
// sequence each step, comparing each step's top logits and the tokens with the golden's.
func checkGeneration(t *testing.T, b ml.Backend, vis *Vision, dec *Decoder, img model.Image, ids, tokens []int32, steps []struct {
	IDs    []int32
	Logits []float64
	Gap    float64
}) {
	t.Helper()
	rows, err := vis.ImageRows(img)
	if err != nil {
		t.Fatal(err)
	}
	var places []int32
	for i, id := range ids {
		if id == imageTokenID {
			places = append(places, int32(i))
		}
	}
	if len(places) != rows {
		t.Fatalf("%d <image> placeholders for an image of %d rows", len(places), rows)
	}
	c := &dec.cfg
	feat, _ := b.Alloc(rows, c.Hidden, ml.F32)
	if err := vis.Ops(b, img, feat); err != nil {
		t.Fatal(err)
	}
	seq := slices.Clone(ids)
	hd := c.HeadDim
	logits, _ := b.Alloc(1, c.Vocab, ml.F32)
	for s, st := range steps {
		n := len(seq)
		x := b.Scratch("test.x", n, c.Hidden)
		b.Embed(x, dec.embed, b.Ints(seq))
		b.Scatter(x, feat, b.Ints(places)) // inputs_embeds.masked_scatter(special_image_mask, image_features)
		cos, sin := dec.Angles(0, n)
		rot := ml.Rotary{Cos: b.Input(cos, n, hd/2), Sin: b.Input(sin, n, hd/2)}
		a := ml.Attn{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))), Mask: ml.Mask{Causal: true}}
		delta := dec.LayerOps(b, x, func(_ int, out, q, k, v ml.Tensor) {
			b.Rope(q, c.Heads, hd, rot)
			b.Rope(k, c.KVHeads, hd, rot)
			b.Attention(out, q, k, v, a)
		})
		dec.Head(b, x.RowsAt(n-1, 1), delta.RowsAt(n-1, 1), logits)
		got := make([]float32, c.Vocab)
		b.Read(got, logits)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		order := make([]int32, c.Vocab)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortStableFunc(order, func(i, j int32) int {
			switch {
			case got[i] > got[j]:
				return -1
			case got[i] < got[j]:
				return 1
			}
			return 0
		})
		var worst float64
		for i, id := range st.IDs {
			worst = math.Max(worst, math.Abs(float64(got[id])-st.Logits[i]))
		}
		if worst > 1e-4*math.Max(1, math.Abs(st.Logits[0])) {
			t.Errorf("step %d: the reference's top logits differ by up to %g", s, worst)
		}
		if !slices.Equal(order[:len(st.IDs)], st.IDs) && st.Gap > 5e-4 {
			t.Errorf("step %d: top ids %v, want %v", s, order[:len(st.IDs)], st.IDs)
		}
		if order[0] != tokens[s] {
			t.Fatalf("step %d: greedy token %d, want %d (gap %g); so far %v", s, order[0], tokens[s], st.Gap, seq[len(ids):])
		}
		seq = append(seq, order[0])
	}
	t.Logf("tokens %v", seq[len(ids):])
}

// imageTokenID is <image> (DeepseekOcr2Config.image_token_id).
const imageTokenID = 128815

// TestModelGoldenCatchesMutations: the goldens catch the decoder's routing hazards: on the
// group-limited, scaled checkpoint, plain greedy routing, the scaling factor dropped, or one
// routed expert fewer a row each change the first step's logits to 3x the tolerance or more, as
// does the view separator left out of the image's rows (its placeholder holding the token
// embedding).
func TestModelGoldenCatchesMutations(t *testing.T) {
	raw, err := os.ReadFile("testdata/model.json")
	if err != nil {
		t.Fatal(err)
	}
	var g modelGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(cpu.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ci := slices.IndexFunc(g.Checkpoints, func(c goldenCheckpoint) bool {
		return c.TextConfig.TopkMethod == "group_limited_greedy" && c.TextConfig.RoutedScalingFactor != 1
	})
	if ci < 0 {
		t.Fatal("no group-limited, scaled checkpoint in the golden")
	}
	vis, dec := bindGolden(t, b, &g, ci)
	cs := g.Checkpoints[ci].Cases[0]
	img := model.Image{Grid: model.Grid{T: 1, H: 64, W: 64}, Pixels: viewRows(weightValues(3*1024*1024, g.PixelSeeds.Global, g.PixelSeeds.Scale, 0), 1024)}
	if cs.Tiles != 0 {
		t.Fatalf("case %s has tiles", cs.Name)
	}
	step := cs.Steps[0]
	first := func(separator bool) float64 {
		rows, _ := vis.ImageRows(img)
		feat, _ := b.Alloc(rows, dec.cfg.Hidden, ml.F32)
		if err := vis.Ops(b, img, feat); err != nil {
			t.Fatal(err)
		}
		var places []int32
		for i, id := range cs.InputIDs {
			if id == imageTokenID {
				places = append(places, int32(i))
			}
		}
		if !separator {
			places, feat = places[:rows-1], feat.RowsAt(0, rows-1)
		}
		c := &dec.cfg
		n, hd := len(cs.InputIDs), c.HeadDim
		x := b.Scratch("test.x", n, c.Hidden)
		b.Embed(x, dec.embed, b.Ints(cs.InputIDs))
		b.Scatter(x, feat, b.Ints(places))
		cos, sin := dec.Angles(0, n)
		rot := ml.Rotary{Cos: b.Input(cos, n, hd/2), Sin: b.Input(sin, n, hd/2)}
		a := ml.Attn{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))), Mask: ml.Mask{Causal: true}}
		delta := dec.LayerOps(b, x, func(_ int, out, q, k, v ml.Tensor) {
			b.Rope(q, c.Heads, hd, rot)
			b.Rope(k, c.KVHeads, hd, rot)
			b.Attention(out, q, k, v, a)
		})
		logits, _ := b.Alloc(1, c.Vocab, ml.F32)
		dec.Head(b, x.RowsAt(n-1, 1), delta.RowsAt(n-1, 1), logits)
		got := make([]float32, c.Vocab)
		b.Read(got, logits)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		var worst float64
		for i, id := range step.IDs {
			worst = math.Max(worst, math.Abs(float64(got[id])-step.Logits[i]))
		}
		return worst
	}
	tol := 1e-4 * math.Max(1, math.Abs(step.Logits[0]))
	if d := first(true); d > tol {
		t.Fatalf("the unmutated checkpoint is %g away", d)
	}
	for _, m := range []struct {
		name   string
		mutate func(e *ml.MoE)
	}{
		{"greedy routing", func(e *ml.MoE) { e.Groups, e.TopGroups = 0, 0 }},
		{"no scaling factor", func(e *ml.MoE) { e.Scale = 1 }},
		{"one routed expert fewer", func(e *ml.MoE) { e.TopK-- }},
	} {
		saved := make([]ml.MoE, len(dec.layers))
		for l := range dec.layers {
			if e := dec.layers[l].moe; e != nil {
				saved[l] = *e
				m.mutate(e)
			}
		}
		if d := first(true); d <= 3*tol {
			t.Errorf("%s: the first step's logits stay within %g of the golden (tolerance %g)", m.name, d, tol)
		}
		for l := range dec.layers {
			if e := dec.layers[l].moe; e != nil {
				*e = saved[l]
			}
		}
	}
	if d := first(false); d <= 3*tol {
		t.Errorf("the view separator left out: the first step's logits stay within %g of the golden (tolerance %g)", d, tol)
	}
}
