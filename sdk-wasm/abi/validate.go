package abi

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// Bounds every valid message respects, whatever the family.
const (
	// MaxSide bounds every image side a plan names, in pixels.
	MaxSide = 1 << 15
	// MaxImageTokens bounds the image span of one image.
	MaxImageTokens = 1 << 20
	// MaxTokenText bounds a special-token string in an image span.
	MaxTokenText = 64
	// MaxStopTokens bounds Frame.StopTokenIDs.
	MaxStopTokens = 16
	// MaxViews bounds Plan.Views (ABI 2). InternVL's largest configurations cut 40 tiles and a
	// thumbnail; 64 leaves room without letting a plugin make thousands of tiny views.
	MaxViews = 64
	// MaxSpans bounds Frame.Spans (ABI 2): at most one span per view.
	MaxSpans = MaxViews
	// MaxViewPixels bounds the sum of the views' canvas areas (a view with a FloatResize counts
	// its padded canvas and its resized one, a view with a PreResize its first resize's image
	// too), so that a plan of many views costs the host no more pixel work than the largest
	// single-view plan would (MaxSide² = 2^30 pixels at most, whatever the view count).
	MaxViewPixels = MaxSide * MaxSide
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Validate checks a plan made for an image of size src. It treats the plan as untrusted: every
// size is bounded and every derived number (canvas, grids, token count) must agree, so a host
// that executes a validated plan never allocates more than the plan's pixel tensor.
//
// A plan with views (ABI 2) has zero single-view fields; each view is checked as a single-view
// plan is, plus its region, its float resize and its mask; the views number at most
// [MaxViews], their canvases together cover at most [MaxViewPixels], and their tokens plus the
// separator tokens sum to ImageTokens. Whether the plugin may send views at all (it speaks ABI
// 2) is the host's check, not this one.
func (p *Plan) Validate(src Size) error {
	if p.Source != src {
		return invalid("plan is for a %dx%d image, the image is %dx%d", p.Source.Width, p.Source.Height, src.Width, src.Height)
	}
	if err := checkSize("source", p.Source.Width, p.Source.Height); err != nil {
		return err
	}
	if len(p.Views) > 0 {
		return p.validateViews()
	}
	if p.SeparatorTokens != 0 {
		return invalid("separator tokens %d in a plan without views", p.SeparatorTokens)
	}
	if err := checkCrop(p.Crop, p.Source); err != nil {
		return err
	}
	if err := checkResize(p.Resize); err != nil {
		return err
	}
	if err := checkPad(p.Pad); err != nil {
		return err
	}
	if p.Patches.Layout != LayoutMergeBlocks {
		return invalid("patch layout %q is not %q", p.Patches.Layout, LayoutMergeBlocks)
	}
	return checkPatchify(p.Canvas(), p.Normalize, p.Patches, p.Grid, p.LLMGrid, p.ImageTokens)
}

func (p *Plan) validateViews() error {
	if p.Crop != nil || p.Resize != nil || p.Pad != nil || p.Normalize != (Normalize{}) || p.Patches != (Patches{}) ||
		p.Grid != (Grid{}) || p.LLMGrid != (Grid{}) {
		return invalid("a plan with views sets single-view fields too (crop, resize, pad, normalize, patches, grid or llm grid)")
	}
	if len(p.Views) > MaxViews {
		return invalid("%d views, at most %d", len(p.Views), MaxViews)
	}
	if s := p.SeparatorTokens; s < 0 || s > MaxImageTokens {
		return invalid("separator tokens %d outside [0, %d]", s, MaxImageTokens)
	}
	tokens, area := 0, 0
	for i := range p.Views {
		v := &p.Views[i]
		if err := v.validate(p.Source); err != nil {
			return fmt.Errorf("view %d: %w", i, err)
		}
		tokens += v.ImageTokens
		c := v.Padded(p.Source)
		area += c.Width * c.Height
		if v.FloatResize != nil {
			area += v.FloatResize.Width * v.FloatResize.Height
		}
		if v.PreResize != nil {
			area += v.PreResize.Width * v.PreResize.Height
		}
		if tokens > MaxImageTokens || area > MaxViewPixels {
			return invalid("views 0 to %d already make %d image tokens (at most %d) over %d canvas pixels (at most %d)",
				i, tokens, MaxImageTokens, area, MaxViewPixels)
		}
	}
	switch s := p.SeparatorTokens; {
	case s == 0 && p.ImageTokens != tokens:
		return invalid("image tokens %d, the views give %d", p.ImageTokens, tokens)
	case s != 0 && p.ImageTokens != tokens+s:
		return invalid("image tokens %d, the views give %d and the separators %d", p.ImageTokens, tokens, s)
	}
	return nil
}

func (v *View) validate(src Size) error {
	if err := checkCrop(v.Crop, src); err != nil {
		return err
	}
	if v.PreResize != nil {
		if v.Resize == nil {
			return invalid("a pre-resize without a resize (one resize is Resize)")
		}
		if err := checkResize(v.PreResize); err != nil {
			return fmt.Errorf("pre-resize: %w", err)
		}
	}
	if err := checkResize(v.Resize); err != nil {
		return err
	}
	if g := v.Region; g != nil {
		rs := v.Resized(src)
		if g.X < 0 || g.Y < 0 || g.Width < 1 || g.Height < 1 || g.X > rs.Width-g.Width || g.Y > rs.Height-g.Height {
			return invalid("region %+v is not inside the %dx%d resized image", *g, rs.Width, rs.Height)
		}
	}
	if err := checkPad(v.Pad); err != nil {
		return err
	}
	if err := checkFloatResize(v.FloatResize, v.Padded(src)); err != nil {
		return err
	}
	switch pt := v.Patches; pt.Layout {
	case LayoutMergeBlocks:
	case LayoutTiles:
		if pt.Temporal != 1 {
			return invalid("patch layout %q needs temporal 1, got %d", pt.Layout, pt.Temporal)
		}
	default:
		return invalid("patch layout %q is not %q or %q", pt.Layout, LayoutMergeBlocks, LayoutTiles)
	}
	if v.Mask == nil {
		return checkPatchify(v.Canvas(src), v.Normalize, v.Patches, v.Grid, v.LLMGrid, v.ImageTokens)
	}
	// Masked: the grids as for any view, then the tokens the mask keeps.
	if err := checkPatchify(v.Canvas(src), v.Normalize, v.Patches, v.Grid, v.LLMGrid, v.LLMGrid.Cells()); err != nil {
		return err
	}
	m := *v.Mask
	if m.X < 0 || m.Y < 0 || m.Width < 1 || m.Height < 1 || m.X > v.Grid.W-m.Width || m.Y > v.Grid.H-m.Height {
		return invalid("mask %+v is not inside the %dx%d patch grid", m, v.Grid.W, v.Grid.H)
	}
	kept := v.KeptTokens()
	if kept < 1 {
		return invalid("mask %+v keeps no cell of the %dx%d llm grid", m, v.LLMGrid.W, v.LLMGrid.H)
	}
	if v.ImageTokens != kept {
		return invalid("image tokens %d, the llm grid under mask %+v keeps %d", v.ImageTokens, m, kept)
	}
	return nil
}

// checkFloatResize checks a view's float resize of its padded canvas: sizes in range, and the
// one resampler the host has for float images.
func checkFloatResize(r *Resize, padded Size) error {
	if r == nil {
		return nil
	}
	if err := checkSize("float resize", r.Width, r.Height); err != nil {
		return err
	}
	if r.Filter != FilterBicubic || r.Flavor != FlavorTorchvision || r.Antialias {
		return invalid("float resize %s/%s antialias=%t: the float resize is %s/%s without antialias",
			r.Filter, r.Flavor, r.Antialias, FilterBicubic, FlavorTorchvision)
	}
	if err := checkSize("padded canvas", padded.Width, padded.Height); err != nil {
		return err
	}
	return nil
}

func checkCrop(c *Rect, src Size) error {
	if c != nil && (c.X < 0 || c.Y < 0 || c.Width < 1 || c.Height < 1 || c.X > src.Width-c.Width || c.Y > src.Height-c.Height) {
		return invalid("crop %+v is not inside the %dx%d source", *c, src.Width, src.Height)
	}
	return nil
}

func checkResize(r *Resize) error {
	if r == nil {
		return nil
	}
	if err := checkSize("resize", r.Width, r.Height); err != nil {
		return err
	}
	if r.Filter != FilterBicubic && r.Filter != FilterBilinear {
		return invalid("resize filter %q is not %q or %q", r.Filter, FilterBicubic, FilterBilinear)
	}
	if r.Flavor != FlavorTorchvision && r.Flavor != FlavorPIL {
		return invalid("resize flavor %q is not %q or %q", r.Flavor, FlavorTorchvision, FlavorPIL)
	}
	return nil
}

func checkPad(d *Pad) error {
	if d == nil {
		return nil
	}
	for _, v := range [...]int{d.Top, d.Right, d.Bottom, d.Left} {
		if v < 0 || v > MaxSide {
			return invalid("pad %+v has a side outside [0, %d]", *d, MaxSide)
		}
	}
	return nil
}

// checkPatchify checks what a canvas becomes: the normalisation, the patch geometry, the grids
// and the token count the canvas implies.
func checkPatchify(canvas Size, n Normalize, pt Patches, grid, llmGrid Grid, tokens int) error {
	if err := checkSize("canvas", canvas.Width, canvas.Height); err != nil {
		return err
	}
	if err := n.validate(); err != nil {
		return err
	}
	if pt.Size < 1 || pt.Size > 64 || pt.Temporal < 1 || pt.Temporal > 8 || pt.Merge < 1 || pt.Merge > 8 {
		return invalid("patches %+v outside size [1,64], temporal [1,8], merge [1,8]", pt)
	}
	unit := pt.Size * pt.Merge
	if canvas.Width%unit != 0 || canvas.Height%unit != 0 {
		return invalid("canvas %dx%d is not a multiple of patch size × merge = %d", canvas.Width, canvas.Height, unit)
	}
	want := Grid{T: 1, H: canvas.Height / pt.Size, W: canvas.Width / pt.Size}
	if grid != want {
		return invalid("grid %+v, the canvas gives %+v", grid, want)
	}
	llm := Grid{T: want.T, H: want.H / pt.Merge, W: want.W / pt.Merge}
	if llmGrid != llm {
		return invalid("llm grid %+v, the canvas gives %+v", llmGrid, llm)
	}
	if tokens != llm.Cells() || tokens > MaxImageTokens {
		return invalid("image tokens %d, the llm grid gives %d (at most %d)", tokens, llm.Cells(), MaxImageTokens)
	}
	return nil
}

func checkSize(what string, w, h int) error {
	if w < 1 || h < 1 || w > MaxSide || h > MaxSide {
		return invalid("%s size %dx%d outside [1, %d]", what, w, h, MaxSide)
	}
	return nil
}

func (n *Normalize) validate() error {
	if n.Flavor != FlavorTorchvision && n.Flavor != FlavorPIL {
		return invalid("normalize flavor %q is not %q or %q", n.Flavor, FlavorTorchvision, FlavorPIL)
	}
	if !finite(n.Rescale) || n.Rescale <= 0 {
		return invalid("rescale factor %v is not a positive finite number", n.Rescale)
	}
	for c := range 3 {
		if !finite(n.Mean[c]) || !finite(n.Std[c]) || n.Std[c] == 0 {
			return invalid("mean %v / std %v: need finite values and a non-zero std", n.Mean, n.Std)
		}
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Validate checks a frame against the plan it was made for. With Spans (ABI 2) Span must be
// zero, the spans number at most [MaxSpans], each has at least one placeholder, and their counts
// sum to the plan's image tokens.
func (f *Frame) Validate(p *Plan) error {
	if len(f.Spans) > 0 {
		if !f.Span.zero() {
			return invalid("a frame with spans sets span too")
		}
		if len(f.Spans) > MaxSpans {
			return invalid("%d image spans, at most %d", len(f.Spans), MaxSpans)
		}
		total := 0
		for i := range f.Spans {
			s := &f.Spans[i]
			if s.Count < 1 || s.Count > MaxImageTokens {
				return invalid("image span %d has %d placeholders (want 1 to %d)", i, s.Count, MaxImageTokens)
			}
			if err := s.validate(); err != nil {
				return fmt.Errorf("image span %d: %w", i, err)
			}
			total += s.Count
		}
		if total != p.ImageTokens {
			return invalid("image spans have %d placeholders, the plan has %d image tokens", total, p.ImageTokens)
		}
	} else {
		if f.Span.Count != p.ImageTokens {
			return invalid("image span has %d placeholders, the plan has %d image tokens", f.Span.Count, p.ImageTokens)
		}
		if err := f.Span.validate(); err != nil {
			return err
		}
	}
	if !utf8.ValidString(f.Before) || !utf8.ValidString(f.After) {
		return invalid("prompt text is not valid UTF-8")
	}
	if len(f.StopTokenIDs) == 0 || len(f.StopTokenIDs) > MaxStopTokens {
		return invalid("%d stop tokens (want 1 to %d)", len(f.StopTokenIDs), MaxStopTokens)
	}
	for _, id := range f.StopTokenIDs {
		if id < 0 {
			return invalid("stop token id %d is negative", id)
		}
	}
	return nil
}

func (s *ImageSpan) zero() bool {
	return len(s.Open) == 0 && s.Pad == "" && s.Count == 0 && len(s.Close) == 0
}

func (s *ImageSpan) validate() error {
	if err := checkToken("pad", s.Pad); err != nil {
		return err
	}
	if len(s.Open) > 4 || len(s.Close) > 4 {
		return invalid("image span has %d open and %d close tokens (at most 4 each)", len(s.Open), len(s.Close))
	}
	for _, t := range append(append([]string{}, s.Open...), s.Close...) {
		if err := checkToken("open/close", t); err != nil {
			return err
		}
	}
	return nil
}

func checkToken(what, t string) error {
	if t == "" || len(t) > MaxTokenText || !utf8.ValidString(t) {
		return invalid("image span %s token %q: want 1 to %d bytes of UTF-8", what, t, MaxTokenText)
	}
	return nil
}

// Validate checks a description against this ABI version.
func (d *Description) Validate() error {
	if d.ABI < MinVersion || d.ABI > Version {
		return invalid("description says ABI v%d, this package speaks v%d to v%d", d.ABI, MinVersion, Version)
	}
	if !validCode(d.Family) {
		return invalid("family %q is not a snake_case name of at most 64 bytes", d.Family)
	}
	if len(d.Tasks) == 0 {
		return invalid("family %s declares no task", d.Family)
	}
	seen := map[string]bool{}
	for _, p := range d.Params {
		if !validCode(p.Name) || seen[p.Name] {
			return invalid("param name %q is not a unique snake_case name", p.Name)
		}
		seen[p.Name] = true
		if err := CheckParam(p, p.Default); err != nil {
			return invalid("default of param %s: %v", p.Name, err)
		}
	}
	if d.Limits.MinImageTokens < 0 || d.Limits.MaxImageTokens < d.Limits.MinImageTokens {
		return invalid("limits %+v: want 0 <= min <= max image tokens", d.Limits)
	}
	return nil
}
