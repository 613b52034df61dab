package locateanything

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/model"
)

// TestParseConfig reads the remote code's config.json layout: MoonViT's keys, the position table's
// height and width, the checkpoint's image token (not the class default 151667), the nested Qwen2
// text config with its untied head.
func TestParseConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "enginetest", "testdata", "configs", "locateanything_3b_reconstructed.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := model.ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	v, tx := cfg.Vision, cfg.Text
	if v.Depth != 27 || v.Hidden != 1152 || v.Heads != 16 || v.Intermediate != 4304 || v.PatchSize != 14 || v.MergeSize != 2 ||
		v.TemporalPatchSize != 1 || v.PosGrid != [2]int{64, 64} || v.PosEmbeddings != 4096 || v.OutHidden != 2048 ||
		v.NormEps != 1e-5 || v.RopeTheta != 10000 {
		t.Errorf("vision %+v", v)
	}
	if tx.Layers != 36 || tx.Hidden != 2048 || tx.Heads != 16 || tx.KVHeads != 2 || tx.HeadDim != 128 || tx.Vocab != 152681 ||
		!tx.QKVBias || !tx.Rope1D || tx.RopeTheta != 1e6 || cfg.TieEmbeddings {
		t.Errorf("text %+v, tied %v", tx, cfg.TieEmbeddings)
	}
	if cfg.ImageTokenID != 151665 || cfg.VisionStartTokenID != 151666 || cfg.VisionEndTokenID != 151667 ||
		!slices.Equal(cfg.EOSTokenIDs, []int32{151645}) {
		t.Errorf("tokens: image %d, start %d, end %d, eos %v", cfg.ImageTokenID, cfg.VisionStartTokenID, cfg.VisionEndTokenID, cfg.EOSTokenIDs)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"merge_kernel_size": [2, 2]`, `"merge_kernel_size": [3, 3]`, "merge_kernel_size [3 3]"},
		{`"use_llm_lora": 0`, `"use_llm_lora": 16`, "use_llm_lora 16"},
		{`["Qwen2ForCausalLM"]`, `["Qwen3ForCausalLM"]`, "Qwen3ForCausalLM"},
		{`"num_attention_heads": 16,
    "num_hidden_layers": 27`, `"num_attention_heads": 10,
    "num_hidden_layers": 27`, "vision head_dim 1152/10"},
	} {
		bad := strings.Replace(string(data), tc.from, tc.to, 1)
		if bad == string(data) {
			t.Fatalf("%q not in the config", tc.from)
		}
		_, err := model.ParseConfig([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.to, err, tc.want)
		}
		if tc.want != "vision head_dim 1152/10" && !errors.Is(err, model.ErrUnsupported) {
			t.Errorf("%s: %v is not ErrUnsupported", tc.to, err)
		}
	}
}

// TestPairsToHalves: each q and k head's even dimensions first, then its odd ones; v untouched.
func TestPairsToHalves(t *testing.T) {
	got := pairsToHalves(8, 2) // heads of 4
	want := []int{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15, 16, 17, 18, 19, 20, 21, 22, 23}
	if !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

// TestCubicTaps: a resize to the same size takes each row once, with weight 1 (the reference then
// uses the table as it is); a 2x shrink and a 2x stretch take torch's taps (A = -0.75).
func TestCubicTaps(t *testing.T) {
	for d, tp := range cubicTaps(5, 5) {
		if tp.w != [4]float32{0, 1, 0, 0} || tp.idx[1] != d {
			t.Errorf("identity tap %d: %+v", d, tp)
		}
	}
	// shrink 4 -> 2: x = 2(d + 0.5) - 0.5 = 0.5, 2.5; t = 0.5: weights -0.09375, 0.59375, 0.59375, -0.09375
	sh := cubicTaps(4, 2)
	if sh[0].w != [4]float32{-0.09375, 0.59375, 0.59375, -0.09375} || sh[0].idx != [4]int{0, 0, 1, 2} || sh[1].idx != [4]int{1, 2, 3, 3} {
		t.Errorf("shrink: %+v", sh)
	}
	// stretch 2 -> 4: x = 0.5(d + 0.5) - 0.5 = -0.25, 0.25, 0.75, 1.25 (floor -1 at the edge)
	st := cubicTaps(2, 4)
	if st[0].idx != [4]int{0, 0, 0, 1} || st[3].idx != [4]int{0, 1, 1, 1} {
		t.Errorf("stretch: %+v", st)
	}
	var sum float32
	for _, w := range st[1].w {
		sum += w
	}
	if sum != 1 {
		t.Errorf("stretch weights %v sum to %v", st[1].w, sum)
	}
}
