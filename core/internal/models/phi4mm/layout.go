package phi4mm

import (
	"fmt"
	"math"
	"sync"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// An image is Grid.T views of FixedGrid x FixedGrid patches: the global view first, then the
// crops of its canvas row-major (Phi4MultimodalImageProcessor's image_pixel_values), each with
// its patch mask (the valid rectangle from the crop's corner) and, for more than one crop, its
// place on the canvas (model.Image.Tiles). Phi4MultimodalImageEmbedding pools each view's patch
// features 2x2 into (FixedGrid/2)^2 cells, stitches the crops' cells into one map of the canvas,
// keeps the map's valid region, and lays the image's tokens out as: each kept row of the map
// followed by the sub-image separator (sub_img_feature_extensor), the global separator
// (global_img_feature_extensor), then each row of the global view's cells followed by the
// sub-image separator.

// layout is one image's HD layout.
type layout struct {
	views      int // 1 + crops
	rows, cols int // the crops' grid
	side       int // cells a side of a view: FixedGrid / 2
	// usefulH and usefulW are the stitched map's kept rows and columns of cells: the kept cells
	// (mask[0::2, 0::2]) of the first column of crops, of the first row of crops.
	usefulH, usefulW int
}

// tokens is the image's placeholder count: the kept map's rows, each with its separator, the
// global separator, and the global view's rows, each with its separator.
func (l layout) tokens() int { return l.usefulH*(l.usefulW+1) + 1 + l.side*(l.side+1) }

// kept is how many of n valid patches from a view's edge the pooling's [0::2] subsampling of
// the mask keeps: the cells whose first patch is valid.
func kept(n int) int { return (n + 1) / 2 }

// imageLayout checks img against the family's layout and returns it: fixed square views, at
// least one crop, patch masks from each view's corner (the reference counts a mask's first row
// and column), and crops placed row-major on a grid of whole views (Tiles; one crop needs none).
func imageLayout(v *model.VisionConfig, img *model.Image) (layout, error) {
	g, f := img.Grid, v.FixedGrid
	if f <= 0 || f%2 != 0 || v.MergeSize != 2 {
		return layout{}, fmt.Errorf("a tower of %d-patch views pooled %dx%d: %w", f, v.MergeSize, v.MergeSize, model.ErrUnsupported)
	}
	if g.H != f || g.W != f || g.T < 2 {
		return layout{}, fmt.Errorf("grid %v: a global view and at least one crop of %dx%d patches: %w", g, f, f, ml.ErrInvalidInput)
	}
	if err := img.CheckMasks(); err != nil {
		return layout{}, err
	}
	if err := img.CheckTiles(); err != nil {
		return layout{}, err
	}
	for t := range g.T {
		if m := img.Mask(t); m.X != 0 || m.Y != 0 {
			return layout{}, fmt.Errorf("view %d: patch mask %+v does not start at the view's corner: %w", t, m, ml.ErrInvalidInput)
		}
	}
	l := layout{views: g.T, side: f / 2, rows: 1, cols: 1}
	crops := g.T - 1
	if img.Tiles == nil {
		if crops > 1 {
			return layout{}, fmt.Errorf("%d crops without their places on the canvas: %w", crops, ml.ErrInvalidInput)
		}
	} else {
		if img.Tiles[0] != (model.PatchRect{}) {
			return layout{}, fmt.Errorf("view 0 (the global view) placed at %+v, not the whole canvas: %w", img.Tiles[0], ml.ErrInvalidInput)
		}
		right := 0
		for _, r := range img.Tiles[1:] {
			right = max(right, r.X)
		}
		l.cols = right/f + 1
		l.rows = crops / l.cols
		if l.rows*l.cols != crops {
			return layout{}, fmt.Errorf("%d crops on a grid %d crops wide: %w", crops, l.cols, ml.ErrInvalidInput)
		}
		for i, r := range img.Tiles[1:] {
			if want := (model.PatchRect{X: i % l.cols * f, Y: i / l.cols * f, W: f, H: f}); r != want {
				return layout{}, fmt.Errorf("crop %d placed at %+v, want %+v (row-major on a %dx%d grid): %w", i, r, want, l.rows, l.cols, ml.ErrInvalidInput)
			}
		}
	}
	for r := range l.rows {
		l.usefulH += kept(img.Mask(1 + r*l.cols).H)
	}
	for c := range l.cols {
		l.usefulW += kept(img.Mask(1 + c).W)
	}
	return l, nil
}

// imageTokens is the family's model.ConfigDefaults.ImageTokens.
func imageTokens(cfg *model.Config, img *model.Image) (int, error) {
	l, err := imageLayout(&cfg.Vision, img)
	if err != nil {
		return 0, err
	}
	return l.tokens(), nil
}

// positionIDs are Phi4MultimodalVisionEmbeddings.forward's position ids of a view of side x side
// patches whose valid patches are m (from the corner): the valid rows and columns stretched over
// the side x side position table by bucketising their fractional coordinates, in float32 as the
// reference (step = 1/n, i*step clamped to 1-1e-6, bucketize right=True over
// torch.arange(1/side, 1, 1/side)); padding patches get 0. Row-major, side*side ids.
func positionIDs(side int, m model.PatchRect) []int32 {
	bounds := boundaries(side)
	bucket := func(n int) []int32 {
		step := float32(1) / float32(n)
		out := make([]int32, side)
		for i := range out {
			frac := min(float32(i)*step, float32(1-1e-6))
			// bucketize(right=True): how many boundaries lie at or below frac
			for _, b := range bounds {
				if b <= frac {
					out[i]++
				}
			}
		}
		return out
	}
	bh, bw := bucket(m.H), bucket(m.W)
	ids := make([]int32, side*side)
	for y := range side {
		for x := range side {
			if m.Contains(y, x) {
				ids[y*side+x] = bh[y]*int32(side) + bw[x]
			}
		}
	}
	return ids
}

// boundaries is torch.arange(1/side, 1.0, 1/side) in float32: ceil((1 - s)/s) values s + s*i
// computed in float64 (the CPU kernel's accumulation type) and rounded once (s = 1/side).
func boundaries(side int) []float32 {
	s := 1 / float64(side)
	n := int(math.Ceil((1 - s) / s))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(s + float64(s*float64(i)))
	}
	return out
}

// towerPlan is the host-side layout of one tower pass over some images' views: the position id
// and key flag of every patch row, the views' attention segments, and the stitched token rows
// as pooling taps into the table of the tower's final rows (patches, then sub_GN, glb_GN and a
// zero row).
type towerPlan struct {
	patches, tokens int
	posIDs, keys    []int32
	bounds          []int32
	// taps holds 4 table rows a token (the 2x2 patches of a cell in AvgPool2d's summation order:
	// (2i, 2j), (2i, 2j+1), (2i+1, 2j), (2i+1, 2j+1)), weights their 4 weights (0.25 each; a
	// separator is its row once, weights 1, 0, 0, 0); zeros points every token at the zero row.
	taps    []int32
	weights []float32
	zeros   []int32
	// ones weighs each patch's position row once; rows are 0, 1, ..., patches-1 (the residual's
	// final add, row for row)
	ones []float32
	rows []int32
}

// planTower lays out the images' views one after the other (their layouts checked).
func planTower(v *model.VisionConfig, imgs []model.Image, ls []layout) *towerPlan {
	f := v.FixedGrid
	per := f * f
	p := &towerPlan{}
	for _, l := range ls {
		p.patches += l.views * per
		p.tokens += l.tokens()
	}
	sub, glb, zero := int32(p.patches), int32(p.patches+1), int32(p.patches+2)
	p.posIDs = make([]int32, 0, p.patches)
	p.keys = make([]int32, 0, p.patches)
	p.bounds = make([]int32, 0, p.patches/per+1)
	p.taps = make([]int32, 0, 4*p.tokens)
	p.weights = make([]float32, 0, 4*p.tokens)
	p.zeros = make([]int32, p.tokens)
	for i := range p.zeros {
		p.zeros[i] = zero
	}
	p.ones = make([]float32, p.patches)
	p.rows = make([]int32, p.patches)
	for i := range p.ones {
		p.ones[i], p.rows[i] = 1, int32(i)
	}
	cell := func(view, i, j int) {
		base := int32(view*per + 2*i*f + 2*j)
		p.taps = append(p.taps, base, base+1, base+int32(f), base+int32(f)+1)
		p.weights = append(p.weights, 0.25, 0.25, 0.25, 0.25)
	}
	sep := func(row int32) {
		p.taps = append(p.taps, row, row, row, row)
		p.weights = append(p.weights, 1, 0, 0, 0)
	}
	first := 0 // the image's first view in the pass
	for k, l := range ls {
		img := &imgs[k]
		for t := range l.views {
			p.bounds = append(p.bounds, int32((first+t)*per))
			m := img.Mask(t)
			p.posIDs = append(p.posIDs, positionIDs(f, m)...)
			for y := range f {
				for x := range f {
					key := int32(0)
					if m.Contains(y, x) {
						key = 1
					}
					p.keys = append(p.keys, key)
				}
			}
		}
		// the stitched crops' kept region, a separator after each row
		for r := range l.usefulH {
			for c := range l.usefulW {
				crop := (r/l.side)*l.cols + c/l.side
				cell(first+1+crop, r%l.side, c%l.side)
			}
			sep(sub)
		}
		sep(glb)
		// the global view, a separator after each row
		for i := range l.side {
			for j := range l.side {
				cell(first, i, j)
			}
			sep(sub)
		}
		first += l.views
	}
	p.bounds = append(p.bounds, int32(p.patches))
	return p
}

// towerCache keeps the plans of the image shapes seen (a shape: each image's masks and tiles),
// a few hundred at most in practice (dynamic_hd's grids times the padded crops' masks).
type towerCache struct {
	mu    sync.Mutex
	plans map[string]*towerPlan
}

// maxPlans bounds the cache; past it the plans are dropped and made again.
const maxPlans = 512

func (c *towerCache) get(v *model.VisionConfig, imgs []model.Image, ls []layout) *towerPlan {
	key := fmt.Sprint(len(imgs))
	for i := range imgs {
		key += fmt.Sprint(imgs[i].Grid.T, imgs[i].Masks, imgs[i].Tiles)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.plans[key]; ok {
		return p
	}
	if c.plans == nil || len(c.plans) >= maxPlans {
		c.plans = map[string]*towerPlan{}
	}
	p := planTower(v, imgs, ls)
	c.plans[key] = p
	return p
}

// scaleOf is 1/sqrt(d) in float32: a head's attention scale (head_dim**-0.5).
func scaleOf(d int) float32 { return float32(1 / math.Sqrt(float64(d))) }
