// Package kit is what every family's model shares and no family defines: sequences over a KV
// pool, the batch layout of a decoder pass (rows, cache slots, attention spans, rotary angles of
// the multimodal positions), image rows kept on the device, the greedy and logits heads, and the
// model.Model plumbing around them. A family (core/internal/models/<family>) binds its weights
// and writes its vision tower and decoder layers as ops on the pass kit lays out.
package kit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// Family is one model family's graph over a [Base].
type Family interface {
	// Bind maps the family's weights (called once, on the backend's thread) and returns the
	// ones the shared embedding and head read.
	Bind(ld *ml.Loader, cfg *model.Config) (Head, error)
	// VisionOps issues the vision tower on images in one pass on b (the model's backend or a
	// lane of it): their rows, one per placeholder token and cfg.EmbedDim() wide, go to res one
	// image after the other (each image's in prompt order). No attention crosses from one image
	// into another, so an image gets the rows it gets alone.
	VisionOps(b ml.Backend, imgs []model.Image, res ml.Tensor)
	// LayerOps issues the decoder layers over p, whose X[0] holds the input embeddings; the
	// final hidden states are X[r] + delta (delta may be none: the residual add the next norm
	// fuses).
	LayerOps(p *Pass) (r int, delta ml.Tensor)
}

// Head are the weights of the token embedding and the output head.
type Head struct {
	Embed, FinalNorm, LMHead ml.Tensor
	// LMBias, when set, is added to the logits: kit makes it from cfg.Text.OutputVocab, 0 for
	// the ids below it and -inf for the rest, so that no backend op knows of the mask.
	LMBias ml.Tensor
}

// BindHead binds the token embedding, the final norm and lm_head by their names under the text
// and root prefixes (lm_head is the embedding when the config ties them: a tied checkpoint may
// omit lm_head.weight). Families bind it first.
func BindHead(ld *ml.Loader, cfg *model.Config, text, root []string) Head {
	t := &cfg.Text
	h := Head{Embed: ld.Matrix(text, "embed_tokens.weight", t.Vocab, t.Hidden)}
	h.LMHead = h.Embed
	if !cfg.TieEmbeddings {
		h.LMHead = ld.Matrix(root, "lm_head.weight", t.Vocab, t.Hidden)
	}
	h.FinalNorm = ld.Vector(text, "norm.weight", t.Hidden)
	return h
}

// Options tune a model.
type Options struct {
	// KVTokens sizes the KV pool; 0 picks max(context, min(16 contexts, 1 GiB of cache)).
	KVTokens int
	// BlockTokens is the pool's block size; 0 means 16.
	BlockTokens int
	// VisionLane runs the vision tower on lanes of the backend (ml.Laner), beside the
	// decoder's passes instead of between them: on a GPU streams of their own, whose kernels fill
	// the gaps the decoder's leave. Ignored where the backend has no lanes.
	VisionLane bool
	// VisionLanes is how many lanes the tower gets with VisionLane (0: DefaultVisionLanes): one
	// pass at a time on each, so that one pass's host work (its plan, the pixels' copy into
	// pinned memory and up) overlaps another's kernels.
	VisionLanes int
	// Heads is how many prompt heads (the tokens before a prompt's first image) keep their KV
	// rows in the pool for the next prompts that start with them; 0 means DefaultHeads, a
	// negative number none.
	Heads int
}

// DefaultVisionLanes is Options.VisionLanes' default.
const DefaultVisionLanes = 2

// lane is a backend lane the tower runs on, one pass at a time (mu).
type lane struct {
	b  ml.Backend
	mu sync.Mutex
}

// Base is a checkpoint of some family on a backend. It implements model.Model,
// model.Batcher, model.GreedyModel, model.Pooled, model.DeviceEncoder,
// model.BatchEncoder and model.ParallelEncoder; its calls are serialised (the backend runs
// one at a time), except that vision passes on a lane run beside the others.
type Base struct {
	mu sync.Mutex
	b  ml.Backend
	// lanes run the vision tower (Options.VisionLane), each pass under its lane's mu; with
	// none it runs on b under mu. Close takes every lane's mu first.
	lanes []*lane
	ck    *ml.Checkpoint
	cfg   *model.Config
	lim   model.Limits
	fam   Family
	head  Head
	kv    *ml.KVPool
	// heads keeps prompt heads' rows in kv (nil: none)
	heads *heads
	// closed is set by Close while it holds the lanes' mu and mu: a pass that saw it false under
	// any ends before Close goes on. NewSequence and a vision pass on a lane read it
	// without mu, so neither waits for the decoder's pass in progress.
	closed atomic.Bool

	// rope holds the text rotary angles: the frequencies (LongRoPE's short factors applied), and
	// ropeLong those of LongRoPE's long factors, for a sequence past original_max_position_embeddings
	// (model.TextConfig.LongRoPE; nil without long factors)
	rope, ropeLong *angleTable
	freqAxis       []int // which position row (t, h, w) drives each frequency
	// logitRows are the logits buffers of closed sequences, for the next ones (a vocabulary's
	// worth each: 600 KB at 152k).
	logitRows sync.Pool

	// image rows kept in backend memory (EncodeVisionDevice): every buffer made, and those
	// released; rowsMu guards rowsFree (Release runs on any goroutine).
	rowsMu   sync.Mutex
	rowsFree []ml.Tensor
}

// Interface guards.
var (
	_ model.Model           = (*Base)(nil)
	_ model.Batcher         = (*Base)(nil)
	_ model.GreedyModel     = (*Base)(nil)
	_ model.Pooled          = (*Base)(nil)
	_ model.PromptHeadCache = (*Base)(nil)
	_ model.DeviceEncoder   = (*Base)(nil)
	_ model.BatchEncoder    = (*Base)(nil)
	_ model.ParallelEncoder = (*Base)(nil)
)

// New binds fam's weights on b, for a checkpoint of modelType (any other config is
// ErrUnsupported). The model owns b and ck from here on (Close closes them), also when New fails.
func New(modelType string, b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options, fam Family) (*Base, error) {
	if cfg.ModelType != modelType {
		b.Close()
		if ck != nil {
			ck.Close()
		}
		return nil, fmt.Errorf("model_type %q is not %s: %w", cfg.ModelType, modelType, model.ErrUnsupported)
	}
	m := &Base{b: b, ck: ck, cfg: cfg, lim: lim, fam: fam}
	if err := ml.Do(b, func() error { return m.init(opts) }); err != nil {
		m.Close()
		return nil, err
	}
	if l, ok := b.(ml.Laner); ok && opts.VisionLane {
		n := opts.VisionLanes
		if n <= 0 {
			n = DefaultVisionLanes
		}
		for range n {
			lb, err := l.Lane()
			if err != nil {
				m.Close()
				return nil, fmt.Errorf("vision lane: %w", err)
			}
			m.lanes = append(m.lanes, &lane{b: lb}) // closed with b
		}
	}
	return m, nil
}

func (m *Base) init(opts Options) error {
	if err := m.cfg.Validate(); err != nil {
		return err
	}
	ld := ml.NewLoader(m.b, m.ck)
	head, err := m.fam.Bind(ld, m.cfg)
	if err == nil {
		err = ld.Err()
	}
	if err != nil {
		return err
	}
	m.head = head
	t := &m.cfg.Text
	if t.OutputVocab > 0 && t.OutputVocab < t.Vocab {
		// pred_logits[:, len(tokenizer):] = float("-inf") as lm_head's bias (written into memory
		// of the backend's: Load may keep using host bytes in place)
		bias := make([]float32, t.Vocab)
		for i := t.OutputVocab; i < t.Vocab; i++ {
			bias[i] = float32(math.Inf(-1))
		}
		if m.head.LMBias, err = m.b.Alloc(1, t.Vocab, m.b.DType()); err != nil {
			return fmt.Errorf("the vocabulary mask: %w", err)
		}
		m.b.Write(m.head.LMBias, bias)
	}
	half := t.Rotated() / 2
	scale := float32(1)
	if t.RopeScale != 0 {
		scale = float32(t.RopeScale)
	}
	m.rope = &angleTable{invFreq: invFreq(half, t.Rotated(), t.RopeTheta, t.RopeFactors), scale: scale}
	if len(t.RopeLongFactors) > 0 {
		m.ropeLong = &angleTable{invFreq: invFreq(half, t.Rotated(), t.RopeTheta, t.RopeLongFactors), scale: scale}
	}
	m.freqAxis = FreqAxes(t.MRopeSection, t.MRopeInterleaved, half)
	kvd := t.KVHeads * t.HeadDim
	block := opts.BlockTokens
	if block <= 0 {
		block = 16
	}
	tokens := opts.KVTokens
	if tokens > 0 && tokens < m.lim.ContextLength {
		return fmt.Errorf("KV cache of %d tokens: less than one context of %d (a request of the whole context could never run)", tokens, m.lim.ContextLength)
	}
	if tokens <= 0 {
		perToken := int64(2*t.Layers*kvd) * m.b.DType().Size()
		tokens = int(min(16*int64(m.lim.ContextLength), (1<<30)/perToken))
		tokens = max(tokens, m.lim.ContextLength)
	}
	m.kv, err = ml.NewKVPool(m.b, t.Layers, kvd, block, (tokens+block-1)/block, m.b.DType())
	m.heads = newHeads(m.kv, opts.Heads)
	return err
}

// invFreq is compute_default_rope_parameters in F32: 1 / theta^(arange(0, dim, 2)/dim), n values;
// with factors, _compute_longrope_parameters': 1 / (factor_i * theta^(2i/dim)).
func invFreq(n, dim int, theta float64, factors []float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		e := float32(2*i) / float32(dim)
		p := float32(math.Pow(theta, float64(e)))
		if factors != nil {
			p *= float32(factors[i])
		}
		out[i] = 1 / p
	}
	return out
}

// FreqAxes says which position row (0 t, 1 h, 2 w) drives each of the half rotary frequencies:
// chunks of section[0], [1], [2] in turn (Qwen2_5_VLRotaryEmbedding), or, interleaved
// (Qwen3VLTextRotaryEmbedding.recomposition_frequencies), h at slice(1, 3*section[1], 3), w at
// slice(2, 3*section[2], 3) and t everywhere else.
func FreqAxes(section [3]int, interleaved bool, half int) []int {
	axes := make([]int, half)
	if !interleaved {
		f := 0
		for axis, n := range section {
			for range n {
				if f < half {
					axes[f] = axis
				}
				f++
			}
		}
		return axes
	}
	for axis := 1; axis <= 2; axis++ {
		for f := axis; f < 3*section[axis] && f < half; f += 3 {
			axes[f] = axis
		}
	}
	return axes
}

// Config implements model.Model.
func (m *Base) Config() *model.Config { return m.cfg }

// Limits implements model.Model.
func (m *Base) Limits() model.Limits { return m.lim }

// Backend is the backend the model runs on.
func (m *Base) Backend() ml.Backend { return m.b }

// ParallelVision implements model.ParallelEncoder: the tower runs on lanes of its own.
func (m *Base) ParallelVision() bool { return len(m.lanes) > 0 }

// VisionLanes implements model.VisionLaner: passes of the tower that can run at once.
func (m *Base) VisionLanes() int { return max(len(m.lanes), 1) }

// KVUse implements model.Pooled: the blocks of the kept prompt heads (a few, evicted as
// new heads come) are not counted as in use.
func (m *Base) KVUse() (used, total int) {
	if m.kv == nil {
		return 0, 0
	}
	used, total = m.kv.Use()
	return used - m.heads.blocks(), total
}

// PromptHeads reports the prompt heads kept (Options.Heads) and how many prompts copied one
// instead of computing it.
func (m *Base) PromptHeads() (kept int, hits int64) { return m.heads.stats() }

// Close releases the backend and the checkpoint. It is safe to call more than once.
func (m *Base) Close() error {
	for _, l := range m.lanes { // a vision pass on a lane ends first
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return nil
	}
	m.closed.Store(true)
	m.heads.drop()
	err := m.b.Close()
	if m.ck != nil {
		if cerr := m.ck.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// sequence is a KV cache from the model's pool, and the logits its calls return.
type sequence struct {
	m      *Base
	kv     *ml.KVCache
	logits []float32
	// long: the sequence runs LongRoPE's long factors (model.TextConfig.LongRoPE of its capacity)
	long bool
}

// NewSequence implements model.Model.
func (m *Base) NewSequence(capacity int) (model.Sequence, error) {
	if err := model.CheckCapacity(m.lim, capacity); err != nil {
		return nil, err
	}
	if m.closed.Load() {
		return nil, ml.ErrClosed
	}
	kv, err := m.kv.Alloc(capacity)
	if err != nil {
		return nil, err
	}
	return &sequence{m: m, kv: kv, long: m.ropeLong != nil && m.cfg.Text.LongRoPE(capacity)}, nil
}

func (s *sequence) Len() int { return s.kv.Len }
func (s *sequence) Cap() int { return s.kv.Cap() }
func (s *sequence) Reset()   { s.kv.Len = 0 }
func (s *sequence) Close() error {
	s.kv.Free()
	if buf := s.logits; buf != nil {
		s.logits = nil
		s.m.logitRows.Put(&buf)
	}
	return nil
}

// takeLogits is a vocabulary-sized buffer for a sequence's logits.
func (m *Base) takeLogits() []float32 {
	if p, ok := m.logitRows.Get().(*[]float32); ok && len(*p) == m.cfg.Text.Vocab {
		return *p
	}
	return make([]float32, m.cfg.Text.Vocab)
}

// EncodeVision implements model.Model.
func (m *Base) EncodeVision(ctx context.Context, img model.Image) (*model.Embeddings, error) {
	out, err := m.encode(ctx, []model.Image{img}, false)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// EncodeVisionDevice implements model.DeviceEncoder: the rows stay in backend memory for this
// model's prefill.
func (m *Base) EncodeVisionDevice(ctx context.Context, img model.Image) (*model.Embeddings, error) {
	out, err := m.encode(ctx, []model.Image{img}, true)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// EncodeVisionBatch implements model.BatchEncoder: one tower pass over every image, each
// image's rows kept in backend memory of their own (released one by one).
func (m *Base) EncodeVisionBatch(ctx context.Context, imgs []model.Image) ([]*model.Embeddings, error) {
	return m.encode(ctx, imgs, true)
}

// ReadRows copies an image's rows to host memory, wherever they are (device rows must be this
// model's): what EncodeVision would have returned.
func (m *Base) ReadRows(e *model.Embeddings) ([]float32, error) {
	if e.Device == nil {
		return e.Data, nil
	}
	r, ok := e.Device.(*imageRows)
	if !ok || r.m != m {
		return nil, fmt.Errorf("image rows of another model: %w", ml.ErrInvalidInput)
	}
	out := make([]float32, e.Tokens*e.Dim)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return nil, ml.ErrClosed
	}
	err := ml.Do(m.b, func() error {
		m.b.Read(out, r.t.RowsAt(0, e.Tokens))
		return m.b.Sync()
	})
	return out, err
}

// encode runs the tower on imgs in one pass. Its output goes to host rows, or (keep) to one
// buffer of device rows per image: a copy out of the pass's output, so that each image's rows
// are freed on their own (an image kept by the embedding cache holds its rows, not the batch's).
func (m *Base) encode(ctx context.Context, imgs []model.Image, keep bool) ([]*model.Embeddings, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(imgs) == 0 {
		return nil, nil
	}
	out := make([]*model.Embeddings, len(imgs))
	total := 0
	for i, img := range imgs {
		if err := model.CheckImage(m.cfg, m.lim, img); err != nil {
			if len(imgs) > 1 {
				err = fmt.Errorf("image %d: %w", i, err)
			}
			return nil, err
		}
		n, err := model.ImageTokens(m.cfg, &img)
		if err != nil {
			return nil, err
		}
		e := &model.Embeddings{Tokens: n, Dim: m.cfg.EmbedDim()}
		if !keep {
			e.Data = make([]float32, e.Tokens*e.Dim)
		}
		out[i] = e
		total += e.Tokens
	}
	b, mu := m.takeLane()
	defer mu.Unlock()
	if m.closed.Load() {
		return nil, ml.ErrClosed
	}
	err := ml.Do(b, func() error {
		if keep && len(imgs) == 1 { // the tower writes the image's own buffer
			rows, err := m.takeRows(b, total)
			if err != nil {
				return err
			}
			m.fam.VisionOps(b, imgs, rows.t.RowsAt(0, total))
			if err := b.Sync(); err != nil {
				rows.Release()
				return err
			}
			out[0].Device = rows
			return nil
		}
		res := b.Scratch("v.out", total, m.cfg.EmbedDim())
		m.fam.VisionOps(b, imgs, res)
		var kept []*imageRows
		row := 0
		for _, e := range out {
			src := res.RowsAt(row, e.Tokens)
			row += e.Tokens
			if !keep {
				b.Read(e.Data, src)
				continue
			}
			rows, err := m.takeRows(b, e.Tokens)
			if err != nil {
				releaseAll(kept)
				return err
			}
			kept = append(kept, rows)
			b.Gather(rows.t.RowsAt(0, e.Tokens), src, b.Ints(iota32(e.Tokens)))
		}
		if err := b.Sync(); err != nil {
			releaseAll(kept)
			return err
		}
		for i, rows := range kept {
			out[i].Device = rows
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vision: %w", err)
	}
	return out, nil
}

// takeLane picks the backend of a vision pass and locks it: a free lane (beside the decoder's
// passes and the other lanes'), the first lane when all are busy, or with no lanes the model's
// backend under mu (between the decoder's passes).
func (m *Base) takeLane() (ml.Backend, *sync.Mutex) {
	if len(m.lanes) == 0 {
		m.mu.Lock()
		return m.b, &m.mu
	}
	for _, l := range m.lanes {
		if l.mu.TryLock() {
			return l.b, &l.mu
		}
	}
	l := m.lanes[0]
	l.mu.Lock()
	return l.b, &l.mu
}

// iota32 is 0, 1, ..., n-1: the row index of a copy made with Gather.
func iota32(n int) []int32 {
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	return idx
}

func releaseAll(rows []*imageRows) {
	for _, r := range rows {
		r.Release()
	}
}

// imageRows are vision-tower outputs kept in backend memory (model.DeviceRows). Buffers are
// reused in op order, so one released while the work that fills it is still queued is safe to
// hand out again.
type imageRows struct {
	m    *Base
	t    ml.Tensor
	once sync.Once
}

// Release implements model.DeviceRows.
func (r *imageRows) Release() {
	r.once.Do(func() {
		r.m.rowsMu.Lock()
		r.m.rowsFree = append(r.m.rowsFree, r.t)
		r.m.rowsMu.Unlock()
	})
}

// takeRows hands out the smallest released buffer of at least n rows, or a new one from b (the
// backend of the pass that fills it: a lane's memory is its own).
func (m *Base) takeRows(b ml.Backend, n int) (*imageRows, error) {
	m.rowsMu.Lock()
	defer m.rowsMu.Unlock()
	best := -1
	for i, t := range m.rowsFree {
		if t.Rows >= n && (best < 0 || t.Rows < m.rowsFree[best].Rows) {
			best = i
		}
	}
	if best >= 0 {
		t := m.rowsFree[best]
		m.rowsFree = append(m.rowsFree[:best], m.rowsFree[best+1:]...)
		return &imageRows{m: m, t: t}, nil
	}
	t, err := b.Alloc(max(n, 256), m.cfg.EmbedDim(), b.DType())
	if err != nil {
		return nil, fmt.Errorf("image rows: %w", err)
	}
	return &imageRows{m: m, t: t}, nil
}

// Prefill implements model.Model.
func (m *Base) Prefill(ctx context.Context, seq model.Sequence, p model.Prompt) ([]float32, error) {
	out, err := m.Forward(ctx, []model.Input{{Seq: seq, IDs: p.IDs, Positions: p.Positions, Images: p.Images, Logits: true}})
	if err != nil {
		return nil, err
	}
	return out[0].Logits, nil
}

// PrefillGreedy implements model.GreedyModel.
func (m *Base) PrefillGreedy(ctx context.Context, seq model.Sequence, p model.Prompt) (int32, error) {
	out, err := m.Forward(ctx, []model.Input{{Seq: seq, IDs: p.IDs, Positions: p.Positions, Images: p.Images}})
	if err != nil {
		return 0, err
	}
	return out[0].Argmax, nil
}

// DecodeStep implements model.Model.
func (m *Base) DecodeStep(ctx context.Context, seq model.Sequence, token int32, pos int32) ([]float32, error) {
	out, err := m.Forward(ctx, []model.Input{model.DecodeInput(seq, token, pos, true)})
	if err != nil {
		return nil, err
	}
	return out[0].Logits, nil
}

// DecodeStepGreedy implements model.GreedyModel.
func (m *Base) DecodeStepGreedy(ctx context.Context, seq model.Sequence, token int32, pos int32) (int32, error) {
	out, err := m.Forward(ctx, []model.Input{model.DecodeInput(seq, token, pos, false)})
	if err != nil {
		return 0, err
	}
	return out[0].Argmax, nil
}
