package kit

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// imageIn is one image's rows and the batch rows of its placeholders.
type imageIn struct {
	host  []float32 // rows in host memory, or
	dev   ml.Tensor // rows in backend memory (EncodeVisionDevice)
	slots []int32
}

// batchPlan is a batch laid out for the decoder: every input's tokens one after the other.
type batchPlan struct {
	seqs   []*sequence
	ids    []int32   // all tokens
	images []imageIn // the image rows of the placeholders
	cos    []float32 // [rows, rotated dims / 2]
	sin    []float32
	last   []int32 // the last row of each input
	slots  []int32 // each row's row in the KV pool
	spans  []int32 // each row's keys in the KV pool: start, count
	decode bool    // every input is one token
	// heads are the prompt heads the batch reads (copied into their sequences before the
	// layers: use) or fills (copied from them after: keep), each with its ref (heads.release)
	heads     []headRef
	use, keep []ml.RowCopy
}

// Pass is one decoder pass as a family's LayerOps sees it: the batch's rows and the buffers
// and inputs of every layer.
type Pass struct {
	// N rows (every input's tokens one after the other) of NB inputs.
	N, NB int
	// X are the residual stream's two buffers (X[0] holds the embeddings when LayerOps starts);
	// XN, QKV (q, k and v side by side), Att, T (an op's output before its residual add), GU
	// (gate and up side by side) and Act are scratch of N rows.
	X                        [2]ml.Tensor
	XN, QKV, Att, T, GU, Act ml.Tensor
	// Rot are the rows' rotary angles; Slots each row's row in the KV pool and Spans its keys
	// there (ml.RopeCachedAttention).
	Rot          ml.Rotary
	Slots, Spans ml.Ints
	KV           *ml.KVPool
	// Images are the image rows of the batch (cfg.EmbedDim() wide) and the rows of their
	// placeholders.
	Images []PassImage
}

// PassImage is one image's rows and the batch rows they go to.
type PassImage struct {
	Rows  ml.Tensor
	Slots ml.Ints
}

// plan checks a batch against the model and lays it out. The heads it takes are released by
// the caller (batchPlan.done), or by plan when it fails.
func (m *Base) plan(batch []model.Input) (_ *batchPlan, err error) {
	cfg := m.cfg
	t := &cfg.Text
	half := t.Rotated() / 2
	p := &batchPlan{decode: true}
	defer func() {
		if err != nil {
			p.done(m, false)
		}
	}()
	for i, in := range batch {
		s, ok := in.Seq.(*sequence)
		if !ok || s.m != m {
			return nil, fmt.Errorf("input %d: sequence from another model: %w", i, ml.ErrInvalidInput)
		}
		if slices.Contains(p.seqs, s) {
			return nil, fmt.Errorf("input %d: sequence twice in one batch: %w", i, ml.ErrInvalidInput)
		}
		if s.kv.Cap() == 0 {
			return nil, ml.ErrClosed
		}
		n := len(in.IDs)
		if s.kv.Len+n > s.kv.Cap() {
			return nil, &model.BoundsError{Err: model.ErrContextExceeded, What: "sequence length", Got: s.kv.Len + n, Limit: s.kv.Cap()}
		}
		flat, err := model.Prompt{IDs: in.IDs, Positions: in.Positions, Images: in.Images}.Flatten(cfg)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		// a new sequence's prompt head: copied from the rows kept for it (its rows skipped), or
		// kept from this pass's rows
		skip := 0
		// a bidirectional image block begins a token before its first placeholder: a prompt head
		// kept for other prompts ends before it (that token's keys depend on the image)
		margin := 0
		if t.BidirectionalImage {
			margin = 1
		}
		// (a head is kept at the short factors' angles: a long sequence neither takes nor keeps one)
		if h := headLen(flat, n, margin); h > 0 && s.kv.Len == 0 && !s.long {
			use, keep := m.heads.take(in.IDs[:h])
			switch {
			case use != nil:
				skip = h
				p.heads = append(p.heads, headRef{use, false})
				p.use = append(p.use, ml.RowCopy{From: use.kv.Start(), To: s.kv.Start(), N: h})
			case keep != nil:
				p.heads = append(p.heads, headRef{keep, true})
				p.keep = append(p.keep, ml.RowCopy{From: s.kv.Start(), To: keep.kv.Start(), N: h})
			}
		}
		used := 0 // placeholders given rows so far
		for _, e := range in.Images {
			img := imageIn{}
			if e.Device != nil {
				r, ok := e.Device.(*imageRows)
				if !ok || r.m != m {
					return nil, fmt.Errorf("input %d: image rows of another model: %w", i, ml.ErrInvalidInput)
				}
				img.dev = r.t.RowsAt(0, e.Tokens)
			} else {
				img.host = e.Data
			}
			for _, slot := range flat.Slots[used : used+e.Tokens] {
				img.slots = append(img.slots, int32(len(p.ids)-skip)+slot)
			}
			used += e.Tokens
			p.images = append(p.images, img)
		}
		p.seqs = append(p.seqs, s)
		p.ids = append(p.ids, in.IDs[skip:]...)
		p.last = append(p.last, int32(len(p.ids)-1))
		p.decode = p.decode && n == 1
		reach, err := imageBlocks(cfg, flat, in, n, skip)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		start, past := s.kv.Start(), s.kv.Len+skip
		for j := range n - skip {
			p.slots = append(p.slots, int32(start+past+j))
			keys := past + j + 1 // causal: the keys up to the row's own
			if reach != nil {
				keys = s.kv.Len + reach[skip+j] + 1
			}
			p.spans = append(p.spans, int32(start), int32(keys))
		}
		// the rotary embedding: freqs = inv_freq @ position_ids in F32, frequency f driven by
		// position row freqAxis[f] (the angles of each position come from the model's table)
		top := int32(0)
		for _, v := range flat.Pos {
			top = max(top, v)
		}
		table := m.rope
		if s.long {
			table = m.ropeLong
		}
		cos, sin := table.angles(int(top) + 1)
		for j := skip; j < n; j++ {
			for f := range half {
				at := int(flat.Pos[m.freqAxis[f]*n+j])*half + f
				if at < 0 {
					return nil, fmt.Errorf("input %d: negative rotary position: %w", i, ml.ErrInvalidInput)
				}
				p.cos = append(p.cos, cos[at])
				p.sin = append(p.sin, sin[at])
			}
		}
	}
	return p, nil
}

// imageBlocks returns, for a config whose images attend bidirectionally within their blocks
// (TextConfig.BidirectionalImage), the last row of the input each row's attention reaches: its
// own, or for a row of an image's block (the token before its first placeholder to the token
// after its last) the block's last row; nil for a causal config. A block must lie whole in the
// input's rows after skip: its rows' keys are written by this pass (engine.prefillChunks cuts
// prompts around blocks), and a chunk that cuts one is refused rather than computed otherwise
// than the reference, which prefills the block in one call.
func imageBlocks(cfg *model.Config, flat *model.PrefillInput, in model.Input, n, skip int) ([]int, error) {
	if !cfg.Text.BidirectionalImage {
		return nil, nil
	}
	if n > 1 && in.IDs[n-1] == cfg.VisionStartTokenID {
		// the block's first row without its image: the rows after it, in a later chunk, would
		// need this row's keys computed with theirs
		return nil, fmt.Errorf("a prefill chunk ends at an image block's first token: %w", ml.ErrInvalidInput)
	}
	if len(in.Images) == 0 {
		return nil, nil
	}
	reach := make([]int, n)
	for r := range reach {
		reach[r] = r
	}
	used := 0
	for k, e := range in.Images {
		slots := flat.Slots[used : used+e.Tokens]
		used += e.Tokens
		lo, hi := int(slices.Min(slots))-1, int(slices.Max(slots))+1
		if lo < skip || hi >= n {
			return nil, fmt.Errorf("image %d's bidirectional block, rows [%d, %d], is not whole in a prefill chunk of rows [%d, %d): %w",
				k, lo, hi, skip, n, ml.ErrInvalidInput)
		}
		for r := lo; r <= hi; r++ {
			reach[r] = hi
		}
	}
	return reach, nil
}

// headRef is a head a plan holds a ref on, and whether its pass fills it.
type headRef struct {
	h     *head
	fills bool
}

// done gives back the plan's heads: those it was to fill are ready if ran, dropped if not.
func (p *batchPlan) done(m *Base, ran bool) {
	for _, r := range p.heads {
		m.heads.release(r.h, ran && r.fills)
	}
	p.heads = nil
}

// angleTable is the text rotary angles of one set of frequencies: the cosines and sines of
// positions 0, 1, ... (rotated dims / 2 values each), times the attention factor, grown on demand.
type angleTable struct {
	invFreq []float32
	scale   float32 // multiplies cos and sin (LongRoPE's attention factor; 1 otherwise)
	// mu guards cos and sin (plans are made outside the model's mu)
	mu       sync.Mutex
	cos, sin []float32
}

// angles returns the cosines and sines of every frequency at positions [0, n) (n rows of rotated dims / 2),
// computing the missing rows once for the model's life: a prefill of 200 tokens asks for 25,600
// of them, which took 0.4 ms of the host's time a request when computed each time.
func (r *angleTable) angles(n int) (cos, sin []float32) {
	half := len(r.invFreq)
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := len(r.cos) / half; p < n; p++ {
		for f := range half {
			a := float64(float32(p) * r.invFreq[f])
			// emb.cos() * attention_scaling in F32 (a factor of 1 changes nothing)
			r.cos = append(r.cos, float32(math.Cos(a))*r.scale)
			r.sin = append(r.sin, float32(math.Sin(a))*r.scale)
		}
	}
	return r.cos, r.sin
}

// Forward implements model.Batcher: the text model + lm_head over every input's tokens at once,
// each attending over its own cache.
func (m *Base) Forward(ctx context.Context, batch []model.Input) ([]model.Output, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return nil, fmt.Errorf("empty batch: %w", ml.ErrInvalidInput)
	}
	p, err := m.plan(batch)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		p.done(m, false)
		return nil, ml.ErrClosed
	}
	outs, err := m.decoder(p, batch)
	p.done(m, err == nil)
	if err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	return outs, nil
}

func (m *Base) decoder(p *batchPlan, batch []model.Input) ([]model.Output, error) {
	b := m.b
	n, nb := len(p.ids), len(batch)
	picks := make([]int32, nb)
	outs := make([]model.Output, nb)
	for i, s := range p.seqs {
		if batch[i].Logits { // each sequence's own: valid until its next call (model.Model)
			if s.logits == nil {
				s.logits = m.takeLogits()
			}
			outs[i].Logits = s.logits
		}
	}
	// A decode step of a given batch size issues the same ops on the same buffers every time:
	// backends that record graphs replay it, one recording per bucket of cache lengths.
	key := ""
	if p.decode {
		key = fmt.Sprintf("decode/%d/%d", nb, ml.KeyBucket(ml.LongestSpan(p.spans)))
		for _, o := range outs {
			if o.Logits != nil { // the logits' copies are part of the recording
				key += "+"
			} else {
				key += "-"
			}
		}
	}
	err := ml.Do(b, func() error {
		ml.Graph(b, key, func(replay bool) { m.decoderOps(p, n, nb, picks, outs, replay) })
		return b.Sync()
	})
	if err != nil {
		return nil, err
	}
	for i := range outs {
		outs[i].Argmax = picks[i]
	}
	for i, s := range p.seqs {
		s.kv.Len += len(batch[i].IDs)
	}
	return outs, nil
}

// decoderOps issues the decoder's ops for the batch; the argmax (and the logits where asked for)
// of each input's last row land in picks and outs at the next Sync. With replay it issues only
// the inputs and the outputs (ml.Graph).
func (m *Base) decoderOps(bp *batchPlan, n, nb int, picks []int32, outs []model.Output, replay bool) {
	b := m.b
	t := &m.cfg.Text
	H, hd, I := t.Hidden, t.HeadDim, t.Intermediate
	qd, kvd := t.Heads*hd, t.KVHeads*hd

	p := &Pass{
		N: n, NB: nb, KV: m.kv,
		X:   [2]ml.Tensor{b.Scratch("t.x0", n, H), b.Scratch("t.x1", n, H)},
		XN:  b.Scratch("t.xn", n, H),
		QKV: b.Scratch("t.qkv", n, qd+2*kvd),
		Att: b.Scratch("t.att", n, qd),
		T:   b.Scratch("t.t", n, H),
		GU:  b.Scratch("t.gu", n, 2*I),
		Act: b.Scratch("t.act", n, I),
		Rot: ml.Rotary{Cos: b.Input(bp.cos, n, t.Rotated()/2), Sin: b.Input(bp.sin, n, t.Rotated()/2), Dims: t.RotaryDims},
	}
	logits := b.ScratchF32("t.logits", nb, t.Vocab)
	if b.Err() != nil {
		return
	}

	ids := b.Ints(bp.ids)
	p.Slots, p.Spans = b.Ints(bp.slots), b.Ints(bp.spans)
	var idx ml.Ints
	if n != nb && nb > 1 {
		idx = b.Ints(bp.last)
	}
	if !replay {
		m.kv.Copy(b, bp.use) // kept heads into their sequences, before the layers read them
		m.passOps(p, bp, ids, idx, logits)
		m.kv.Copy(b, bp.keep) // heads to keep, after the layers wrote them
	}
	b.Argmax(picks, logits)
	for i := range outs {
		if outs[i].Logits != nil {
			b.Read(outs[i].Logits, logits.RowsAt(i, 1))
		}
	}
	ml.Mark(b, "decoder.head")
}

// passOps issues the ops between the inputs and the outputs of decoderOps: the embedding, the
// family's layers and the final norm and lm_head of each input's last row.
func (m *Base) passOps(p *Pass, bp *batchPlan, ids, idx ml.Ints, logits ml.Tensor) {
	b := m.b
	t := &m.cfg.Text
	H := t.Hidden
	eps := float32(t.RMSNormEps)
	n, nb := p.N, p.NB

	// inputs_embeds = embed_tokens(input_ids).masked_scatter(image_mask, image_embeds)
	b.Embed(p.X[0], m.head.Embed, ids)
	for i, img := range bp.images {
		rows := img.dev
		if !rows.Valid() {
			rows = b.Scratch(fmt.Sprintf("t.img%d", i), len(img.slots), m.cfg.EmbedDim())
			b.Write(rows, img.host)
		}
		pi := PassImage{Rows: rows, Slots: b.Ints(img.slots)}
		b.Scatter(p.X[0], rows.ColsAt(0, H), pi.Slots)
		p.Images = append(p.Images, pi)
	}
	ml.Mark(b, "decoder.embed")
	r, delta := m.fam.LayerOps(p)
	ml.Mark(b, "decoder.layers")

	// hidden_states = self.norm(hidden_states); logits = self.lm_head(hidden_states[:, -1:, :])
	x, tt, xn := p.X[r], delta, p.XN
	last, lastT, lastN, lastOut := x, tt, xn, p.X[1-r]
	switch {
	case nb == 1 && n > 1: // one prefill: its last row is a view
		last, lastN, lastOut = x.RowsAt(n-1, 1), xn.RowsAt(n-1, 1), lastOut.RowsAt(n-1, 1)
		if tt.Valid() {
			lastT = tt.RowsAt(n-1, 1)
		}
	case n != nb:
		last, lastN, lastOut = b.Scratch("t.last", nb, H), b.Scratch("t.lastn", nb, H), b.Scratch("t.lastx", nb, H)
		b.Gather(last, x, idx)
		if tt.Valid() {
			lastT = b.Scratch("t.lastt", nb, H)
			b.Gather(lastT, tt, idx)
		}
	}
	ml.NormLinears(b, lastN, lastOut, last, lastT, m.head.FinalNorm, eps, ml.Out{Y: logits, W: m.head.LMHead, B: m.head.LMBias})
}
