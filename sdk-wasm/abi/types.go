package abi

// ImageHeader is what the host knows about the request's image before it decodes the pixels.
type ImageHeader struct {
	Width  int `json:"width"`
	Height int `json:"height"`
	// Format is the container format: "png" or "jpeg".
	Format string `json:"format,omitempty"`
	// HasAlpha is true when the colour model carries transparency.
	HasAlpha bool `json:"has_alpha,omitempty"`
}

// PlanRequest is the input of iris_plan.
type PlanRequest struct {
	Image ImageHeader `json:"image"`
	// Params is the bundle's [plugin.params] table. Numbers arrive as json.Number on the guest.
	Params map[string]any `json:"params,omitempty"`
}

// Size is a width and height in pixels.
type Size struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// Rect is a region of an image in pixels; X and Y are the top-left corner.
type Rect struct {
	X      int `json:"x"`
	Y      int `json:"y"`
	Width  int `json:"width"`
	Height int `json:"height"`
}

// RGB is an 8-bit colour.
type RGB [3]uint8

// Resample filters a [Resize] may name.
const (
	FilterBicubic  = "bicubic"
	FilterBilinear = "bilinear"
)

// Flavours name whose arithmetic a pixel step must reproduce bit for bit.
const (
	// FlavorTorchvision is the transformers torchvision backend: torch's uint8 antialiased CPU
	// resize, and a fused float32 rescale+normalise (a subtraction then a division).
	FlavorTorchvision = "torchvision"
	// FlavorPIL is the transformers PIL backend and plain PIL: PIL's ImagingResample, and a
	// float64 rescale followed by (x - mean) / std.
	FlavorPIL = "pil"
)

// Patch layouts a [Patches] may name.
const (
	// LayoutMergeBlocks is the Qwen2-VL family layout: rows are patches in merge-block-major
	// order (for each Merge×Merge block in raster order, its patches in raster order), and each
	// row is C × Temporal × Size × Size floats, the frame repeated Temporal times.
	LayoutMergeBlocks = "merge_blocks"
	// LayoutTiles (ABI 2, views only) is a plain raster layout: rows are a view's patches in
	// raster order (row-major over Grid.H × Grid.W), each row C × Size × Size floats (Temporal
	// must be 1). Merge is the side of the block of patches that becomes one LLM token
	// (InternVL's pixel shuffle 0.5: 2); it only counts tokens, the rows stay in raster order.
	LayoutTiles = "tiles"
)

// Resize scales the (cropped) image to an exact size.
type Resize struct {
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Filter string `json:"filter"`
	Flavor string `json:"flavor"`
	// Antialias widens the filter support by the downscale factor (torchvision antialias=True;
	// PIL always does).
	Antialias bool `json:"antialias"`
}

// Pad adds borders of one colour after the resize.
type Pad struct {
	Top    int `json:"top"`
	Right  int `json:"right"`
	Bottom int `json:"bottom"`
	Left   int `json:"left"`
	Color  RGB `json:"color"`
}

// Normalize turns uint8 channels into floats: x*Rescale, then (x - Mean) / Std per channel.
type Normalize struct {
	Rescale float64    `json:"rescale"`
	Mean    [3]float64 `json:"mean"`
	Std     [3]float64 `json:"std"`
	Flavor  string     `json:"flavor"`
}

// Patches is the layout of the pixel tensor handed to the vision encoder.
type Patches struct {
	// Size is the side of a square patch in pixels.
	Size int `json:"size"`
	// Temporal is how many times each image patch repeats along the temporal axis.
	Temporal int `json:"temporal"`
	// Merge is the side of the block of patches the vision encoder merges into one LLM token.
	Merge  int    `json:"merge"`
	Layout string `json:"layout"`
}

// Grid is a (t, h, w) extent.
type Grid struct {
	T int `json:"t"`
	H int `json:"h"`
	W int `json:"w"`
}

// Cells returns t·h·w.
func (g Grid) Cells() int { return g.T * g.H * g.W }

// Plan is a declarative preprocessing plan: the host crops, resizes, pads, normalises and
// patchifies the image exactly as it says.
//
// The image a plan applies to is already 8-bit RGB as transformers' load_image makes it: EXIF
// orientation applied, then PIL's convert("RGB") (alpha dropped, palettes looked up, grey
// replicated). ImageHeader's width and height are that image's.
type Plan struct {
	// Source is the image size the plan was made for; the host checks it against the image.
	Source Size `json:"source"`
	// Crop, when set, keeps only this region of the source.
	Crop *Rect `json:"crop,omitempty"`
	// Resize, when set, scales the (cropped) image to this exact size.
	Resize *Resize `json:"resize,omitempty"`
	// Pad, when set, adds borders after the resize.
	Pad       *Pad      `json:"pad,omitempty"`
	Normalize Normalize `json:"normalize"`
	Patches   Patches   `json:"patches"`
	// Grid is the patch grid (the processor's image_grid_thw): T frames of H×W patches.
	Grid Grid `json:"grid"`
	// LLMGrid is the language model's position grid for the image span (M-RoPE t, h, w):
	// Grid with H and W divided by the merge size.
	LLMGrid Grid `json:"llm_grid"`
	// ImageTokens is the exact number of image placeholder tokens: LLMGrid.Cells(), or with
	// Views the sum of the views' ImageTokens.
	ImageTokens int `json:"image_tokens"`
	// Views (ABI 2) are several pictures cut from the image, in the order their rows are
	// concatenated into the pixel tensor. When set, the single-view fields above (Crop, Resize,
	// Pad, Normalize, Patches, Grid, LLMGrid) are zero; Source and ImageTokens keep their meaning.
	Views []View `json:"views,omitempty"`
	// SeparatorTokens (ABI 2, wire minor 3; only with Views) are placeholders of the image span
	// that stand for no view's patches: learned separators the family's model inserts around the
	// views' features (Phi-4-multimodal: one after each token row of its stitched crops and of
	// its global view, one between the two). ImageTokens is the views' tokens plus these. Where
	// the separators go and in which order the views' tokens come is the family's knowledge; the
	// host only checks the sum.
	SeparatorTokens int `json:"separator_tokens,omitempty"`
}

// View is one picture cut from the image (ABI 2), e.g. one 448×448 tile of InternVL's grid or
// its thumbnail. The host applies, in order: Crop (source pixels), PreResize, Resize, Region (a rectangle
// of the resized image: tiles cut from one canvas resized once; the host resizes each distinct
// (Crop, Resize) pair once), Pad, Normalize, FloatResize (of the normalised canvas), patchify.
//
// Wire minor 3 adds two fields: Mask, the patches the vision encoder attends to (a crop padded
// past the image's edge masks its padding), and FloatResize, a resize of the normalised float
// canvas (Phi-4-multimodal's global view is its padded, normalised canvas shrunk to 448×448).
// Wire minor 4 adds PreResize, a first resize before Resize.
type View struct {
	// Crop, when set, keeps only this region of the source.
	Crop *Rect `json:"crop,omitempty"`
	// Resize, when set, scales the (cropped) image to this exact size.
	Resize *Resize `json:"resize,omitempty"`
	// Region, when set, keeps only this rectangle of the resized (or cropped) image.
	Region *Rect `json:"region,omitempty"`
	// Pad, when set, adds borders after the region is cut.
	Pad       *Pad      `json:"pad,omitempty"`
	Normalize Normalize `json:"normalize"`
	Patches   Patches   `json:"patches"`
	// Grid is the view's patch grid: {1, canvas height / Size, canvas width / Size}.
	Grid Grid `json:"grid"`
	// LLMGrid is Grid with H and W divided by Patches.Merge.
	LLMGrid Grid `json:"llm_grid"`
	// ImageTokens is the view's share of the image span: LLMGrid.Cells(), or with a Mask the
	// cells it keeps ([View.KeptTokens]).
	ImageTokens int `json:"image_tokens"`
	// Mask (wire minor 3), when set, is the rectangle of the view's patch grid, in patches (X
	// and Y the first column and row), that the vision encoder attends to; the patches outside
	// it are padding, masked out as attention keys, and the family's model may lay out positions
	// and tokens by it. A cell of LLMGrid is kept when its first patch (row i·Merge, column
	// j·Merge) lies inside the mask, and ImageTokens counts the kept cells. nil: every patch.
	Mask *Rect `json:"mask,omitempty"`
	// FloatResize (wire minor 3), when set, resizes the view's normalised canvas, in float32,
	// to this size before it is patchified: torch's CPU interpolate of a float tensor, the one
	// combination FilterBicubic (a = −0.75, align_corners false), FlavorTorchvision, Antialias
	// false (what transformers' torchvision backend does to a float image with antialias=False).
	FloatResize *Resize `json:"float_resize,omitempty"`
	// PreResize (wire minor 4), when set, scales the (cropped) image once before Resize, which
	// must then be set too, with an 8-bit image in between: a reference that resizes twice
	// (LocateAnything shrinks an image past its token limit, then stretches the result to
	// multiples of 28) is reproduced only by both resizes, each rounding to 8 bits.
	PreResize *Resize `json:"pre_resize,omitempty"`
}

// Padded returns the size of the view after crop, resize, region and pad, for a source of size
// src: the 8-bit canvas the host normalises.
func (v *View) Padded(src Size) Size {
	s := v.Resized(src)
	if v.Region != nil {
		s = Size{Width: v.Region.Width, Height: v.Region.Height}
	}
	if v.Pad != nil {
		s.Width += v.Pad.Left + v.Pad.Right
		s.Height += v.Pad.Top + v.Pad.Bottom
	}
	return s
}

// Canvas returns the size of what gets patchified, for a source of size src: the padded canvas
// ([View.Padded]), or FloatResize's size.
func (v *View) Canvas(src Size) Size {
	if r := v.FloatResize; r != nil {
		return Size{Width: r.Width, Height: r.Height}
	}
	return v.Padded(src)
}

// PatchMask returns the rectangle of patches the encoder attends to: Mask, or the whole grid.
func (v *View) PatchMask() Rect {
	if v.Mask != nil {
		return *v.Mask
	}
	return Rect{Width: v.Grid.W, Height: v.Grid.H}
}

// KeptTokens returns the number of LLMGrid cells the view's mask keeps: the cells whose first
// patch (row i·Merge, column j·Merge) lies inside PatchMask, the subsampling mask[::merge,
// ::merge] of a patch mask; without a Mask, LLMGrid.Cells().
func (v *View) KeptTokens() int {
	if v.Mask == nil {
		return v.LLMGrid.Cells()
	}
	m := v.Patches.Merge
	if m < 1 {
		return 0
	}
	return v.LLMGrid.T * multiples(v.Mask.Y, v.Mask.Height, m) * multiples(v.Mask.X, v.Mask.Width, m)
}

// multiples returns how many multiples of m lie in [start, start+n).
func multiples(start, n, m int) int {
	if n <= 0 || start < 0 {
		return 0
	}
	return (start+n+m-1)/m - (start+m-1)/m
}

// Resized returns the size of the view's image after crop and resize: the image Region is
// cut from.
func (v *View) Resized(src Size) Size {
	s := src
	if v.Crop != nil {
		s = Size{Width: v.Crop.Width, Height: v.Crop.Height}
	}
	if v.Resize != nil {
		s = Size{Width: v.Resize.Width, Height: v.Resize.Height}
	}
	return s
}

// RowLen returns the number of floats in one row of the view's pixel tensor.
func (pt Patches) RowLen() int { return 3 * pt.Temporal * pt.Size * pt.Size }

// Canvas returns the size of the image after crop, resize and pad: what gets patchified.
func (p *Plan) Canvas() Size {
	s := p.Source
	if p.Crop != nil {
		s = Size{Width: p.Crop.Width, Height: p.Crop.Height}
	}
	if p.Resize != nil {
		s = Size{Width: p.Resize.Width, Height: p.Resize.Height}
	}
	if p.Pad != nil {
		s.Width += p.Pad.Left + p.Pad.Right
		s.Height += p.Pad.Top + p.Pad.Bottom
	}
	return s
}

// PixelShape returns the shape [rows, cols] of the pixel tensor the plan produces. With views
// the rows are every view's rows and cols view 0's row length (a validated plan's views may
// differ in row length; [Plan.Uniform] says whether they do).
func (p *Plan) PixelShape() (rows, cols int) {
	if len(p.Views) == 0 {
		return p.Grid.Cells(), p.Patches.RowLen()
	}
	for i := range p.Views {
		rows += p.Views[i].Grid.Cells()
	}
	return rows, p.Views[0].Patches.RowLen()
}

// FrameRequest is the input of iris_frame.
type FrameRequest struct {
	Question string `json:"question"`
	// TextFirst is true when the question came before the image in the user's message.
	TextFirst bool `json:"text_first"`
	// Plan is the plan the host executed for this request's image.
	Plan Plan `json:"plan"`
	// Params is the same [plugin.params] table the plan was made with.
	Params map[string]any `json:"params,omitempty"`
	// System is the client's system message, nil when it sent none: the plugin frames it as the
	// family's chat template frames a system turn (it replaces a default system prompt). Wire
	// minor 1; a minor-0 plugin never gets one (the host refuses the request instead).
	System *string `json:"system,omitempty"`
}

// ImageSpan is the run of tokens that stands for the image in the prompt.
type ImageSpan struct {
	// Open are special tokens before the placeholders, e.g. ["<|vision_start|>"].
	Open []string `json:"open"`
	// Pad is the placeholder token, repeated Count times; the vision embeddings replace these.
	Pad   string `json:"pad"`
	Count int    `json:"count"`
	// Close are special tokens after the placeholders, e.g. ["<|vision_end|>"].
	Close []string `json:"close"`
}

// DecodeHints tell the host how to turn generated tokens back into text.
type DecodeHints struct {
	SkipSpecialTokens bool `json:"skip_special_tokens"`
}

// Frame is the prompt around the image: the host tokenises Before and After (special tokens
// spelled out, e.g. "<|im_start|>"), and splices the image span between them.
type Frame struct {
	Before       string      `json:"before"`
	Span         ImageSpan   `json:"span"`
	After        string      `json:"after"`
	StopTokenIDs []int32     `json:"stop_token_ids"`
	Hints        DecodeHints `json:"hints"`
	// Spans (ABI 2) are several image spans in prompt order in place of Span (which is then
	// zero), adjacent to one another between Before and After, each with its own Open, Pad,
	// Count and Close. Their counts sum to the plan's ImageTokens; the image's embedding rows
	// fill the placeholders in order.
	Spans []ImageSpan `json:"spans,omitempty"`
}

// ImageSpans returns the frame's image spans in prompt order: Spans, or the one Span.
func (f *Frame) ImageSpans() []ImageSpan {
	if len(f.Spans) > 0 {
		return f.Spans
	}
	return []ImageSpan{f.Span}
}

// Param types a [ParamSpec] may name.
const (
	ParamInt    = "int"
	ParamFloat  = "float"
	ParamString = "string"
	ParamBool   = "bool"
)

// ParamSpec declares one key of the bundle's [plugin.params] table a plugin reads.
type ParamSpec struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Default is used when the bundle leaves the key out.
	Default any    `json:"default"`
	Doc     string `json:"doc,omitempty"`
}

// Limits describe a plugin's bounds at its default parameters.
type Limits struct {
	// MaxAspectRatio is the largest long/short side ratio the plugin accepts (0: no bound).
	MaxAspectRatio float64 `json:"max_aspect_ratio,omitempty"`
	// MinImageTokens and MaxImageTokens bound the image span at the default parameters.
	MinImageTokens int `json:"min_image_tokens"`
	MaxImageTokens int `json:"max_image_tokens"`
}

// Description is what iris_describe returns: who the plugin is and what it reads.
type Description struct {
	// ABI is the plan and frame vocabulary the plugin speaks: 1, or 2 for views and spans. The
	// SDK fills in 1 when a plugin leaves it zero, so v1 plugins need no change.
	ABI int `json:"abi"`
	// Minor is the wire minor version the plugin's SDK speaks, read from the message; the host
	// encodes its requests at min(its own, this) and offers only what that minor carries.
	Minor  int    `json:"minor"`
	Family string `json:"family"`
	// Tasks are the core task names the plugin frames prompts for, e.g. "vision-language-generation".
	Tasks  []string    `json:"tasks"`
	Params []ParamSpec `json:"params"`
	Limits Limits      `json:"limits"`
}

// Param returns the spec of the named parameter.
func (d *Description) Param(name string) (ParamSpec, bool) {
	for _, p := range d.Params {
		if p.Name == name {
			return p, true
		}
	}
	return ParamSpec{}, false
}

// Uniform reports, as an error, the first view that differs from view 0 in patch grid, patch
// geometry or layout; nil for a plan without views or whose views all agree. A host whose
// vision encoder takes one grid per image needs uniform views: it runs them as [Plan.ImageGrid].
func (p *Plan) Uniform() error {
	for i := 1; i < len(p.Views); i++ {
		a, b := &p.Views[0], &p.Views[i]
		if b.Grid != a.Grid || b.Patches != a.Patches {
			return invalid("view %d has grid %+v and patches %+v, view 0 grid %+v and patches %+v: the views differ",
				i, b.Grid, b.Patches, a.Grid, a.Patches)
		}
	}
	return nil
}

// ImageGrid returns the patch grid of the whole image: Grid, or for uniform views {T: number of
// views, H, W of one view}, the views stacked as the frames of one grid.
func (p *Plan) ImageGrid() Grid {
	if len(p.Views) == 0 {
		return p.Grid
	}
	g := p.Views[0].Grid
	g.T = len(p.Views)
	return g
}

// ImagePatches returns the patch layout of the whole image: Patches, or view 0's.
func (p *Plan) ImagePatches() Patches {
	if len(p.Views) == 0 {
		return p.Patches
	}
	return p.Views[0].Patches
}
