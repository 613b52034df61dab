// Command deepseek_ocr2 is the DeepSeek-OCR-2 family plugin: transformers'
// DeepseekOcr2ImageProcessor (local 768×768 tiles of the image resized onto a GotOcr2 canvas when
// its long side passes 768, and a global 1024×1024 view, the image scaled to a long side of 1024
// and padded grey in the centre) as an ABI 2 plan of views and one separator token, and
// DeepSeek-OCR-2's plain framing (BOS <image>×N \n{instruction}, no chat roles).
// Build it as a WASI reactor: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"math"

	"github.com/iris-vlm/iris/plugins/internal/gotocr2"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// Param names the plugin reads from the bundle's [plugin.params].
const (
	// ParamMinTiles and ParamMaxTiles are the processor's min_patches and max_patches: the range
	// of local tile counts the canvas search picks from.
	ParamMinTiles = "min_tiles"
	ParamMaxTiles = "max_tiles"
)

// DeepseekOcr2ImageProcessor's geometry (transformers 5.17: size 1024, tile_size 768, background
// (127, 127, 127), mean = std = 0.5, bicubic; DeepseekOcr2ProcessorKwargs forces crop_to_patches
// with min_patches 2, max_patches 6) and the model's: SAM's 16-pixel patches, downsampled 4× by
// its two stride-2 convolutions, so a 1024 view is 16×16 = 256 tokens (the encoder's 256 learned
// queries) and a 768 tile 12×12 = 144.
const (
	GlobalSize      = 1024
	TileSize        = 768
	PatchSize       = 16
	Downsample      = 4
	DefaultMinTiles = 2
	DefaultMaxTiles = 6
	// MaxTiles bounds max_tiles: upstream's configuration (DeepSeek-OCR2-vllm/config.py,
	// MAX_CROPS) says 6 at most, what the model was trained with.
	MaxTiles = 6
	// GlobalSide and TileSide are the views' sides in patches; GlobalTokens and TileTokens
	// their tokens.
	GlobalSide   = GlobalSize / PatchSize
	TileSide     = TileSize / PatchSize
	GlobalTokens = (GlobalSide / Downsample) * (GlobalSide / Downsample)
	TileTokens   = (TileSide / Downsample) * (TileSide / Downsample)
	// SeparatorTokens is the model's learned view_separator after the global view's features.
	SeparatorTokens = 1
)

// Tokens of DeepSeek-OCR-2's vocabulary (DeepSeek-V3's and <image>,
// scripts/reference/deepseek_ocr2_tokenizer.py).
const (
	tokBOS   = "<｜begin▁of▁sentence｜>"
	tokImage = "<image>"
	// tokIDEOS is <｜end▁of▁sentence｜>, the checkpoint's eos_token_id.
	tokIDEOS = 1
)

var (
	half = [3]float64{0.5, 0.5, 0.5}
	grey = vlm.RGB{127, 127, 127}
)

type family struct{}

func init() { vlm.Register(family{}) }

func main() {}

// Describe implements vlm.Plugin.
func (family) Describe() vlm.Description {
	return vlm.Description{
		ABI:    2,
		Family: "deepseek_ocr2",
		Tasks:  []string{vlm.TaskVisionLanguage},
		Params: []vlm.ParamSpec{
			{Name: ParamMinTiles, Type: abi.ParamInt, Default: DefaultMinTiles,
				Doc: "fewest local 768x768 tiles of an image whose long side passes 768 (the processor's min_patches)"},
			{Name: ParamMaxTiles, Type: abi.ParamInt, Default: DefaultMaxTiles,
				Doc: "most local 768x768 tiles (the processor's max_patches); at most 6, as upstream trained"},
		},
		Limits: vlm.Limits{
			MinImageTokens: GlobalTokens + SeparatorTokens,
			MaxImageTokens: GlobalTokens + DefaultMaxTiles*TileTokens + SeparatorTokens,
		},
	}
}

// Layout is the processor's geometry for one image.
type Layout struct {
	// Tiles is the local canvas, zero when the long side is at most TileSize (no local view).
	Tiles gotocr2.Grid
	// GlobalW, GlobalH are the size the image is scaled to for the global view (long side
	// GlobalSize); Left, Top, Right, Bottom the grey padding that centres it in GlobalSize².
	GlobalW, GlobalH         int
	Left, Top, Right, Bottom int
}

// TileCount returns the number of local tiles.
func (l Layout) TileCount() int { return l.Tiles.Tiles() }

// Tokens returns the image's placeholder tokens: 144 a tile, 256 for the global view, one
// separator (DeepseekOcr2Processor._expand_image_tokens).
func (l Layout) Tokens() int { return TileTokens*l.TileCount() + GlobalTokens + SeparatorTokens }

// Geometry computes DeepseekOcr2ImageProcessor._preprocess's sizes for a w×h image, operation
// for operation: local tiles only when max(w, h) > TileSize (get_optimal_tiled_canvas over
// minTiles..maxTiles tiles, the image stretched onto cols·768 × rows·768); the global view scaled
// by 1024/max(w, h) with Python's round (half to even) on each side, then pad_to_square: left =
// (1024 − w')//2, top = (1024 − h')//2, the rest right and below. ok is false when a global side
// rounds to 0 pixels (the reference then fails inside its resize). w and h must be positive.
func Geometry(w, h, minTiles, maxTiles int) (l Layout, ok bool) {
	if max(w, h) > TileSize {
		l.Tiles = gotocr2.OptimalCanvas(w, h, TileSize, minTiles, maxTiles)
	}
	scale := float64(GlobalSize) / float64(max(w, h))
	l.GlobalW = int(math.RoundToEven(float64(w) * scale))
	l.GlobalH = int(math.RoundToEven(float64(h) * scale))
	if l.GlobalW < 1 || l.GlobalH < 1 {
		return l, false
	}
	side := max(l.GlobalW, l.GlobalH)
	l.Left, l.Top = (side-l.GlobalW)/2, (side-l.GlobalH)/2
	l.Right, l.Bottom = side-l.GlobalW-l.Left, side-l.GlobalH-l.Top
	return l, true
}

// Plan implements vlm.Plugin: DeepseekOcr2ImageProcessor (torchvision backend) as views in the
// order the model lays out their features: the local tiles row-major, then the global view; the
// model's view_separator follows them (one separator token). Every view is normalised with
// 0.5/0.5 (fused, as the torchvision backend does it) and patchified in 16-pixel raster patches,
// 4×4 of them to a token.
//
// The host takes one patch grid per image, so each view is a 1024×1024 canvas of 64×64 patches:
// a tile is its 768×768 region of the canvas resized once (bicubic, antialiased, uint8) and
// padded right and below to 1024, with a 48×48 patch mask saying which patches are the tile (the
// family runs SAM on that corner alone; the padding's colour never reaches the model). The global
// view is the image resized to its scaled size and padded grey (127) to the square.
//
// Refused: an empty image (image_too_small) and an image whose short side scales to 0 pixels in
// the global view (aspect_ratio_too_extreme: at 1024/long side, a short side of at most half a
// pixel; the reference fails asking the resize for a side of 0).
func (family) Plan(img vlm.ImageHeader, params vlm.Params) (vlm.Plan, error) {
	minTiles, maxTiles := params.Int(ParamMinTiles), params.Int(ParamMaxTiles)
	if minTiles < 1 || maxTiles > MaxTiles || minTiles > maxTiles {
		return vlm.Plan{}, vlm.Fail(abi.CodeInvalidParams, "want 1 <= min_tiles <= max_tiles <= %d, got %d and %d",
			MaxTiles, minTiles, maxTiles)
	}
	if img.Width < 1 || img.Height < 1 {
		return vlm.Plan{}, vlm.Refuse(abi.CodeImageTooSmall, "image is %dx%d", img.Width, img.Height)
	}
	l, ok := Geometry(img.Width, img.Height, minTiles, maxTiles)
	if !ok {
		return vlm.Plan{}, vlm.Refuse(abi.CodeAspectRatioTooExtreme,
			"a %dx%d image scaled to a long side of %d has a side of 0 pixels (%dx%d)",
			img.Width, img.Height, GlobalSize, l.GlobalW, l.GlobalH)
	}
	src := vlm.Size{Width: img.Width, Height: img.Height}
	views := make([]vlm.View, 0, l.TileCount()+1)
	if n := l.TileCount(); n > 0 {
		cw, ch := TileSize*l.Tiles.Cols, TileSize*l.Tiles.Rows
		var resize *vlm.Resize // torchvision returns an image already of the asked size untouched
		if cw != src.Width || ch != src.Height {
			resize = bicubic(cw, ch)
		}
		for i := range n {
			v := view()
			v.Resize = resize
			v.Region = &vlm.Rect{X: i % l.Tiles.Cols * TileSize, Y: i / l.Tiles.Cols * TileSize, Width: TileSize, Height: TileSize}
			v.Pad = &vlm.Pad{Right: GlobalSize - TileSize, Bottom: GlobalSize - TileSize, Color: grey}
			v.Mask = &vlm.Rect{Width: TileSide, Height: TileSide}
			v.ImageTokens = v.KeptTokens()
			views = append(views, v)
		}
	}
	global := view()
	if l.GlobalW != src.Width || l.GlobalH != src.Height {
		global.Resize = bicubic(l.GlobalW, l.GlobalH)
	}
	if l.Left+l.Top+l.Right+l.Bottom > 0 {
		global.Pad = &vlm.Pad{Top: l.Top, Right: l.Right, Bottom: l.Bottom, Left: l.Left, Color: grey}
	}
	views = append(views, global)

	plan := vlm.Plan{Source: src, Views: views, SeparatorTokens: SeparatorTokens}
	for i := range views {
		plan.ImageTokens += views[i].ImageTokens
	}
	plan.ImageTokens += SeparatorTokens
	if plan.ImageTokens != l.Tokens() {
		return vlm.Plan{}, vlm.Fail(abi.CodePluginError, "the views give %d image tokens, the processor %d", plan.ImageTokens, l.Tokens())
	}
	return plan, nil
}

func bicubic(w, h int) *vlm.Resize {
	return &vlm.Resize{Width: w, Height: h, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision, Antialias: true}
}

// view is one 1024×1024 canvas: the 0.5/0.5 normalisation, raster patches of 16 (64×64), 4×4 of
// them to a token (16×16 = 256 tokens before any mask).
func view() vlm.View {
	return vlm.View{
		Normalize:   vlm.Normalize{Rescale: 1.0 / 255, Mean: half, Std: half, Flavor: abi.FlavorTorchvision},
		Patches:     vlm.Patches{Size: PatchSize, Temporal: 1, Merge: Downsample, Layout: abi.LayoutTiles},
		Grid:        vlm.Grid{T: 1, H: GlobalSide, W: GlobalSide},
		LLMGrid:     vlm.Grid{T: 1, H: GlobalSide / Downsample, W: GlobalSide / Downsample},
		ImageTokens: GlobalTokens,
	}
}

// Frame implements vlm.Plugin: the plain format of DeepSeek-OCR-2's inference paths
// (DeepseekOcr2Processor over "<image>\n{instruction}", upstream's run scripts): BOS, the image
// placeholder expanded to the image's tokens, a newline, the question; no chat roles, no
// generation prompt. An OCR instruction ("Free OCR.", "<|grounding|>Convert the document to
// markdown.") is a plain question. The family defines no text-before-image rendering; a question
// sent before the image is framed BOS{question}\n<image>×N, the placeholder line and the text
// line swapped. The format has no system turn, so a client system message is refused
// (system_message_not_supported). Generation stops on <｜end▁of▁sentence｜>; special tokens are
// kept when decoding, as upstream's runs decode (skip_special_tokens=False).
func (family) Frame(req vlm.FrameRequest, _ vlm.Params) (vlm.Frame, error) {
	if req.System != nil {
		return vlm.Frame{}, vlm.Refuse(abi.CodeSystemNotSupported,
			"DeepSeek-OCR-2's prompt format has no system turn; send the instruction as the question")
	}
	before, after := tokBOS, "\n"+req.Question
	if req.TextFirst {
		before, after = tokBOS+req.Question+"\n", ""
	}
	return vlm.Frame{
		Before:       before,
		Span:         vlm.ImageSpan{Pad: tokImage, Count: req.Plan.ImageTokens},
		After:        after,
		StopTokenIDs: []int32{tokIDEOS},
		Hints:        vlm.DecodeHints{SkipSpecialTokens: false},
	}, nil
}
