package deepseekocr2

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// VisionConfig is DeepseekOcr2VisionConfig (sam_config, encoder_config) and the sizes the
// projector joins it to the text model by.
type VisionConfig struct {
	SAM struct {
		Hidden, Layers, Heads, MLP, Window int
		Global                             []int // the layers of global attention
		OutChannels                        int   // the neck's
		Down                               [2]int
		ImageSize, Patch                   int
		Eps                                float64
	}
	Encoder struct {
		Hidden, Layers, Heads, KVHeads, Intermediate int
		Eps, Theta                                   float64
	}
	// TextHidden is the projector's output width.
	TextHidden int
}

// PosSide is the position table's side in patches (64: a 1024 view).
func (c *VisionConfig) PosSide() int { return c.SAM.ImageSize / c.SAM.Patch }

// tilePixels is a local tile's side (DeepseekOcr2ImageProcessor's tile_size): the model's
// 144 queries are a 768 tile's.
const tilePixels = 768

// Weight name prefixes: transformers 5's module paths, then save_pretrained's.
var (
	towerPrefixes     = []string{"model.vision_tower.", "vision_tower."}
	projectorPrefixes = []string{"model.multi_modal_projector.", "multi_modal_projector."}
	rootPrefixes      = []string{"model.", ""}
)

// samLayer is DeepseekOcr2SamVisionLayer: LayerNorm, attention (windowed or global) with a
// decomposed relative-position bias, LayerNorm, a GELU MLP.
type samLayer struct {
	norm1, norm1B, norm2, norm2B ml.Tensor
	q, kv, qB, kvB               ml.Tensor // qkv split: q's rows, then k's and v's
	proj, projB                  ml.Tensor
	relH, relW                   ml.Tensor // (2·size − 1) x head dim
	fc1, fc1B, fc2, fc2B         ml.Tensor
	window                       bool
}

// encoderLayer is DeepseekOcr2VisionEncoderLayer (a Qwen2 decoder layer run as an encoder).
type encoderLayer struct {
	attnNorm, mlpNorm   ml.Tensor
	q, k, v, qB, kB, vB ml.Tensor
	o                   ml.Tensor
	gate, up, down      ml.Tensor
}

// Vision is the tower's weights on a backend: DeepseekOcr2VisionModel, the projector and the
// view separator.
type Vision struct {
	cfg                   VisionConfig
	patch, patchB, pos    ml.Tensor
	sam                   []samLayer
	neck1, neck2          ml.Tensor // ConvTaps of the 1x1 and 3x3 convolutions
	neckN1, neckN1B       ml.Tensor
	neckN2, neckN2B       ml.Tensor
	down1, down2          ml.Tensor // the two stride-2 convolutions
	enc                   []encoderLayer
	encNorm               ml.Tensor
	query768, query1024   ml.Tensor
	projector, projectorB ml.Tensor
	separator             ml.Tensor

	mu    sync.Mutex
	plans map[int]*viewPlan
}

// BindVision binds the tower, the projector and the view separator.
func BindVision(ld *ml.Loader, cfg VisionConfig) *Vision {
	v := &Vision{cfg: cfg, plans: map[int]*viewPlan{}}
	s, e := &cfg.SAM, &cfg.Encoder
	l := detectLayout(ld)
	tower, n := l.tower, l.name
	H, hd, side := s.Hidden, s.Hidden/s.Heads, v.cfg.PosSide()
	v.patch = ld.Matrix(tower, n("sam_encoder.patch_embed.projection.weight"), H, 3*s.Patch*s.Patch)
	v.patchB = ld.Vector(tower, n("sam_encoder.patch_embed.projection.bias"), H)
	v.pos = ld.Rows(tower, n("sam_encoder.pos_embed"), side, side*H).Reshape(side*side, H)
	v.sam = make([]samLayer, s.Layers)
	for l := range v.sam {
		L := &v.sam[l]
		p := fmt.Sprintf("sam_encoder.layers.%d.", l)
		L.window = s.Window > 0 && !slices.Contains(s.Global, l)
		size := side
		if L.window {
			size = s.Window
		}
		L.norm1 = ld.Vector(tower, n(p+"layer_norm1.weight"), H)
		L.norm1B = ld.Vector(tower, n(p+"layer_norm1.bias"), H)
		qkv := ld.Matrix(tower, n(p+"attn.qkv.weight"), 3*H, H)
		L.q, L.kv = qkv.RowsAt(0, H), qkv.RowsAt(H, 2*H)
		qkvB := ld.Vector(tower, n(p+"attn.qkv.bias"), 3*H)
		L.qB, L.kvB = qkvB.ColsAt(0, H), qkvB.ColsAt(H, 2*H)
		L.proj = ld.Matrix(tower, n(p+"attn.proj.weight"), H, H)
		L.projB = ld.Vector(tower, n(p+"attn.proj.bias"), H)
		L.relH = ld.Matrix(tower, n(p+"attn.rel_pos_h"), 2*size-1, hd)
		L.relW = ld.Matrix(tower, n(p+"attn.rel_pos_w"), 2*size-1, hd)
		L.norm2 = ld.Vector(tower, n(p+"layer_norm2.weight"), H)
		L.norm2B = ld.Vector(tower, n(p+"layer_norm2.bias"), H)
		L.fc1 = ld.Matrix(tower, n(p+"mlp.lin1.weight"), s.MLP, H)
		L.fc1B = ld.Vector(tower, n(p+"mlp.lin1.bias"), s.MLP)
		L.fc2 = ld.Matrix(tower, n(p+"mlp.lin2.weight"), H, s.MLP)
		L.fc2B = ld.Vector(tower, n(p+"mlp.lin2.bias"), H)
	}
	C := s.OutChannels
	v.neck1 = ld.ConvTaps(tower, n("sam_encoder.neck.conv1.weight"), C, H, 1, 1)
	v.neckN1 = ld.Vector(tower, n("sam_encoder.neck.layer_norm1.weight"), C)
	v.neckN1B = ld.Vector(tower, n("sam_encoder.neck.layer_norm1.bias"), C)
	v.neck2 = ld.ConvTaps(tower, n("sam_encoder.neck.conv2.weight"), C, C, 3, 3)
	v.neckN2 = ld.Vector(tower, n("sam_encoder.neck.layer_norm2.weight"), C)
	v.neckN2B = ld.Vector(tower, n("sam_encoder.neck.layer_norm2.bias"), C)
	v.down1 = ld.ConvTaps(tower, n("sam_encoder.proj.conv1.weight"), s.Down[0], C, 3, 3)
	v.down2 = ld.ConvTaps(tower, n("sam_encoder.proj.conv2.weight"), s.Down[1], s.Down[0], 3, 3)

	EH, ehd := e.Hidden, e.Hidden/e.Heads
	v.enc = make([]encoderLayer, e.Layers)
	for l := range v.enc {
		L := &v.enc[l]
		p := fmt.Sprintf("vision_encoder.layers.%d.", l)
		L.attnNorm = ld.Vector(tower, n(p+"input_layernorm.weight"), EH)
		L.q = ld.Matrix(tower, n(p+"self_attn.q_proj.weight"), e.Heads*ehd, EH)
		L.k = ld.Matrix(tower, n(p+"self_attn.k_proj.weight"), e.KVHeads*ehd, EH)
		L.v = ld.Matrix(tower, n(p+"self_attn.v_proj.weight"), e.KVHeads*ehd, EH)
		L.qB = ld.Vector(tower, n(p+"self_attn.q_proj.bias"), e.Heads*ehd)
		L.kB = ld.Vector(tower, n(p+"self_attn.k_proj.bias"), e.KVHeads*ehd)
		L.vB = ld.Vector(tower, n(p+"self_attn.v_proj.bias"), e.KVHeads*ehd)
		L.o = ld.Matrix(tower, n(p+"self_attn.o_proj.weight"), EH, e.Heads*ehd)
		L.mlpNorm = ld.Vector(tower, n(p+"post_attention_layernorm.weight"), EH)
		gu := ld.Matrices(tower, []string{n(p + "mlp.gate_proj.weight"), n(p + "mlp.up_proj.weight")}, e.Intermediate, EH)
		L.gate, L.up = gu[0], gu[1]
		L.down = ld.Matrix(tower, n(p+"mlp.down_proj.weight"), EH, e.Intermediate)
	}
	v.encNorm = ld.Vector(tower, n("vision_encoder.norm.weight"), EH)
	v.query768 = ld.Rows(tower, n("query_768_resolution.weight"), 144, EH)
	v.query1024 = ld.Rows(tower, n("query_1024_resolution.weight"), 256, EH)
	v.projector = ld.Matrix(l.projector, "weight", cfg.TextHidden, EH)
	v.projectorB = ld.Vector(l.projector, "bias", cfg.TextHidden)
	v.separator = ld.Vector(l.root, l.separator(), cfg.TextHidden)
	return v
}

// viewPlan is the host-side layout of a view of side x side patches: its patch rows among the
// image's 64x64, the position taps, the windows, each attention's relative-position gathers,
// the convolutions, and the encoder's rotary angles.
type viewPlan struct {
	side, tokens   int // patches a side; the encoder's SAM tokens (= its queries)
	patchRows      []int32
	pos            PosTaps
	posW           []float32
	win            WindowPlan
	relWin, relAll relGather // the bias gathers of windowed and global layers
	relRowsW       []float32 // the global tables' resampling taps: weights (2·side−1) x 2
	relRowsIDs     []int32
	neck           ConvPlan
	down1, down2   ConvPlan
	cos, sin       []float32 // the encoder's angles, 2·tokens rows of head dim / 2
}

// relGather picks a decomposed bias out of the products of q with a relative-position table of
// 2·size − 1 rows: for query row i (of rows), head h and key coordinate k, the product's column
// coord(i) − k + size − 1, as a gather of single values (H along the key rows, W along the
// columns).
type relGather struct {
	size, rows int
	h, w       []int32
}

func newRelGather(rows, heads, size int, coordH, coordW func(i int) int) relGather {
	g := relGather{size: size, rows: rows}
	n := 2*size - 1
	g.h = make([]int32, 0, rows*heads*size)
	g.w = make([]int32, 0, rows*heads*size)
	for i := range rows {
		for h := range heads {
			base := int32((i*heads + h) * n)
			for k := range size {
				g.h = append(g.h, base+int32(coordH(i)-k+size-1))
			}
			for k := range size {
				g.w = append(g.w, base+int32(coordW(i)-k+size-1))
			}
		}
	}
	return g
}

func (v *Vision) plan(side int) *viewPlan {
	v.mu.Lock()
	defer v.mu.Unlock()
	if p, ok := v.plans[side]; ok {
		return p
	}
	s, e := &v.cfg.SAM, &v.cfg.Encoder
	full := v.cfg.PosSide()
	p := &viewPlan{side: side}
	for y := range side {
		for x := range side {
			p.patchRows = append(p.patchRows, int32(y*full+x))
		}
	}
	p.pos = NewPosTaps(full, side)
	p.posW = p.pos.Weights
	n := side * side
	if s.Window > 0 {
		p.win = NewWindowPlan(side, side, s.Window)
		w := s.Window
		p.relWin = newRelGather(len(p.win.Rows), s.Heads, w,
			func(i int) int { return i % (w * w) / w }, func(i int) int { return i % w })
	}
	p.relAll = newRelGather(n, s.Heads, side, func(i int) int { return i / side }, func(i int) int { return i % side })
	// get_rel_pos: the global layers' tables (2·full − 1 rows) resampled to 2·side − 1
	lt := NewLinearTaps(2*full-1, 2*side-1)
	for r := range 2*side - 1 {
		p.relRowsIDs = append(p.relRowsIDs, lt.I0[r], lt.I1[r])
		p.relRowsW = append(p.relRowsW, lt.W0[r], lt.W1[r])
	}
	p.neck = NewConvPlan(side, side, 3, 1, 1)
	p.down1 = NewConvPlan(side, side, 3, 2, 1)
	p.down2 = NewConvPlan(p.down1.OutH, p.down1.OutW, 3, 2, 1)
	p.tokens = p.down2.OutH * p.down2.OutW
	// DeepseekOcr2VisionRotaryEmbedding over positions 0 .. 2·tokens − 1 (default RoPE)
	ehd := e.Hidden / e.Heads
	half := ehd / 2
	inv := make([]float32, half)
	for i := range inv {
		inv[i] = 1 / float32(math.Pow(e.Theta, float64(float32(2*i)/float32(ehd))))
	}
	for pos := range 2 * p.tokens {
		for f := range half {
			a := float64(float32(pos) * inv[f])
			p.cos = append(p.cos, float32(math.Cos(a)))
			p.sin = append(p.sin, float32(math.Sin(a)))
		}
	}
	v.plans[side] = p
	return p
}

// Ops runs the tower on one image's views (model.Image: Grid {T: views, 64, 64} of patch rows
// of 3·16·16 values, the local tiles first, each with a 48x48 patch mask from its corner, then
// the global view) and writes the image's rows to res (ImageRows of them) in the order
// DeepseekOcr2Model.get_image_features concatenates them: each tile's queries, the global view's,
// then the view separator.
func (v *Vision) Ops(b ml.Backend, img model.Image, res ml.Tensor) error {
	full := v.cfg.PosSide()
	if img.Grid.H != full || img.Grid.W != full || img.Grid.T < 1 {
		return fmt.Errorf("deepseekocr2: an image of grid %+v, want views of %dx%d patches: %w", img.Grid, full, full, ml.ErrInvalidInput)
	}
	dim := 3 * v.cfg.SAM.Patch * v.cfg.SAM.Patch
	per := full * full
	if len(img.Pixels) != img.Grid.Patches()*dim {
		return fmt.Errorf("deepseekocr2: %d pixel values for %d patches of %d: %w", len(img.Pixels), img.Grid.Patches(), dim, ml.ErrInvalidInput)
	}
	want, err := v.ImageRows(img)
	if err != nil {
		return err
	}
	if res.Rows != want {
		return fmt.Errorf("deepseekocr2: %d result rows for an image of %d: %w", res.Rows, want, ml.ErrInvalidInput)
	}
	row := 0
	for t := range img.Grid.T {
		p := v.plan(img.Mask(t).W)
		pix := b.Input(img.Pixels[t*per*dim:(t+1)*per*dim], per, dim)
		v.view(b, pix, p, res.RowsAt(row, p.tokens))
		row += p.tokens
	}
	b.Gather(res.RowsAt(row, 1), v.separator, b.Ints([]int32{0}))
	return nil
}

// ImageRows is the rows an image becomes: each view's queries (its SAM grid downsampled 4x: 144
// for a 768 tile, 256 for the 1024 view) and the separator. A view's patch mask must be a square
// from its corner (the whole 64x64 grid, or a tile's 48x48).
func (v *Vision) ImageRows(img model.Image) (int, error) {
	rows := 1
	for t := range img.Grid.T {
		m := img.Mask(t)
		if m.X != 0 || m.Y != 0 || m.W != m.H || m.W < 1 || m.W > img.Grid.W || m.W%4 != 0 {
			return 0, fmt.Errorf("deepseekocr2: view %d's patch mask %+v: %w", t, m, ml.ErrInvalidInput)
		}
		if m.W != v.cfg.PosSide() && m.W != tilePixels/v.cfg.SAM.Patch {
			return 0, fmt.Errorf("deepseekocr2: view %d of %dx%d patches: the model has queries for 64 (1024 px) and 48 (768 px): %w",
				t, m.W, m.W, ml.ErrInvalidInput)
		}
		rows += (m.W / 4) * (m.W / 4)
	}
	return rows, nil
}

// view runs one view of p.side x p.side patches (the top-left ones of the 64x64 pixel rows pix)
// through SAM, the encoder and the projector, writing its p.tokens rows to res.
func (v *Vision) view(b ml.Backend, pix ml.Tensor, p *viewPlan, res ml.Tensor) {
	s := &v.cfg.SAM
	H, heads := s.Hidden, s.Heads
	hd := H / heads
	n := p.side * p.side
	eps := float32(s.Eps)
	nw := len(p.win.Rows)
	rowsMax := max(n, nw)
	sizeMax := max(p.side, s.Window)

	px := b.Scratch("ds.px", n, pix.Cols)
	x := b.Scratch("ds.x", n, H)
	xn := b.Scratch("ds.xn", n+1, H) // the normed map and a zero row (the windows' padding)
	xw := b.Scratch("ds.xw", rowsMax, H)
	q := b.Scratch("ds.q", rowsMax, H)
	kv := b.Scratch("ds.kv", rowsMax, 2*H)
	att := b.Scratch("ds.att", rowsMax, H)
	pw := b.Scratch("ds.pw", rowsMax, H)
	t := b.Scratch("ds.t", n, H)
	act := b.Scratch("ds.act", n, s.MLP)
	biasH := b.Scratch("ds.biash", rowsMax, heads*sizeMax)
	biasW := b.Scratch("ds.biasw", rowsMax, heads*sizeMax)
	relRows := [2]ml.Tensor{b.Scratch("ds.relh", 2*p.side-1, hd), b.Scratch("ds.relw", 2*p.side-1, hd)}
	if b.Err() != nil {
		return
	}
	b.Write(xn.RowsAt(n, 1), make([]float32, H))

	// patch_embed (Conv2d 16x16, stride 16: one product over the view's patch rows), then
	// + interpolate_pos_encoding(h, w): the table itself at 64x64, bicubic antialiased below
	b.Gather(px, pix, b.Ints(p.patchRows))
	b.Linears(px, ml.Out{Y: x, W: v.patch, B: v.patchB})
	b.AddEmbedBag(x, v.pos, b.Ints(p.pos.IDs), b.Input(p.posW, n, p.pos.K))

	scale := float32(1 / math.Sqrt(float64(hd)))
	delta := ml.Tensor{} // the previous layer's MLP output, added by the next norm
	for l := range v.sam {
		L := &v.sam[l]
		// residual + mlp output (fused into the norm), then self.layer_norm1; window_partition
		// pads the normed map with zeros, which then take part in the window's attention
		b.LayerNorm(xn.RowsAt(0, n), x, x, delta, L.norm1, L.norm1B, eps)
		rows, size, g, bounds := n, p.side, &p.relAll, []int32{0, int32(n)}
		src := xn.RowsAt(0, n)
		if L.window {
			rows, size, g, bounds = nw, s.Window, &p.relWin, p.win.Bounds
			b.Gather(xw.RowsAt(0, nw), xn, b.Ints(p.win.Rows))
			src = xw.RowsAt(0, nw)
		}
		qr, kvr := q.RowsAt(0, rows), kv.RowsAt(0, rows)
		b.Linears(src, ml.Out{Y: qr, W: L.q, B: L.qB}, ml.Out{Y: kvr, W: L.kv, B: L.kvB})
		// get_decomposed_rel_pos: rel_h[i, h, k] = q_ih · Rh[q_h(i) − k + size − 1] (q unscaled):
		// the products of q with the whole table, then each query's columns picked
		tabH, tabW := L.relH, L.relW
		if !L.window && size != v.cfg.PosSide() {
			// get_rel_pos resamples the global tables (2·64 − 1 rows) linearly to 2·size − 1
			taps := b.Input(p.relRowsW, 2*size-1, 2)
			for i, tab := range []ml.Tensor{L.relH, L.relW} {
				b.Write(relRows[i], make([]float32, (2*size-1)*hd))
				b.AddEmbedBag(relRows[i], tab, b.Ints(p.relRowsIDs), taps)
			}
			tabH, tabW = relRows[0], relRows[1]
		}
		m := 2*size - 1
		bh := biasH.Reshape(biasH.Rows*biasH.Cols, 1).RowsAt(0, rows*heads*size)
		bw := biasW.Reshape(biasW.Rows*biasW.Cols, 1).RowsAt(0, rows*heads*size)
		prod := b.Scratch("ds.relprod", rows*heads, m)
		for _, pick := range []struct {
			tab, out ml.Tensor
			idx      []int32
		}{{tabH, bh, g.h}, {tabW, bw, g.w}} {
			b.Linears(qr.Reshape(rows*heads, hd), ml.Out{Y: prod, W: pick.tab})
			b.Gather(pick.out, prod.Reshape(rows*heads*m, 1), b.Ints(pick.idx))
		}
		a := ml.Attn{Heads: heads, KVHeads: heads, HeadDim: hd, Scale: scale, Mask: ml.Mask{RelPos: ml.RelPos{
			H: bh.Reshape(rows, heads*size), W: bw.Reshape(rows, heads*size), Height: size, Width: size}}}
		b.SegmentAttention(att.RowsAt(0, rows), qr, kvr.ColsAt(0, H), kvr.ColsAt(H, H), bounds, a)
		if L.window {
			b.Linears(att.RowsAt(0, rows), ml.Out{Y: pw.RowsAt(0, rows), W: L.proj, B: L.projB})
			b.Gather(t, pw.RowsAt(0, rows), b.Ints(p.win.Back)) // window_unpartition
		} else {
			b.Linears(att.RowsAt(0, n), ml.Out{Y: t, W: L.proj, B: L.projB})
		}
		// hidden_states = residual + hidden_states; hidden_states + self.mlp(self.layer_norm2(...))
		b.LayerNorm(xn.RowsAt(0, n), x, x, t, L.norm2, L.norm2B, eps)
		b.Linears(xn.RowsAt(0, n), ml.Out{Y: act, W: L.fc1, B: L.fc1B})
		b.GELU(act, ml.GELUErf)
		b.Linears(act, ml.Out{Y: t, W: L.fc2, B: L.fc2B})
		delta = t
	}
	b.ScatterAdd(x, delta, b.Ints(identity(n))) // the last layer's residual add
	v.neckOps(b, x, p, res)
}

// identity is 0 .. n−1.
func identity(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// conv runs one convolution of plan c with weight w (ConvTaps) on in, a map of c.H·c.W rows
// followed by a zero row, into out (c.OutH·c.OutW rows).
func conv(b ml.Backend, name string, in ml.Tensor, c ConvPlan, w, out ml.Tensor) {
	taps := c.Kernel * c.Kernel
	cols := b.Scratch(name, len(c.Rows), in.Cols)
	b.Gather(cols, in, b.Ints(c.Rows))
	b.Linears(cols.Reshape(c.OutH*c.OutW, taps*in.Cols), ml.Out{Y: out, W: w})
}

// neckOps is DeepseekOcr2SamVisionNeck (conv 1x1, LayerNorm2d, conv 3x3, LayerNorm2d), the two
// stride-2 convolutions of DeepseekOcr2SamVisionProj, then the encoder over [SAM tokens;
// queries] and the projector.
func (v *Vision) neckOps(b ml.Backend, x ml.Tensor, p *viewPlan, res ml.Tensor) {
	s, e := &v.cfg.SAM, &v.cfg.Encoder
	n, C := p.side*p.side, s.OutChannels
	c1 := b.Scratch("ds.neck1", n, C)
	m1 := b.Scratch("ds.neckm1", n+1, C) // a map and its zero row, read by the 3x3 convolutions
	c2 := b.Scratch("ds.neck2", n, C)
	m2 := b.Scratch("ds.neckm2", n+1, C)
	d1 := b.Scratch("ds.down1", p.down1.OutH*p.down1.OutW+1, s.Down[0])
	tokens := p.tokens
	EH := e.Hidden
	enc := b.Scratch("ds.enc", 2*tokens, EH) // [SAM tokens; queries]
	if b.Err() != nil {
		return
	}
	b.Write(m1.RowsAt(n, 1), make([]float32, C))
	b.Write(m2.RowsAt(n, 1), make([]float32, C))
	nd1 := p.down1.OutH * p.down1.OutW
	b.Write(d1.RowsAt(nd1, 1), make([]float32, s.Down[0]))
	// LayerNorm2d: over the channels of each position, eps 1e-6
	b.Linears(x, ml.Out{Y: c1, W: v.neck1})
	b.LayerNorm(m1.RowsAt(0, n), c1, c1, ml.Tensor{}, v.neckN1, v.neckN1B, 1e-6)
	conv(b, "ds.col1", m1, p.neck, v.neck2, c2)
	b.LayerNorm(m2.RowsAt(0, n), c2, c2, ml.Tensor{}, v.neckN2, v.neckN2B, 1e-6)
	conv(b, "ds.col2", m2, p.down1, v.down1, d1.RowsAt(0, nd1))
	// the last convolution's rows are the encoder's SAM tokens (flatten(2).transpose(1, 2): raster)
	conv(b, "ds.col3", d1, p.down2, v.down2, enc.RowsAt(0, tokens))
	queries := v.query1024
	if tokens <= 144 {
		queries = v.query768
	}
	if queries.Rows != tokens { // ImageRows admits views of 48 or 64 patches a side only
		panic(fmt.Sprintf("deepseekocr2: a view of %d tokens has no learned queries", tokens))
	}
	b.Gather(enc.RowsAt(tokens, tokens), queries, b.Ints(identity(tokens)))
	out := v.encoderOps(b, enc, p)
	b.Linears(out.RowsAt(tokens, tokens), ml.Out{Y: res, W: v.projector, B: v.projectorB})
}

// encoderOps is DeepseekOcr2VisionEncoder over x's 2·tokens rows: Qwen2 layers (RMSNorm, q/k/v
// with biases, RoPE over positions 0 .. 2·tokens − 1, grouped attention with the hybrid mask:
// the SAM tokens see one another, each query every SAM token and the queries before it;
// o_proj, RMSNorm, SwiGLU MLP), then the final norm; returns the normed rows.
func (v *Vision) encoderOps(b ml.Backend, x ml.Tensor, p *viewPlan) ml.Tensor {
	e := &v.cfg.Encoder
	rows, EH, hd := x.Rows, e.Hidden, e.Hidden/e.Heads
	qd, kvd := e.Heads*hd, e.KVHeads*hd
	eps := float32(e.Eps)
	xn := b.Scratch("ds.exn", rows, EH)
	q := b.Scratch("ds.eq", rows, qd)
	k := b.Scratch("ds.ek", rows, kvd)
	val := b.Scratch("ds.ev", rows, kvd)
	att := b.Scratch("ds.eatt", rows, qd)
	t := b.Scratch("ds.et", rows, EH)
	gu := b.Scratch("ds.egu", rows, 2*e.Intermediate)
	act := b.Scratch("ds.eact", rows, e.Intermediate)
	rot := ml.Rotary{Cos: b.Input(p.cos, rows, hd/2), Sin: b.Input(p.sin, rows, hd/2)}
	if b.Err() != nil {
		return xn
	}
	a := ml.Attn{Heads: e.Heads, KVHeads: e.KVHeads, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))),
		Mask: ml.Mask{Causal: true, Prefix: p.tokens}}
	delta := ml.Tensor{}
	for l := range v.enc {
		L := &v.enc[l]
		b.RMSNorm(xn, x, x, delta, L.attnNorm, eps)
		b.Linears(xn, ml.Out{Y: q, W: L.q, B: L.qB}, ml.Out{Y: k, W: L.k, B: L.kB}, ml.Out{Y: val, W: L.v, B: L.vB})
		b.Rope(q, e.Heads, hd, rot)
		b.Rope(k, e.KVHeads, hd, rot)
		b.Attention(att, q, k, val, a)
		b.Linears(att, ml.Out{Y: t, W: L.o})
		b.RMSNorm(xn, x, x, t, L.mlpNorm, eps)
		b.Linears(xn, ml.Out{Y: gu.ColsAt(0, e.Intermediate), W: L.gate}, ml.Out{Y: gu.ColsAt(e.Intermediate, e.Intermediate), W: L.up})
		b.SiluMul(act, gu.ColsAt(0, e.Intermediate), gu.ColsAt(e.Intermediate, e.Intermediate))
		b.Linears(act, ml.Out{Y: t, W: L.down})
		delta = t
	}
	b.RMSNorm(xn, x, x, delta, v.encNorm, eps)
	return xn
}
