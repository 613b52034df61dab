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
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Validate checks a plan made for an image of size src. It treats the plan as untrusted: every
// size is bounded and every derived number (canvas, grids, token count) must agree, so a host
// that executes a validated plan never allocates more than the plan's pixel tensor.
func (p *Plan) Validate(src Size) error {
	if p.Source != src {
		return invalid("plan is for a %dx%d image, the image is %dx%d", p.Source.Width, p.Source.Height, src.Width, src.Height)
	}
	if err := checkSize("source", p.Source.Width, p.Source.Height); err != nil {
		return err
	}
	if c := p.Crop; c != nil {
		if c.X < 0 || c.Y < 0 || c.Width < 1 || c.Height < 1 || c.X > p.Source.Width-c.Width || c.Y > p.Source.Height-c.Height {
			return invalid("crop %+v is not inside the %dx%d source", *c, p.Source.Width, p.Source.Height)
		}
	}
	if r := p.Resize; r != nil {
		if err := checkSize("resize", r.Width, r.Height); err != nil {
			return err
		}
		if r.Filter != FilterBicubic && r.Filter != FilterBilinear {
			return invalid("resize filter %q is not %q or %q", r.Filter, FilterBicubic, FilterBilinear)
		}
		if r.Flavor != FlavorTorchvision && r.Flavor != FlavorPIL {
			return invalid("resize flavor %q is not %q or %q", r.Flavor, FlavorTorchvision, FlavorPIL)
		}
	}
	if d := p.Pad; d != nil {
		for _, v := range [...]int{d.Top, d.Right, d.Bottom, d.Left} {
			if v < 0 || v > MaxSide {
				return invalid("pad %+v has a side outside [0, %d]", *d, MaxSide)
			}
		}
	}
	canvas := p.Canvas()
	if err := checkSize("canvas", canvas.Width, canvas.Height); err != nil {
		return err
	}
	if err := p.Normalize.validate(); err != nil {
		return err
	}
	pt := p.Patches
	if pt.Size < 1 || pt.Size > 64 || pt.Temporal < 1 || pt.Temporal > 8 || pt.Merge < 1 || pt.Merge > 8 {
		return invalid("patches %+v outside size [1,64], temporal [1,8], merge [1,8]", pt)
	}
	if pt.Layout != LayoutMergeBlocks {
		return invalid("patch layout %q is not %q", pt.Layout, LayoutMergeBlocks)
	}
	unit := pt.Size * pt.Merge
	if canvas.Width%unit != 0 || canvas.Height%unit != 0 {
		return invalid("canvas %dx%d is not a multiple of patch size × merge = %d", canvas.Width, canvas.Height, unit)
	}
	want := Grid{T: 1, H: canvas.Height / pt.Size, W: canvas.Width / pt.Size}
	if p.Grid != want {
		return invalid("grid %+v, the canvas gives %+v", p.Grid, want)
	}
	llm := Grid{T: want.T, H: want.H / pt.Merge, W: want.W / pt.Merge}
	if p.LLMGrid != llm {
		return invalid("llm grid %+v, the canvas gives %+v", p.LLMGrid, llm)
	}
	if p.ImageTokens != llm.Cells() || p.ImageTokens > MaxImageTokens {
		return invalid("image tokens %d, the llm grid gives %d (at most %d)", p.ImageTokens, llm.Cells(), MaxImageTokens)
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

// Validate checks a frame against the plan it was made for.
func (f *Frame) Validate(p *Plan) error {
	s := &f.Span
	if s.Count != p.ImageTokens {
		return invalid("image span has %d placeholders, the plan has %d image tokens", s.Count, p.ImageTokens)
	}
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

func checkToken(what, t string) error {
	if t == "" || len(t) > MaxTokenText || !utf8.ValidString(t) {
		return invalid("image span %s token %q: want 1 to %d bytes of UTF-8", what, t, MaxTokenText)
	}
	return nil
}

// Validate checks a description against this ABI version.
func (d *Description) Validate() error {
	if d.ABI != Version {
		return invalid("description says ABI v%d, this package is v%d", d.ABI, Version)
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
