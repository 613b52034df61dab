package model_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/model"
)

func init() {
	model.RegisterConfig("rope_test", model.ConfigDefaults{TextEps: 1e-5, TextTheta: 1e4, VisionNormEps: 1e-6, MRopeSection: [3]int{4, 2, 2}})
}

// ropeConfig is a config.json of the test family with the text section's rope keys given.
func ropeConfig(rope string) []byte {
	return []byte(`{"model_type": "rope_test", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
		"intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 131072, "image_token_id": 7, ` + rope + `
		"vision_config": {"depth": 1, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "out_hidden_size": 64}}`)
}

// TestParseLongRope reads a partial rotary embedding and LongRoPE's parameters as
// _compute_longrope_parameters does: the short and long factors, the attention factor given or
// derived from max_position_embeddings / original_max_position_embeddings; the default context
// and the sequences that run the long factors follow; what does not fit is refused.
func TestParseLongRope(t *testing.T) {
	short := `[1.0, 1.5, 2.0, 2.5, 3.0, 3.5]`
	long := `[1.0, 2.0, 4.0, 8.0, 16.0, 32.0]`
	for _, tc := range []struct {
		name  string
		rope  string
		dims  int
		scale float64
		// orig is original_max_position_embeddings; context DefaultLimits' (max_position_embeddings
		// with long factors, orig without)
		orig, context int
		long          bool
		err           string
	}{
		{"plain", ``, 0, 0, 0, 131072, false, ""},
		{"partial", `"partial_rotary_factor": 0.75, "rope_scaling": {"mrope_section": [3, 2, 1]},`, 12, 0, 0, 131072, false, ""},
		{"longrope derived", `"partial_rotary_factor": 0.75, "rope_scaling": {"rope_type": "longrope", "short_factor": ` + short +
			`, "long_factor": ` + long + `, "original_max_position_embeddings": 4096, "mrope_section": [3, 2, 1]},`,
			12, math.Sqrt(1 + math.Log(32)/math.Log(4096)), 4096, 131072, true, ""},
		{"longrope given, short factors only", `"partial_rotary_factor": 0.75, "rope_parameters": {"rope_type": "longrope", "short_factor": ` + short +
			`, "original_max_position_embeddings": 4096, "attention_factor": 1.25, "mrope_section": [3, 2, 1]},`, 12, 1.25, 4096, 4096, false, ""},
		// standardize_rope_params: a top-level original_max_position_embeddings wins over the
		// rope dict's (factor 131072 / 2048 = 64)
		{"longrope top-level original max", `"partial_rotary_factor": 0.75, "original_max_position_embeddings": 2048, "rope_scaling": {"rope_type": "longrope", "short_factor": ` + short +
			`, "long_factor": ` + long + `, "original_max_position_embeddings": 4096, "mrope_section": [3, 2, 1]},`,
			12, math.Sqrt(1 + math.Log(64)/math.Log(2048)), 2048, 131072, true, ""},
		{"factors of another width", `"rope_scaling": {"rope_type": "longrope", "short_factor": ` + short +
			`, "original_max_position_embeddings": 4096},`, 0, 0, 0, 0, false, "6 rope factors for 8 rotary frequencies"},
		{"long factors of another width", `"partial_rotary_factor": 0.75, "rope_scaling": {"rope_type": "longrope", "short_factor": ` + short +
			`, "long_factor": [1.0, 2.0], "original_max_position_embeddings": 4096, "mrope_section": [3, 2, 1]},`, 0, 0, 0, 0, false, "2 long rope factors for 6 rotary frequencies"},
		{"odd rotated dims", `"partial_rotary_factor": 0.5625,`, 0, 0, 0, 0, false, "rotated dimensions of a head of 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := model.ParseConfig(ropeConfig(tc.rope))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tx := &cfg.Text
			if tx.RotaryDims != tc.dims || math.Abs(tx.RopeScale-tc.scale) > 1e-15 {
				t.Errorf("rotary dims %d, scale %v; want %d, %v", tx.RotaryDims, tx.RopeScale, tc.dims, tc.scale)
			}
			if tc.scale != 0 && (!slices.Equal(tx.RopeFactors, []float64{1, 1.5, 2, 2.5, 3, 3.5}) || tx.RopeOriginalMax != tc.orig) {
				t.Errorf("factors %v, original max %d", tx.RopeFactors, tx.RopeOriginalMax)
			}
			if tc.long != slices.Equal(tx.RopeLongFactors, []float64{1, 2, 4, 8, 16, 32}) {
				t.Errorf("long factors %v", tx.RopeLongFactors)
			}
			if got := model.DefaultLimits(cfg).ContextLength; got != tc.context {
				t.Errorf("context %d, want %d", got, tc.context)
			}
			// a sequence runs the long factors when it can pass original_max_position_embeddings
			for _, capacity := range []int{1, tc.orig, tc.orig + 1} {
				if got, want := tx.LongRoPE(capacity), tc.long && capacity > tc.orig; got != want {
					t.Errorf("LongRoPE(%d) = %v, want %v", capacity, got, want)
				}
			}
		})
	}
}
