// Command internvl is the InternVL3 (-hf) family plugin: transformers' GotOcr2ImageProcessor
// tiling (crop_to_patches, forced by InternVLProcessor) as an ABI 2 plan of several views, and
// the -hf chat template's framing (<img> + <IMG_CONTEXT> × 256 per view + </img>).
// Build it as a WASI reactor: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"strings"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// Param names the plugin reads from the bundle's [plugin.params].
const (
	// ParamMaxPatches is the processor's max_patches: the most grid tiles (the thumbnail not
	// counted). 1 reproduces a single 448×448 resize (upstream TRT's geometry).
	ParamMaxPatches = "max_patches"
	// ParamMinPatches is the processor's min_patches: the fewest grid tiles.
	ParamMinPatches = "min_patches"
	// ParamSystemPrompt is a default system turn; "" (the -hf template's default) leaves it out.
	ParamSystemPrompt = "system_prompt"
)

// Constants of OpenGVLab/InternVL3-*-hf: preprocessor_config.json (size 448×448, ImageNet
// mean/std, bicubic, max_patches 12, min_patches 1) and config.json (vision patch_size 14,
// downsample_ratio 0.5, so 256 tokens a tile).
const (
	TileSize          = 448
	PatchSize         = 14
	MergeSize         = 2 // 1 / downsample_ratio: pixel shuffle 0.5 folds 2×2 patches into a token
	DefaultMaxPatches = 12
	DefaultMinPatches = 1
	// MaxPatchesLimit bounds max_patches: the tiles and the thumbnail fit the host's bound on
	// views (published InternVL configurations use up to 12 tiles, some evaluations 40).
	MaxPatchesLimit = abi.MaxViews - 1
)

// TokensPerTile is image_seq_length: (448/14)² patches, merged 2×2.
const TokensPerTile = (TileSize / PatchSize) * (TileSize / PatchSize) / (MergeSize * MergeSize)

// ImageNet mean and std (IMAGENET_DEFAULT_MEAN/STD), as the -hf preprocessor_config.json has them.
var (
	mean = [3]float64{0.485, 0.456, 0.406}
	std  = [3]float64{0.229, 0.224, 0.225}
)

// Special tokens of the InternVL3-hf vocabulary.
const (
	tokIMStart    = "<|im_start|>"
	tokIMEnd      = "<|im_end|>"
	tokImgStart   = "<img>"
	tokImgEnd     = "</img>"
	tokImgContext = "<IMG_CONTEXT>"
)

// tokIDIMEnd is <|im_end|>: the -hf conversion forces eos_token_id 151645 for InternVL3, and
// generation stops on it alone.
const tokIDIMEnd = 151645

type family struct{}

func init() { vlm.Register(family{}) }

func main() {}

// Describe implements vlm.Plugin.
func (family) Describe() vlm.Description {
	return vlm.Description{
		ABI:    2,
		Family: "internvl",
		Tasks:  []string{vlm.TaskVisionLanguage},
		Params: []vlm.ParamSpec{
			{Name: ParamMaxPatches, Type: abi.ParamInt, Default: DefaultMaxPatches,
				Doc: "most grid tiles of 448x448 (thumbnail not counted); 1 = one 448x448 resize"},
			{Name: ParamMinPatches, Type: abi.ParamInt, Default: DefaultMinPatches,
				Doc: "fewest grid tiles of 448x448"},
			{Name: ParamSystemPrompt, Type: abi.ParamString, Default: "",
				Doc: "system turn inserted before the user turn; empty for none (the -hf template has none)"},
		},
		Limits: vlm.Limits{
			MinImageTokens: TokensPerTile,
			MaxImageTokens: TokensPerTile * Tiling{Cols: DefaultMaxPatches, Rows: 1}.Views(),
		},
	}
}

// Plan implements vlm.Plugin: GotOcr2ImageProcessor with crop_to_patches (torchvision backend).
// The tiles are regions of one resize to (448·cols, 448·rows), so the host resizes once for all
// of them; the thumbnail is a second resize of the whole image. Like the reference it refuses
// nothing but an empty image: a 1×1 or a 1×5000 image is tiled like any other.
func (family) Plan(img vlm.ImageHeader, params vlm.Params) (vlm.Plan, error) {
	minP, maxP := params.Int(ParamMinPatches), params.Int(ParamMaxPatches)
	if minP < 1 || maxP < minP || maxP > MaxPatchesLimit {
		return vlm.Plan{}, vlm.Fail(abi.CodeInvalidParams,
			"want 1 <= min_patches <= max_patches <= %d, got %d and %d", MaxPatchesLimit, minP, maxP)
	}
	if img.Width < 1 || img.Height < 1 {
		return vlm.Plan{}, vlm.Refuse(abi.CodeImageTooSmall, "image is %dx%d", img.Width, img.Height)
	}
	src := vlm.Size{Width: img.Width, Height: img.Height}
	t := OptimalTiling(img.Width, img.Height, TileSize, minP, maxP)
	views := make([]vlm.View, 0, t.Views())
	canvas := resize(src, TileSize*t.Cols, TileSize*t.Rows)
	for i := range t.Tiles() {
		col, row := i%t.Cols, i/t.Cols
		v := tileView(canvas)
		if t.Tiles() > 1 {
			v.Region = &vlm.Rect{X: col * TileSize, Y: row * TileSize, Width: TileSize, Height: TileSize}
		}
		views = append(views, v)
	}
	if t.Tiles() > 1 {
		views = append(views, tileView(resize(src, TileSize, TileSize)))
	}
	return vlm.Plan{
		Source:      src,
		Views:       views,
		ImageTokens: TokensPerTile * len(views),
	}, nil
}

// resize is torchvision's bicubic antialiased resize of the source to w×h, or nil when the
// source already has that size: torchvision returns the image untouched then.
func resize(src vlm.Size, w, h int) *vlm.Resize {
	if src.Width == w && src.Height == h {
		return nil
	}
	return &vlm.Resize{Width: w, Height: h, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision, Antialias: true}
}

// tileView is one 448×448 picture taken from the resize r: ImageNet normalisation, raster
// patches of 14 (32×32), 2×2 of them to a token (16×16 = 256 tokens).
func tileView(r *vlm.Resize) vlm.View {
	side := TileSize / PatchSize
	return vlm.View{
		Resize:      r,
		Normalize:   vlm.Normalize{Rescale: 1.0 / 255, Mean: mean, Std: std, Flavor: abi.FlavorTorchvision},
		Patches:     vlm.Patches{Size: PatchSize, Temporal: 1, Merge: MergeSize, Layout: abi.LayoutTiles},
		Grid:        vlm.Grid{T: 1, H: side, W: side},
		LLMGrid:     vlm.Grid{T: 1, H: side / MergeSize, W: side / MergeSize},
		ImageTokens: TokensPerTile,
	}
}

// Frame implements vlm.Plugin: the -hf chat template. It has no default system turn; a client's
// system message (even an empty one) or else the bundle's system_prompt is rendered as
// <|im_start|>system\n...<|im_end|>\n. The user turn holds the image, rendered "<IMG_CONTEXT>\n"
// and expanded by InternVLProcessor to <img> + <IMG_CONTEXT> × tokens + </img>, and the question
// in the order the client sent them.
func (family) Frame(req vlm.FrameRequest, params vlm.Params) (vlm.Frame, error) {
	system := params.String(ParamSystemPrompt)
	hasSystem := system != ""
	if req.System != nil {
		system, hasSystem = *req.System, true
	}
	var before strings.Builder
	if hasSystem {
		before.WriteString(tokIMStart + "system\n" + system + tokIMEnd + "\n")
	}
	before.WriteString(tokIMStart + "user\n")
	after := "\n"
	if req.TextFirst {
		before.WriteString(req.Question)
	} else {
		after += req.Question
	}
	after += tokIMEnd + "\n" + tokIMStart + "assistant\n"
	return vlm.Frame{
		Before: before.String(),
		Span: vlm.ImageSpan{
			Open:  []string{tokImgStart},
			Pad:   tokImgContext,
			Count: req.Plan.ImageTokens,
			Close: []string{tokImgEnd},
		},
		After:        after,
		StopTokenIDs: []int32{tokIDIMEnd},
		Hints:        vlm.DecodeHints{SkipSpecialTokens: true},
	}, nil
}
