package internvl

import (
	"math"
	"sync"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
)

// VisionOps implements kit.Family: InternVLModel.get_image_features on the tiles of images as one
// batch (a tile attends within itself, so the images' tiles simply follow one another). An
// image's pixel rows are Grid.T tiles of FixedGrid x FixedGrid patches in raster order (C x 14 x
// 14 values a row); row u of res is the projector's output for token u: the tiles in order, each
// tile's (grid/2)^2 tokens in raster order.
func (m *Model) VisionOps(b ml.Backend, imgs []model.Image, res ml.Tensor) {
	v := &m.Config().Vision
	w := &m.w
	tiles := 0
	for _, img := range imgs {
		tiles += img.Grid.T
	}
	p := m.plans.get(v, tiles)
	patches, rows := p.tiles*p.side*p.side, p.rows
	VH, VI, OH, heads := v.Hidden, v.Intermediate, v.OutHidden, v.Heads
	vhd, unit := VH/heads, v.MergeSize*v.MergeSize
	tokens := patches / unit
	eps := float32(v.NormEps)

	pix := b.Scratch("v.pix", patches, v.PatchDim())
	pe := b.Scratch("v.pe", patches, VH)
	x := [2]ml.Tensor{b.Scratch("v.x0", rows, VH), b.Scratch("v.x1", rows, VH)} // the residual, alternating
	xn := b.Scratch("v.xn", rows, VH)
	qkv := b.Scratch("v.qkv", rows, 3*VH)
	att := b.Scratch("v.att", rows, VH)
	t := b.Scratch("v.t", rows, VH)
	act := b.Scratch("v.act", rows, VI)
	sh := [2]ml.Tensor{b.Scratch("v.sh0", patches, VH), b.Scratch("v.sh1", patches, VH)}
	un := b.Scratch("v.un", tokens, unit*VH)
	h1 := b.Scratch("v.h1", tokens, OH)
	ones := b.Input(p.ones, rows, 1)
	if b.Err() != nil {
		return
	}

	// InternVLVisionEmbeddings: the patches (Conv2d with kernel = stride, one product), the CLS
	// token before each tile's, then + position_embeddings (the table's rows in tile order; the
	// grid is the table's own, so no interpolation)
	kit.WritePixels(b, pix, imgs)
	b.Linears(pix, ml.Out{Y: pe, W: w.patch, B: w.patchB})
	b.Scatter(x[0], pe, b.Ints(p.patchRows))
	b.Gather(x[0].Reshape(tiles, p.tileRows*VH).ColsAt(0, VH), w.cls, b.Ints(p.zeros))
	b.AddEmbedBag(x[0], w.pos, b.Ints(p.posIDs), ones)
	ml.Mark(b, "vision.embed")

	a := ml.Attn{Heads: heads, KVHeads: heads, HeadDim: vhd, Scale: float32(1 / math.Sqrt(float64(vhd)))}
	q, k, val := qkv.ColsAt(0, VH), qkv.ColsAt(VH, VH), qkv.ColsAt(2*VH, VH)
	r := 0 // x[r] holds the residual, x[r] + delta the hidden states
	delta := ml.Tensor{}
	for l := range w.blocks {
		B := &w.blocks[l]
		// self.attention(self.layernorm_before(hidden_states)): the previous block's scaled MLP
		// output is added inside the norm
		b.LayerNorm(xn, x[1-r], x[r], delta, B.norm1, B.norm1B, eps)
		r ^= 1
		b.Linears(xn, ml.Out{Y: q, W: B.q, B: B.qB}, ml.Out{Y: k, W: B.k, B: B.kB}, ml.Out{Y: val, W: B.v, B: B.vB})
		// full attention within each tile (the tiles are a batch)
		b.SegmentAttention(att, q, k, val, p.bounds, a)
		b.Linears(att, ml.Out{Y: t, W: B.proj, B: B.projB})
		// attention_output = self.lambda_1 * attention_output; hidden_states = attention_output
		// + hidden_states, then self.layernorm_after
		b.ScaleCols(t, B.lambda1)
		b.LayerNorm(xn, x[1-r], x[r], t, B.norm2, B.norm2B, eps)
		r ^= 1
		// self.mlp: fc1, GELU (erf), fc2; then self.lambda_2 * layer_output, added by the next
		// norm (or below)
		b.Linears(xn, ml.Out{Y: act, W: B.fc1, B: B.fc1B})
		b.GELU(act, ml.GELUErf)
		b.Linears(act, ml.Out{Y: t, W: B.fc2, B: B.fc2B})
		b.ScaleCols(t, B.lambda2)
		delta = t
	}
	ml.Mark(b, "vision.blocks")

	// vision_features[:, 1:, :] then pixel_shuffle: the patch rows of each token's 2x2 block,
	// gathered next to one another from the residual and from the last block's output (the
	// projector's norm adds them), so that unit rows are one row of the shuffled features
	b.Gather(sh[0], x[r], b.Ints(p.shuffle))
	b.Gather(sh[1], delta, b.Ints(p.shuffle))
	// multi_modal_projector: LayerNorm (eps 1e-5), linear_1, GELU, linear_2
	b.LayerNorm(un, sh[0].Reshape(tokens, unit*VH), sh[0].Reshape(tokens, unit*VH), sh[1].Reshape(tokens, unit*VH),
		w.projNorm, w.projNormB, projectorEps)
	b.Linears(un, ml.Out{Y: h1, W: w.fc1, B: w.fc1B})
	b.GELU(h1, ml.GELUErf)
	b.Linears(h1, ml.Out{Y: res, W: w.fc2, B: w.fc2B})
	ml.Mark(b, "vision.projector")
}

// tilePlan is the host-side layout of an image of some number of tiles: where each patch row
// goes among the tower's rows (a CLS row first in each tile), the attention segments, the
// position table's row for each tower row, and the pixel shuffle as a row order.
type tilePlan struct {
	tiles, side, tileRows, rows int
	patchRows                   []int32 // tower row of patch i (tile-major, raster in a tile)
	zeros                       []int32 // the CLS token's row, once a tile
	posIDs                      []int32 // position table row of each tower row
	ones                        []float32
	bounds                      []int32 // tile segments of the tower's rows
	// shuffle lists, token after token (tile-major, raster over the (side/2)^2 tokens of a tile),
	// the tower rows of the token's 2x2 patches in the order pixel_shuffle concatenates them:
	// (2r, 2c), (2r, 2c+1), (2r+1, 2c), (2r+1, 2c+1).
	shuffle []int32
}

// newTilePlan lays out tiles tiles of side x side patches, merged merge x merge.
func newTilePlan(tiles, side, merge int) *tilePlan {
	per := side * side
	p := &tilePlan{tiles: tiles, side: side, tileRows: 1 + per, rows: tiles * (1 + per)}
	p.zeros = make([]int32, tiles)
	p.ones = make([]float32, p.rows)
	for i := range p.ones {
		p.ones[i] = 1
	}
	for t := range tiles {
		base := int32(t * p.tileRows)
		p.bounds = append(p.bounds, base)
		for j := range p.tileRows {
			p.posIDs = append(p.posIDs, int32(j))
		}
		for i := range per {
			p.patchRows = append(p.patchRows, base+1+int32(i))
		}
		for r := 0; r < side; r += merge {
			for c := 0; c < side; c += merge {
				for dr := range merge {
					for dc := range merge {
						p.shuffle = append(p.shuffle, base+1+int32((r+dr)*side+c+dc))
					}
				}
			}
		}
	}
	p.bounds = append(p.bounds, int32(p.rows))
	return p
}

// planCache keeps the plan of each tile count seen: at most the tiles of a tower pass (an
// image's limit, or the scheduler's patch budget over several images) of them.
type planCache struct {
	mu    sync.Mutex
	plans map[int]*tilePlan
}

func (c *planCache) get(v *model.VisionConfig, tiles int) *tilePlan {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.plans[tiles]; ok {
		return p
	}
	if c.plans == nil {
		c.plans = map[int]*tilePlan{}
	}
	p := newTilePlan(tiles, v.FixedGrid, v.MergeSize)
	c.plans[tiles] = p
	return p
}
