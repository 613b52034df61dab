// Package prep turns one request's decoded image and question into the model's inputs: it asks
// the family plugin for a plan, executes the plan with the native pixel steps of
// core/internal/pixels, asks the plugin to frame the prompt, and tokenises it with the image
// placeholders spliced in. It is the runtime's per-request preprocessing pipeline.
package prep

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/bits"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/iris-vlm/iris/core/internal/pixels"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// Planner is what prep needs of a family plugin; *plugin.Plugin implements it.
type Planner interface {
	Plan(ctx context.Context, img abi.ImageHeader, params map[string]any) (abi.Plan, error)
	Frame(ctx context.Context, req abi.FrameRequest) (abi.Frame, error)
}

// Tokenizer is what prep needs of a tokenizer; *tokenize.Tokenizer implements it. Encode must
// recognise added special tokens spelled in the text and add no BOS.
type Tokenizer interface {
	Encode(text string) ([]int32, error)
	TokenID(token string) (int32, bool)
}

// Config wires a Preparer.
type Config struct {
	Plugin    Planner
	Tokenizer Tokenizer
	// Params is the bundle's [plugin.params] table, handed to every plan and frame call.
	Params map[string]any
	// TracerProvider makes the pixels and tokenize spans; nil uses otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

// Preparer runs the pipeline for one bundle.
//
// # Notes
//
//   - Safe for concurrent use.
//   - It keeps the normalisation tables of the plans it has seen (a bundle's plugin uses one or
//     two) and reuses intermediate images across requests.
type Preparer struct {
	plugin Planner
	tok    Tokenizer
	params map[string]any
	tracer trace.Tracer

	mu     sync.Mutex
	tables map[abi.Normalize]*pixels.Table
	images sync.Pool  // *pixels.RGB scratch for crop/resize/pad results
	planes sync.Pool  // *[]float32 scratch for the float resizes of views
	values valuePools // pixel_values storage by size class, returned by Result.Release
}

// New returns a Preparer.
func New(cfg Config) (*Preparer, error) {
	if cfg.Plugin == nil || cfg.Tokenizer == nil {
		return nil, fmt.Errorf("preparing: a plugin and a tokenizer are required")
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Preparer{
		plugin: cfg.Plugin,
		tok:    cfg.Tokenizer,
		params: cfg.Params,
		tracer: tp.Tracer("github.com/iris-vlm/iris/core/internal/prep"),
		tables: map[abi.Normalize]*pixels.Table{},
	}, nil
}

// Input is one request as prep sees it.
type Input struct {
	// Image is the decoded image (imageio.Decode): RGB, EXIF orientation applied. When it is
	// nil, Await gives it, and Width and Height (the header's, orientation applied) let the
	// plan, the prompt and the tokens be made while the image decodes.
	Image         *pixels.RGB
	Width, Height int
	Await         func(context.Context) (*pixels.RGB, error)
	// Format is the file's format ("png" or "jpeg"); HasAlpha whether it carried transparency.
	Format   string
	HasAlpha bool
	Question string
	// TextFirst is true when the question came before the image in the message.
	TextFirst bool
	// System is the client's system message; nil when it sent none.
	System *string
	// Params override keys of the bundle's [plugin.params] for this request (a pixel budget's
	// min_pixels and max_pixels); nil for none.
	Params map[string]any
}

// Span locates the image placeholders in InputIDs.
type Span struct {
	// Start is the index of the first placeholder; Len the number of placeholders.
	Start, Len int
}

// Timings are the wall times of prep's stages. Plan starts the work; frame then tokenize run
// beside pixels, from the offsets FrameStart and PixelsStart after the start.
type Timings struct {
	Plan, Pixels, Frame, Tokenize time.Duration
	FrameStart, PixelsStart       time.Duration
}

// Result is the model input of one request.
type Result struct {
	// PixelValues is the vision encoder's input, row-major [Rows, Cols] float32.
	PixelValues []float32
	Rows, Cols  int
	// Grid is the patch grid (t, h, w), the processor's image_grid_thw; for a plan of views
	// (ABI 2) {T: number of views, H, W of one view}.
	Grid abi.Grid
	// LLMGrid is the image span's position grid for M-RoPE (t, h, w after merging); for views
	// {T: number of views, H, W of one view's}.
	LLMGrid abi.Grid
	// ImageTokens is the image span's length: the plan's, separator tokens included.
	ImageTokens int
	// Masks, for a plan of views with patch masks (wire minor 3), hold each view's mask in view
	// order (abi.View.PatchMask: the whole grid for a view that sets none): the patches of that
	// frame of Grid the vision encoder attends to. nil when no view has a mask.
	Masks []abi.Rect
	// Tiles, for a plan of views some of which are cut from one canvas (a View.Region), hold
	// each view's place on that canvas in patches, in view order: a region's corner over the
	// patch size with the view's grid (a tile), the zero Rect for a view with no region (the
	// whole canvas: an overview). nil when no view has a region, or when a region does not sit
	// at whole patches of a view patchified as cut.
	Tiles []abi.Rect
	// InputIDs is the prompt; MMTokenTypeIDs marks each id 0 (text) or 1 (image placeholder).
	InputIDs       []int32
	MMTokenTypeIDs []int32
	// ImageSpans locate the placeholders, one per image span of the frame, in prompt order.
	ImageSpans []Span
	StopIDs    []int32
	Hints      abi.DecodeHints
	// Plan is what the plugin decided, kept for logs and cache keys.
	Plan    abi.Plan
	Timings Timings

	pool *sync.Pool
}

// valuePools pools pixel_values buffers by size class (capacity a power of two floats), so that
// a request takes a buffer of its own size: one pool for every size handed the largest image's
// buffer to every request, and with many requests prepared at once each held that much (24
// requests of the CPU demo's corpus held 825 MB of 48 MB buffers).
type valuePools [40]sync.Pool

// get returns a buffer of length n (reused when its class has one) and the pool it goes back to.
func (v *valuePools) get(n int) ([]float32, *sync.Pool) {
	c := bits.Len(uint(max(n, 1) - 1)) // the class whose capacity 1<<c holds n
	pool := &v[min(c, len(v)-1)]
	if b, ok := pool.Get().(*[]float32); ok && cap(*b) >= n {
		return (*b)[:n], pool
	}
	return make([]float32, n, 1<<c), pool
}

// Release hands PixelValues back for reuse by a later request; the caller must not touch them
// afterwards. Calling it is optional (without it the buffer is garbage collected) and safe more
// than once.
func (r *Result) Release() {
	if r.pool == nil || r.PixelValues == nil {
		return
	}
	pv := r.PixelValues[:0]
	r.PixelValues = nil
	r.pool.Put(&pv)
	r.pool = nil
}

// Prepare runs plan, then frame and tokenize beside pixels, for one request.
//
// A refusal (the plugin declines the image, or the question cannot be tokenised) is an
// *abi.Error of kind abi.Refusal; plugin failures are *plugin.Error or *abi.Error of kind
// abi.Failure; anything else is a host error.
func (p *Preparer) Prepare(ctx context.Context, in Input) (*Result, error) {
	w, h := in.Width, in.Height
	if in.Image != nil {
		w, h = in.Image.W, in.Image.H
	}
	if w <= 0 || h <= 0 || (in.Image == nil && in.Await == nil) {
		return nil, fmt.Errorf("preparing: no image")
	}
	res := &Result{}
	hdr := abi.ImageHeader{Width: w, Height: h, Format: in.Format, HasAlpha: in.HasAlpha}

	begin := time.Now()
	params := p.params
	if len(in.Params) > 0 {
		params = maps.Clone(p.params)
		if params == nil {
			params = map[string]any{}
		}
		maps.Copy(params, in.Params)
	}
	plan, err := p.plugin.Plan(ctx, hdr, params)
	res.Timings.Plan = time.Since(begin)
	if err != nil {
		return nil, err
	}
	res.Plan = plan

	// Frame and tokenize need only the plan, the pixels only the plan and the image: the two
	// run side by side (and beside the image's decoding, when it is awaited). They write different fields of res. A question that cannot be
	// tokenised is still refused, its pixels dropped.
	var (
		frame abi.Frame
		ferr  error
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				ferr = fmt.Errorf("framing the prompt: panic: %v", r)
			}
		}()
		t := time.Now()
		res.Timings.FrameStart = t.Sub(begin)
		frame, ferr = p.plugin.Frame(ctx, abi.FrameRequest{Question: in.Question, TextFirst: in.TextFirst, Plan: plan, Params: params, System: in.System})
		res.Timings.Frame = time.Since(t)
		if ferr != nil {
			return
		}
		t = time.Now()
		ferr = p.tokenize(ctx, &frame, res)
		res.Timings.Tokenize = time.Since(t)
	}()

	img := in.Image
	if img == nil {
		// the image's own error (a corrupt file) comes first: it is the client's
		if img, err = in.Await(ctx); err == nil && (img.W != w || img.H != h) {
			err = fmt.Errorf("preparing: the image decoded to %dx%d, its header said %dx%d", img.W, img.H, w, h)
		}
		if err != nil {
			<-done
			return nil, err
		}
	}
	start := time.Now()
	res.Timings.PixelsStart = start.Sub(begin)
	err = p.pixels(ctx, img, &plan, res)
	res.Timings.Pixels = time.Since(start)
	<-done
	if ferr != nil || err != nil {
		res.Release()
		return nil, cmp.Or(ferr, err)
	}
	res.StopIDs = frame.StopTokenIDs
	res.Hints = frame.Hints
	return res, nil
}

// pixels executes the plan's pixel steps: crop, resize, pad, then the fused normalise and
// patchify into a new pixel_values tensor; a plan with views runs them for each view into one
// tensor (views).
func (p *Preparer) pixels(ctx context.Context, src *pixels.RGB, plan *abi.Plan, res *Result) error {
	_, span := p.tracer.Start(ctx, "prep.pixels", trace.WithAttributes(
		attribute.Int("iris.image.width", src.W), attribute.Int("iris.image.height", src.H),
		attribute.Int("iris.image.views", max(1, len(plan.Views)))))
	defer span.End()
	if plan.Source.Width != src.W || plan.Source.Height != src.H {
		return fmt.Errorf("executing plan: it is for a %dx%d image, the image is %dx%d",
			plan.Source.Width, plan.Source.Height, src.W, src.H)
	}
	var scratch []*pixels.RGB
	defer func() {
		for _, m := range scratch {
			p.images.Put(m)
		}
	}()
	next := func(w, h int) *pixels.RGB {
		m, _ := p.images.Get().(*pixels.RGB)
		if m == nil {
			m = &pixels.RGB{}
		}
		m.Reset(w, h)
		scratch = append(scratch, m)
		return m
	}
	if len(plan.Views) > 0 {
		return p.views(src, plan, res, next)
	}
	img, err := cropResize(src, plan.Crop, next, plan.Resize)
	if err != nil {
		return err
	}
	if img, err = pad(img, plan.Pad, next); err != nil {
		return err
	}
	// pixel_values is the largest buffer of a request (18.8 MB for a 1024x768 image): reusing
	// it saves the allocation and, above all, the page faults of touching fresh memory.
	rows, cols := plan.PixelShape()
	buf, pool := p.values.get(rows * cols)
	pv, err := p.patchify(buf[:0], img, plan.Normalize, plan.Patches, plan.Grid)
	res.pool = pool
	if err != nil {
		return err
	}
	res.PixelValues = pv
	res.Rows, res.Cols = plan.PixelShape()
	res.Grid, res.LLMGrid, res.ImageTokens = plan.Grid, plan.LLMGrid, plan.ImageTokens
	return nil
}

// views executes a plan of several views (ABI 2) into one pixel tensor, the views' rows in
// order. Each distinct (crop, pre-resize, resize) is computed once and shared by the views cut from it (the
// tiles of one canvas); each view then takes its region, pads, and is normalised (and, with a
// FloatResize, resized in float) and patchified straight into its rows of the tensor. The views
// must be uniform (one grid and patch layout): the result is one image of Grid {T: views, H, W},
// with the views' patch masks when any has one.
func (p *Preparer) views(src *pixels.RGB, plan *abi.Plan, res *Result, next func(w, h int) *pixels.RGB) error {
	if err := plan.Uniform(); err != nil {
		return fmt.Errorf("executing plan: one image takes one patch grid: %w", err)
	}
	rows, cols := plan.PixelShape()
	buf, pool := p.values.get(rows * cols)
	res.pool = pool
	res.PixelValues = buf // handed back by Release whether or not the views succeed

	type canvasKey struct {
		crop        abi.Rect
		pre, resize abi.Resize
		c, p, r     bool
	}
	canvases := map[canvasKey]*pixels.RGB{}
	off := 0
	for i := range plan.Views {
		v := &plan.Views[i]
		k := canvasKey{c: v.Crop != nil, p: v.PreResize != nil, r: v.Resize != nil}
		if k.c {
			k.crop = *v.Crop
		}
		if k.p {
			k.pre = *v.PreResize
		}
		if k.r {
			k.resize = *v.Resize
		}
		img, ok := canvases[k]
		if !ok {
			var err error
			if img, err = cropResize(src, v.Crop, next, v.PreResize, v.Resize); err != nil {
				return fmt.Errorf("view %d: %w", i, err)
			}
			canvases[k] = img
		}
		if g := v.Region; g != nil {
			dst := next(g.Width, g.Height)
			if err := pixels.Crop(dst, img, g.X, g.Y); err != nil {
				return fmt.Errorf("executing plan: view %d region: %w", i, err)
			}
			img = dst
		}
		img, err := pad(img, v.Pad, next)
		if err != nil {
			return fmt.Errorf("view %d: %w", i, err)
		}
		n := v.Grid.Cells() * cols
		// a full slice expression: the view's rows are written in place, never reallocated
		dst := buf[off : off+n : off+n]
		var pv []float32
		if r := v.FloatResize; r != nil && (r.Width != img.W || r.Height != img.H) {
			pv, err = p.floatPatchify(dst, img, v)
		} else { // torchvision returns an image already of the asked size untouched
			pv, err = p.patchify(dst, img, v.Normalize, v.Patches, v.Grid)
		}
		if err != nil {
			return fmt.Errorf("view %d: %w", i, err)
		}
		if len(pv) != n || &pv[0] != &dst[0] {
			return fmt.Errorf("executing plan: view %d: patchify wrote %d values elsewhere, want %d in place", i, len(pv), n)
		}
		off += n
	}
	res.Rows, res.Cols = rows, cols
	res.Grid = plan.ImageGrid()
	llm := plan.Views[0].LLMGrid
	llm.T = len(plan.Views)
	res.LLMGrid, res.ImageTokens = llm, plan.ImageTokens
	for i := range plan.Views {
		if plan.Views[i].Mask != nil {
			res.Masks = make([]abi.Rect, len(plan.Views))
			for j := range plan.Views {
				res.Masks[j] = plan.Views[j].PatchMask()
			}
			break
		}
	}
	res.Tiles = tilePlaces(plan.Views)
	return nil
}

// tilePlaces are the views' places on the canvas they are cut from, in patches (Result.Tiles).
func tilePlaces(views []abi.View) []abi.Rect {
	var out []abi.Rect
	for i := range views {
		v := &views[i]
		r, size := v.Region, v.Patches.Size
		if r == nil {
			continue
		}
		if v.FloatResize != nil || size <= 0 || r.X%size != 0 || r.Y%size != 0 {
			return nil
		}
		if out == nil {
			out = make([]abi.Rect, len(views))
		}
		out[i] = abi.Rect{X: r.X / size, Y: r.Y / size, Width: v.Grid.W, Height: v.Grid.H}
	}
	return out
}

// floatPatchify normalises img, resizes the normalised image in float to the view's
// FloatResize and lays it out in the view's patch layout into dst, checking the grid.
func (p *Preparer) floatPatchify(dst []float32, img *pixels.RGB, v *abi.View) ([]float32, error) {
	table, err := p.table(v.Normalize)
	if err != nil {
		return nil, err
	}
	r := v.FloatResize
	if r.Filter != abi.FilterBicubic || r.Flavor != abi.FlavorTorchvision || r.Antialias {
		return nil, fmt.Errorf("executing plan: float resize %s/%s antialias=%t is not a resampler this host has",
			r.Flavor, r.Filter, r.Antialias)
	}
	layout, err := patchLayout(v.Patches)
	if err != nil {
		return nil, err
	}
	buf, _ := p.planes.Get().(*[]float32)
	if buf == nil {
		buf = new([]float32)
	}
	defer p.planes.Put(buf)
	if *buf, err = pixels.ResizeFloatBicubic(*buf, img, table, r.Width, r.Height); err != nil {
		return nil, fmt.Errorf("executing plan: %w", err)
	}
	pv, gh, gw, err := pixels.PatchifyCHW(dst, *buf, r.Width, r.Height, layout)
	if err != nil {
		return nil, fmt.Errorf("executing plan: %w", err)
	}
	if gh != v.Grid.H || gw != v.Grid.W {
		return nil, fmt.Errorf("executing plan: patchify gave a %dx%d grid, the plan says %dx%d", gh, gw, v.Grid.H, v.Grid.W)
	}
	return pv, nil
}

// cropResize applies a crop then a resize (either may be nil) to src.
func cropResize(src *pixels.RGB, c *abi.Rect, next func(w, h int) *pixels.RGB, resizes ...*abi.Resize) (*pixels.RGB, error) {
	img := src
	if c != nil {
		dst := next(c.Width, c.Height)
		if err := pixels.Crop(dst, img, c.X, c.Y); err != nil {
			return nil, fmt.Errorf("executing plan: %w", err)
		}
		img = dst
	}
	// one resize after another (a view's PreResize, then its Resize), each to 8 bits
	for _, r := range resizes {
		if r == nil || (r.Width == img.W && r.Height == img.H) {
			continue
		}
		flavor, filter, err := resampler(r)
		if err != nil {
			return nil, err
		}
		dst := next(r.Width, r.Height)
		if err := pixels.Resize(dst, img, flavor, filter); err != nil {
			return nil, fmt.Errorf("executing plan: %w", err)
		}
		img = dst
	}
	return img, nil
}

// pad adds d's borders to img (none when d is nil).
func pad(img *pixels.RGB, d *abi.Pad, next func(w, h int) *pixels.RGB) (*pixels.RGB, error) {
	if d == nil {
		return img, nil
	}
	dst := next(img.W+d.Left+d.Right, img.H+d.Top+d.Bottom)
	if err := pixels.Pad(dst, img, d.Left, d.Top, d.Color); err != nil {
		return nil, fmt.Errorf("executing plan: %w", err)
	}
	return dst, nil
}

// patchify normalises img and lays it out in the patch layout into dst (reused when large
// enough), checking the grid it gives against the plan's. The tiles layout is merge_blocks
// with no merge: patches in raster order (its Merge only counts tokens).
func (p *Preparer) patchify(dst []float32, img *pixels.RGB, n abi.Normalize, pt abi.Patches, grid abi.Grid) ([]float32, error) {
	table, err := p.table(n)
	if err != nil {
		return nil, err
	}
	layout, err := patchLayout(pt)
	if err != nil {
		return nil, err
	}
	pv, gh, gw, err := pixels.NormalizePatchify(dst, img, table, layout)
	if err != nil {
		return nil, fmt.Errorf("executing plan: %w", err)
	}
	if gh != grid.H || gw != grid.W {
		return nil, fmt.Errorf("executing plan: patchify gave a %dx%d grid, the plan says %dx%d", gh, gw, grid.H, grid.W)
	}
	return pv, nil
}

// patchLayout maps a plan's patch layout to the pixel package's: the tiles layout is
// merge_blocks with no merge, patches in raster order (its Merge only counts tokens).
func patchLayout(pt abi.Patches) (pixels.Patches, error) {
	layout := pixels.Patches{Size: pt.Size, Temporal: pt.Temporal, Merge: pt.Merge}
	switch pt.Layout {
	case abi.LayoutMergeBlocks:
	case abi.LayoutTiles:
		layout.Merge = 1
	default:
		return pixels.Patches{}, fmt.Errorf("executing plan: patch layout %q is not one this host has", pt.Layout)
	}
	return layout, nil
}

// resampler maps a plan's resize (the ABI's flavour and filter names) to the pixels package's.
func resampler(r *abi.Resize) (pixels.Flavor, pixels.Filter, error) {
	flavor, errFlavor := pixels.ParseFlavor(r.Flavor)
	filter, errFilter := pixels.ParseFilter(r.Filter)
	if errFlavor != nil || errFilter != nil || !r.Antialias {
		return 0, 0, fmt.Errorf("executing plan: resize %s/%s antialias=%t is not a resampler this host has",
			r.Flavor, r.Filter, r.Antialias)
	}
	return flavor, filter, nil
}

// table returns the normalisation table of n, building it once.
func (p *Preparer) table(n abi.Normalize) (*pixels.Table, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.tables[n]; ok {
		return t, nil
	}
	norm := pixels.Norm{Rescale: n.Rescale, Mean: n.Mean, Std: n.Std}
	switch n.Flavor {
	case abi.FlavorTorchvision:
		norm.Flavor = pixels.Torch
	case abi.FlavorPIL:
		norm.Flavor = pixels.PIL
	default:
		return nil, fmt.Errorf("executing plan: normalise flavour %q is not one this host has", n.Flavor)
	}
	t, err := norm.Table()
	if err != nil {
		return nil, fmt.Errorf("executing plan: %w", err)
	}
	if len(p.tables) < 16 { // a bundle's plugin uses a handful; bound the map all the same
		p.tables[n] = t
	}
	return t, nil
}

// tokenize encodes the frame's text around the image spans: Before, then for each span its open
// tokens, Count placeholders and close tokens, then After. Special tokens split a text before
// the tokenizer's pre-tokenisation, so encoding the pieces apart gives the ids the processor
// gets from the whole prompt. Every span's placeholder must be one token id: the engine puts
// the image's rows, in order, at the positions of that id.
func (p *Preparer) tokenize(ctx context.Context, f *abi.Frame, res *Result) error {
	_, span := p.tracer.Start(ctx, "prep.tokenize")
	defer span.End()
	before, err := p.tok.Encode(f.Before)
	if err != nil {
		return abi.Refusef("invalid_question", "the question cannot be tokenised: %v", err)
	}
	after, err := p.tok.Encode(f.After)
	if err != nil {
		return abi.Refusef("invalid_question", "the question cannot be tokenised: %v", err)
	}
	ids := func(toks []string) ([]int32, error) {
		out := make([]int32, len(toks))
		for i, t := range toks {
			id, ok := p.tok.TokenID(t)
			if !ok {
				return nil, fmt.Errorf("framing: the plugin's image-span token %q is not a special token of this tokenizer", t)
			}
			out[i] = id
		}
		return out, nil
	}
	spans := f.ImageSpans()
	type pieces struct {
		open, closing []int32
		pad           int32
	}
	ps := make([]pieces, len(spans))
	n := len(before) + len(after)
	for i, s := range spans {
		if ps[i].open, err = ids(s.Open); err != nil {
			return err
		}
		if ps[i].closing, err = ids(s.Close); err != nil {
			return err
		}
		pad, err := ids([]string{s.Pad})
		if err != nil {
			return err
		}
		ps[i].pad = pad[0]
		if ps[i].pad != ps[0].pad {
			return fmt.Errorf("framing: image span %d's placeholder %q is not span 0's %q; the engine fills one placeholder token",
				i, s.Pad, spans[0].Pad)
		}
		n += len(ps[i].open) + s.Count + len(ps[i].closing)
	}
	input := make([]int32, 0, n)
	types := make([]int32, n)
	input = append(input, before...)
	res.ImageSpans = make([]Span, len(spans))
	for i, s := range spans {
		input = append(input, ps[i].open...)
		start := len(input)
		for range s.Count {
			input = append(input, ps[i].pad)
		}
		for j := start; j < len(input); j++ {
			types[j] = 1
		}
		res.ImageSpans[i] = Span{Start: start, Len: s.Count}
		input = append(input, ps[i].closing...)
	}
	input = append(input, after...)
	res.InputIDs, res.MMTokenTypeIDs = input, types
	span.SetAttributes(attribute.Int("iris.prompt_tokens", n))
	return nil
}
