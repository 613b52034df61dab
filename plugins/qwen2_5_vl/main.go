// Command qwen2_5_vl is the Qwen2.5-VL family plugin: Qwen2VLImageProcessor geometry with
// factor 28 (patch 14, merge 2), CLIP mean/std, and the chat template's default system turn.
// Build it as a WASI reactor: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"github.com/iris-vlm/iris/plugins/internal/qwenvl"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// family holds the hub constants of Qwen/Qwen2.5-VL-*-Instruct: preprocessor_config.json
// (min_pixels 3136, max_pixels 12845056, patch_size 14, merge_size 2, temporal_patch_size 2,
// OPENAI_CLIP mean/std) and chat_template.json (default system turn).
var family = &qwenvl.Family{
	Name:                "qwen2_5_vl",
	PatchSize:           14,
	MergeSize:           2,
	TemporalPatchSize:   2,
	Mean:                [3]float64{0.48145466, 0.4578275, 0.40821073},
	Std:                 [3]float64{0.26862954, 0.26130258, 0.27577711},
	DefaultMinPixels:    3136,
	DefaultMaxPixels:    12845056,
	DefaultSystemPrompt: "You are a helpful assistant.",
}

func init() { vlm.Register(family) }

func main() {}
