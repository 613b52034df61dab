// Command qwen3_vl is the Qwen3-VL family plugin: Qwen2VLImageProcessor geometry with factor 32
// (patch 16, merge 2), mean = std = 0.5, and no default system turn.
// Build it as a WASI reactor: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"github.com/iris-vlm/iris/plugins/internal/qwenvl"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// family holds the hub constants of Qwen/Qwen3-VL-*-Instruct: preprocessor_config.json
// (size {shortest_edge 65536, longest_edge 16777216}, patch_size 16, merge_size 2,
// temporal_patch_size 2, mean = std = [0.5, 0.5, 0.5]) and a chat template without a default
// system turn.
var family = &qwenvl.Family{
	Name:              "qwen3_vl",
	PatchSize:         16,
	MergeSize:         2,
	TemporalPatchSize: 2,
	Mean:              [3]float64{0.5, 0.5, 0.5},
	Std:               [3]float64{0.5, 0.5, 0.5},
	DefaultMinPixels:  65536,
	DefaultMaxPixels:  16777216,
}

func init() { vlm.Register(family) }

func main() {}
