// Command phi4_multimodal is the Phi-4-multimodal family plugin: transformers'
// Phi4MultimodalImageProcessor (HD crops of 448×448 padded white, with patch masks, and a global
// view shrunk in float from the normalised canvas) as an ABI 2 plan of views with patch masks, a
// float resize and separator tokens (wire minor 3), and Phi-4's chat framing
// (<|user|><|image|>×N{question}<|end|><|assistant|>).
// Build it as a WASI reactor: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"strings"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// Param names the plugin reads from the bundle's [plugin.params].
const (
	// ParamDynamicHD is the processor's dynamic_hd: the most crops of 448×448 (the global view
	// not counted).
	ParamDynamicHD = "dynamic_hd"
	// ParamSystemPrompt is a default system turn; "" (the template's default) leaves it out.
	ParamSystemPrompt = "system_prompt"
)

// Phi4MultimodalImageProcessor's defaults (transformers 5.17: size 448, patch_size 14,
// dynamic_hd 36, mean = std = 0.5, rescale 1/255) and the model's 2×2 average pooling of the
// vision features (Phi4MultimodalImageEmbedding): 16×16 tokens a crop.
const (
	CropSize         = 448
	PatchSize        = 14
	MergeSize        = 2
	DefaultDynamicHD = 36
	// MaxDynamicHD bounds dynamic_hd: the crops and the global view fit the host's bound on views.
	MaxDynamicHD = abi.MaxViews - 1
	// MaskSize is the side of a crop in patches.
	MaskSize = CropSize / PatchSize
	// GlobalTokens and GlobalRows are the global view's 16×16 tokens and its 16 rows, each row
	// followed by a separator.
	GlobalTokens = (MaskSize / MergeSize) * (MaskSize / MergeSize)
	GlobalRows   = MaskSize / MergeSize
)

// Special tokens of Phi-4-multimodal's vocabulary (o200k and Phi-4's added tokens,
// scripts/reference/phi4_tokenizer.py).
const (
	tokImage     = "<|image|>"
	tokUser      = "<|user|>"
	tokSystem    = "<|system|>"
	tokAssistant = "<|assistant|>"
	tokEnd       = "<|end|>"
	// Phi4MultimodalConfig's default eos_token_id: <|endoftext|> and <|end|>.
	tokIDEndOfText = 199999
	tokIDEnd       = 200020
)

var (
	half  = [3]float64{0.5, 0.5, 0.5}
	white = vlm.RGB{255, 255, 255}
)

type family struct{}

func init() { vlm.Register(family{}) }

func main() {}

// Describe implements vlm.Plugin.
func (family) Describe() vlm.Description {
	return vlm.Description{
		ABI:    2,
		Family: "phi4_multimodal",
		Tasks:  []string{vlm.TaskVisionLanguage},
		Params: []vlm.ParamSpec{
			{Name: ParamDynamicHD, Type: abi.ParamInt, Default: DefaultDynamicHD,
				Doc: "most crops of 448x448 (the global view not counted), as the processor's dynamic_hd"},
			{Name: ParamSystemPrompt, Type: abi.ParamString, Default: "",
				Doc: "system turn inserted before the user turn; empty for none (the template has none)"},
		},
		Limits: vlm.Limits{
			// one crop keeping one token row of one cell at least; dynamic_hd crops in one column
			MinImageTokens: GlobalTokens + GlobalRows + 1 + 1 + 1,
			MaxImageTokens: GlobalTokens + GlobalRows + 1 + DefaultDynamicHD*(GlobalTokens+GlobalRows),
		},
	}
}

// Plan implements vlm.Plugin: Phi4MultimodalImageProcessor (torchvision backend). The image is
// resized once (bilinear, antialiased, uint8) and padded white to the crop grid's canvas; the
// views are, in the processor's order, the global view (that canvas normalised, then shrunk to
// 448×448 in float: bicubic, no antialias) and the crops (448×448 regions of the canvas,
// row-major), each crop with the mask of its valid patches. The tokens are num_img_tokens:
// the views' kept cells plus one separator after each token row of the global view and of the
// stitched crops and one between them. Refused: an empty image (image_too_small) and a resized
// side under 10 pixels (aspect_ratio_too_extreme, the reference's message).
func (family) Plan(img vlm.ImageHeader, params vlm.Params) (vlm.Plan, error) {
	maxCrops := params.Int(ParamDynamicHD)
	if maxCrops < 1 || maxCrops > MaxDynamicHD {
		return vlm.Plan{}, vlm.Fail(abi.CodeInvalidParams, "want 1 <= dynamic_hd <= %d, got %d", MaxDynamicHD, maxCrops)
	}
	if img.Width < 1 || img.Height < 1 {
		return vlm.Plan{}, vlm.Refuse(abi.CodeImageTooSmall, "image is %dx%d", img.Width, img.Height)
	}
	hd, err := Layout(img.Width, img.Height, CropSize, PatchSize, maxCrops)
	if err != nil {
		return vlm.Plan{}, vlm.Refuse(abi.CodeAspectRatioTooExtreme, "%s", err.Error())
	}
	src := vlm.Size{Width: img.Width, Height: img.Height}
	var resize *vlm.Resize // torchvision returns an image already of the asked size untouched
	if hd.NewW != src.Width || hd.NewH != src.Height {
		resize = &vlm.Resize{Width: hd.NewW, Height: hd.NewH, Filter: abi.FilterBilinear, Flavor: abi.FlavorTorchvision, Antialias: true}
	}
	views := make([]vlm.View, 0, 1+hd.Crops())

	global := view(resize)
	if hd.PadW > 0 || hd.PadH > 0 {
		global.Pad = &vlm.Pad{Right: hd.PadW, Bottom: hd.PadH, Color: white}
	}
	if hd.Crops() > 1 {
		global.FloatResize = &vlm.Resize{Width: CropSize, Height: CropSize, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision}
	}
	views = append(views, global)

	tokens := global.ImageTokens
	for i := range hd.Crops() {
		col, row := i%hd.Cols, i/hd.Cols
		v := view(resize)
		x, y := col*CropSize, row*CropSize
		w, h := min(CropSize, hd.NewW-x), min(CropSize, hd.NewH-y)
		if w != hd.NewW || h != hd.NewH {
			v.Region = &vlm.Rect{X: x, Y: y, Width: w, Height: h}
		}
		if w < CropSize || h < CropSize {
			v.Pad = &vlm.Pad{Right: CropSize - w, Bottom: CropSize - h, Color: white}
		}
		mw := min(max(hd.MaskCols-col*MaskSize, 0), MaskSize)
		mh := min(max(hd.MaskRows-row*MaskSize, 0), MaskSize)
		if mw < MaskSize || mh < MaskSize {
			v.Mask = &vlm.Rect{Width: mw, Height: mh}
			v.ImageTokens = v.KeptTokens()
		}
		tokens += v.ImageTokens
		views = append(views, v)
	}
	plan := vlm.Plan{
		Source:          src,
		Views:           views,
		SeparatorTokens: GlobalRows + 1 + (hd.MaskRows+1)/MergeSize,
	}
	plan.ImageTokens = tokens + plan.SeparatorTokens
	if plan.ImageTokens != hd.Tokens() {
		return vlm.Plan{}, vlm.Fail(abi.CodePluginError, "the views give %d image tokens, num_img_tokens is %d", plan.ImageTokens, hd.Tokens())
	}
	return plan, nil
}

// view is one 448×448 picture taken from the resize r: the 0.5/0.5 normalisation (fused, as
// the torchvision backend does it), raster patches of 14 (32×32), 2×2 of them to a token
// (16×16 = 256 tokens before any mask).
func view(r *vlm.Resize) vlm.View {
	return vlm.View{
		Resize:      r,
		Normalize:   vlm.Normalize{Rescale: 1.0 / 255, Mean: half, Std: half, Flavor: abi.FlavorTorchvision},
		Patches:     vlm.Patches{Size: PatchSize, Temporal: 1, Merge: MergeSize, Layout: abi.LayoutTiles},
		Grid:        vlm.Grid{T: 1, H: MaskSize, W: MaskSize},
		LLMGrid:     vlm.Grid{T: 1, H: MaskSize / MergeSize, W: MaskSize / MergeSize},
		ImageTokens: GlobalTokens,
	}
}

// Frame implements vlm.Plugin: Phi-4's chat format, every turn <|role|>content<|end|> with no
// newlines and no default system turn, then the generation prompt <|assistant|>. The user turn
// holds the image placeholder, expanded to num_img_tokens × <|image|>, and the question in the
// order the client sent them; a client's system message (even an empty one) or else the bundle's
// system_prompt is a <|system|>...<|end|> turn before it. Generation stops on <|endoftext|> or
// <|end|> (Phi4MultimodalConfig's eos_token_id).
func (family) Frame(req vlm.FrameRequest, params vlm.Params) (vlm.Frame, error) {
	system := params.String(ParamSystemPrompt)
	hasSystem := system != ""
	if req.System != nil {
		system, hasSystem = *req.System, true
	}
	var before strings.Builder
	if hasSystem {
		before.WriteString(tokSystem + system + tokEnd)
	}
	before.WriteString(tokUser)
	after := ""
	if req.TextFirst {
		before.WriteString(req.Question)
	} else {
		after = req.Question
	}
	return vlm.Frame{
		Before:       before.String(),
		Span:         vlm.ImageSpan{Pad: tokImage, Count: req.Plan.ImageTokens},
		After:        after + tokEnd + tokAssistant,
		StopTokenIDs: []int32{tokIDEndOfText, tokIDEnd},
		Hints:        vlm.DecodeHints{SkipSpecialTokens: true},
	}, nil
}
