package models_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/model"
	_ "github.com/iris-vlm/iris/core/internal/models/internvl" // registers its config defaults
	_ "github.com/iris-vlm/iris/core/internal/models/phi4mm"
	_ "github.com/iris-vlm/iris/core/internal/models/qwen25vl"
	_ "github.com/iris-vlm/iris/core/internal/models/qwen3vl"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name string
		path string
		want model.Config
	}{
		{
			// transformers 5 layout: text_config, rope_parameters, top-level tie_word_embeddings
			name: "fixture untied",
			path: filepath.Join(fixture.ModelDir("tiny-untied"), "config.json"),
			want: model.Config{
				ModelType: "qwen2_5_vl",
				Text: model.TextConfig{
					Hidden: 32, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16, Intermediate: 64, Vocab: 151936,
					MaxPositions: 4096, RMSNormEps: 1e-6, RopeTheta: 1e6, MRopeSection: [3]int{2, 3, 3}, Act: "silu", QKVBias: true,
				},
				Vision: model.VisionConfig{
					Depth: 2, Hidden: 64, Heads: 4, Intermediate: 128, InChannels: 3, PatchSize: 14, TemporalPatchSize: 2,
					MergeSize: 2, WindowSize: 112, FullAttBlocks: []int{1}, OutHidden: 32, RopeTheta: 1e4, NormEps: 1e-6,
					Act: "silu", TokensPerSecond: 2,
				},
				ImageTokenID: 151655, VideoTokenID: 151656, VisionStartTokenID: 151652, VisionEndTokenID: 151653,
				EOSTokenIDs: []int32{151645},
			},
		},
		{
			// the hub's flat layout: text keys at the top, rope_scaling, in_chans
			name: "hub 3B",
			path: filepath.Join(fixture.Root(), "configs", "qwen2_5_vl_3b_hub.json"),
			want: model.Config{
				ModelType: "qwen2_5_vl",
				Text: model.TextConfig{
					Hidden: 2048, Layers: 36, Heads: 16, KVHeads: 2, HeadDim: 128, Intermediate: 11008, Vocab: 151936,
					MaxPositions: 128000, RMSNormEps: 1e-6, RopeTheta: 1e6, MRopeSection: [3]int{16, 24, 24}, Act: "silu", QKVBias: true,
				},
				Vision: model.VisionConfig{
					Depth: 32, Hidden: 1280, Heads: 16, Intermediate: 3420, InChannels: 3, PatchSize: 14, TemporalPatchSize: 2,
					MergeSize: 2, WindowSize: 112, FullAttBlocks: []int{7, 15, 23, 31}, OutHidden: 2048, RopeTheta: 1e4,
					NormEps: 1e-6, Act: "silu", TokensPerSecond: 2,
				},
				TieEmbeddings: true,
				ImageTokenID:  151655, VideoTokenID: 151656, VisionStartTokenID: 151652, VisionEndTokenID: 151653,
				EOSTokenIDs: []int32{151645},
			},
		},
		{
			// Qwen3-VL 2B (shared/reference/configs): head_dim read, interleaved sections, q/k
			// norms, no attention bias, a LayerNorm tower with GELU-tanh, the position table and
			// three deepstack mergers
			name: "hub Qwen3-VL 2B",
			path: filepath.Join(fixture.Root(), "configs", "qwen3_vl_2b_hub.json"),
			want: model.Config{
				ModelType: "qwen3_vl",
				Text: model.TextConfig{
					Hidden: 2048, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, Intermediate: 6144, Vocab: 151936,
					MaxPositions: 262144, RMSNormEps: 1e-6, RopeTheta: 5e6, MRopeSection: [3]int{24, 20, 20}, MRopeInterleaved: true,
					QKNorm: true, Act: "silu",
				},
				Vision: model.VisionConfig{
					Depth: 24, Hidden: 1024, Heads: 16, Intermediate: 4096, InChannels: 3, PatchSize: 16, TemporalPatchSize: 2,
					MergeSize: 2, OutHidden: 2048, RopeTheta: 1e4, NormEps: 1e-6, PosEmbeddings: 2304, Deepstack: []int{5, 11, 17},
					Act: "gelu_pytorch_tanh", TokensPerSecond: 4,
				},
				TieEmbeddings: true,
				ImageTokenID:  151655, VideoTokenID: 151656, VisionStartTokenID: 151652, VisionEndTokenID: 151653,
				EOSTokenIDs: []int32{151645},
			},
		},
		{
			// InternVL3 2B -hf (scripts/reference/gpu_internvl3_2b.config.json): InternViT's own
			// keys (num_hidden_layers, image_size and patch_size as lists, layer_norm_eps), a
			// Qwen2 decoder with 1-D RoPE (dynamic NTK: the default frequencies up to 32768),
			// the top-level tie and the <img>/<IMG_CONTEXT> ids
			name: "hub InternVL3 2B",
			path: filepath.Join(fixture.Root(), "configs", "internvl3_2b_hf.json"),
			want: model.Config{
				ModelType: "internvl",
				Text: model.TextConfig{
					Hidden: 1536, Layers: 28, Heads: 12, KVHeads: 2, HeadDim: 128, Intermediate: 8960, Vocab: 151674,
					MaxPositions: 32768, RMSNormEps: 1e-6, RopeTheta: 1e6, MRopeSection: [3]int{64, 0, 0}, Rope1D: true,
					Act: "silu", QKVBias: true,
				},
				Vision: model.VisionConfig{
					Depth: 24, Hidden: 1024, Heads: 16, Intermediate: 4096, InChannels: 3, PatchSize: 14, TemporalPatchSize: 1,
					MergeSize: 2, OutHidden: 1536, NormEps: 1e-6, PosEmbeddings: 1024, FixedGrid: 32, Act: "gelu",
				},
				ImageTokenID: 151667, VideoTokenID: 151656, VisionStartTokenID: 151665, VisionEndTokenID: 151666,
				EOSTokenIDs: []int32{151645},
			},
		},
		{
			// Phi-4-multimodal, transformers layout (scripts/reference/phi4_configs.py): the
			// top level is the Phi-3 decoder (head_dim = hidden / heads, partial rotary 0.75,
			// LongRoPE's short factors and the attention factor sqrt(1 + ln 32 / ln 4096)), the
			// SigLIP tower's class defaults read at feature layer -2 (26 of 27 blocks), 2x2
			// pooling of 32x32-patch views, <|image|> from vision_config
			name: "hf Phi-4-multimodal",
			path: filepath.Join(fixture.Root(), "configs", "phi4_multimodal_hf.json"),
			want: phi4Want(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := model.ParseConfig(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("ParseConfig:\n got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestParseConfigTied(t *testing.T) {
	cfg, err := model.LoadConfig(fixture.ModelDir("tiny-tied"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.TieEmbeddings || cfg.Text.Hidden != 16 || cfg.Text.MRopeSection != [3]int{1, 1, 2} {
		t.Errorf("tied fixture parsed as %+v", cfg)
	}
}

func TestParseConfigErrors(t *testing.T) {
	base, err := os.ReadFile(filepath.Join(fixture.Root(), "configs", "qwen2_5_vl_3b_hub.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		edit    func(string) string
		wantErr string
		is      error
	}{
		{"unknown family", func(s string) string {
			return strings.Replace(s, `"model_type": "qwen2_5_vl"`, `"model_type": "llava"`, 1)
		}, `model_type "llava"`, model.ErrUnsupported},
		{"missing hidden size", func(s string) string {
			return strings.Replace(s, `"hidden_size": 2048,`, ``, 1)
		}, `"hidden_size": missing`, nil},
		{"bad mrope sections", func(s string) string {
			return strings.Replace(s, `16,
      24,
      24`, `16, 24, 16`, 1)
		}, "mrope_section", nil},
		{"gelu text MLP", func(s string) string {
			return strings.Replace(s, `"hidden_act": "silu",
  "hidden_size": 2048`, `"hidden_act": "gelu",
  "hidden_size": 2048`, 1)
		}, `text hidden_act "gelu"`, model.ErrUnsupported},
		{"vision width mismatch", func(s string) string {
			return strings.Replace(s, `"out_hidden_size": 2048`, `"out_hidden_size": 1024`, 1)
		}, "out_hidden_size 1024 != text hidden_size 2048", nil},
		{"full block outside depth", func(s string) string {
			return strings.Replace(s, `      31
    ]`, `      32
    ]`, 1)
		}, "block 32 outside depth 32", nil},
		{"wrong type", func(s string) string {
			return strings.Replace(s, `"num_hidden_layers": 36`, `"num_hidden_layers": "36"`, 1)
		}, `"num_hidden_layers"`, nil},
		{"not json", func(string) string { return "{" }, "parsing config", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.edit(string(base))
			if src == string(base) {
				t.Fatal("edit did not change the config")
			}
			_, err := model.ParseConfig([]byte(src))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.is)
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{
		filepath.Join(fixture.Root(), "configs", "qwen2_5_vl_3b_hub.json"),
		filepath.Join(fixture.ModelDir("tiny-untied"), "config.json"),
	} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := model.ParseConfig(data)
		if err == nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("parsed config fails Validate: %v", verr)
			}
		}
	})
}

// phi4Want is the engine config of the full-size Phi-4-multimodal.
func phi4Want() model.Config {
	ones := make([]float64, 48)
	for i := range ones {
		ones[i] = 1
	}
	// the hub config's long_factor (scripts/reference/phi4_configs.py)
	long := []float64{1, 1.118320672, 1.250641126, 1.398617824, 1.564103225, 1.74916897, 1.956131817, 2.187582649, 2.446418898,
		2.735880826, 3.059592084, 3.421605075, 3.826451687, 4.279200023, 4.785517845, 5.351743533, 5.984965424,
		6.693110555, 7.485043894, 8.370679318, 9.36110372, 10.4687158, 11.70738129, 13.09260651, 14.64173252,
		16.37415215, 18.31155283, 20.47818807, 22.90118105, 25.61086418, 28.64115884, 32.03, 32.1, 32.13, 32.23,
		32.6, 32.61, 32.64, 32.66, 32.7, 32.71, 32.93, 32.97, 33.28, 33.49, 33.5, 44.16, 47.77}
	return model.Config{
		ModelType: "phi4_multimodal",
		Text: model.TextConfig{
			Hidden: 3072, Layers: 32, Heads: 24, KVHeads: 8, HeadDim: 128, Intermediate: 8192, Vocab: 200064,
			MaxPositions: 131072, RMSNormEps: 1e-5, RopeTheta: 1e4, MRopeSection: [3]int{48, 0, 0}, Rope1D: true, Act: "silu",
			RotaryDims: 96, RopeFactors: ones, RopeLongFactors: long, RopeScale: math.Sqrt(1 + math.Log(32)/math.Log(4096)), RopeOriginalMax: 4096,
		},
		Vision: model.VisionConfig{
			Depth: 27, Hidden: 1152, Heads: 16, Intermediate: 4304, InChannels: 3, PatchSize: 14, TemporalPatchSize: 1,
			MergeSize: 2, OutHidden: 3072, NormEps: 1e-6, PosEmbeddings: 1024, FixedGrid: 32, FeatureBlocks: 26,
			Act: "gelu_pytorch_tanh",
		},
		TieEmbeddings: true,
		ImageTokenID:  200010, VideoTokenID: -1, VisionStartTokenID: -1, VisionEndTokenID: -1,
		EOSTokenIDs: []int32{199999},
	}
}

// TestPhi4HubConfig: the hub's remote-code config (phi4mm) converted by the bundle builder parses
// to the engine config of the transformers-layout one (scripts/reference/phi4_configs.py writes
// both; the latter with transformers' own config classes).
func TestPhi4HubConfig(t *testing.T) {
	read := func(name string) map[string]any {
		raw, err := os.ReadFile(filepath.Join(fixture.Root(), "configs", name))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	hub, scale, err := bundles.ConvertPhi4MMConfig(read("phi4mm_hub.json"))
	if err != nil {
		t.Fatal(err)
	}
	if scale != 2 { // vision_lora: lora_alpha 512 / r 256
		t.Errorf("vision LoRA scale %v, want 2", scale)
	}
	parse := func(doc map[string]any) *model.Config {
		raw, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := model.ParseConfig(raw)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if got, want := parse(hub), parse(read("phi4_multimodal_hf.json")); !reflect.DeepEqual(got, want) {
		t.Errorf("converted hub config\n%+v\ntransformers layout\n%+v", got, want)
	}
}
