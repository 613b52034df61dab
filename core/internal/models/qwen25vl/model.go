// Package qwen25vl is the Qwen2.5-VL family, written once over the op set of core/internal/ml:
// its checkpoint's tensor names, the vision tower (Conv3d patches, RMSNorm blocks with 2-D RoPE and
// window attention, a 2x2 merger), and the Qwen2 decoder with multimodal RoPE, batch-first. Every
// backend runs it; none of them knows it (transformers 5.17 models/qwen2_5_vl is the reference).
package qwen25vl

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/ml"
)

// ModelType is config.json's model_type of the family.
const ModelType = "qwen2_5_vl"

// Tensor name prefixes: the hub's layout first, then transformers 5's module paths.
var (
	textPrefixes   = []string{"model.", "model.language_model."}
	visionPrefixes = []string{"visual.", "model.visual."}
	rootPrefixes   = []string{"", "model."}
)

type textLayer struct {
	attnNorm, mlpNorm   ml.Tensor
	q, k, v, o          ml.Tensor
	qBias, kBias, vBias ml.Tensor
	gate, up, down      ml.Tensor
}

type visionBlock struct {
	norm1, norm2              ml.Tensor
	qkv, qkvBias, proj, projB ml.Tensor
	gate, gateB, up, upB      ml.Tensor
	down, downB               ml.Tensor
}

type weights struct {
	embed, lmHead, finalNorm ml.Tensor
	layers                   []textLayer

	patch      ml.Tensor
	blocks     []visionBlock
	mergerNorm ml.Tensor
	fc1, fc1B  ml.Tensor
	fc2, fc2B  ml.Tensor
}

// Options tune a model.
type Options struct {
	// KVTokens sizes the KV pool; 0 picks max(context, min(16 contexts, 1 GiB of cache)).
	KVTokens int
	// BlockTokens is the pool's block size; 0 means 16.
	BlockTokens int
}

// Model is a Qwen2.5-VL checkpoint on a backend. It implements engine.Model, engine.Batcher,
// engine.GreedyModel and engine.Pooled; its calls are serialised (the backend runs one at a time).
type Model struct {
	mu     sync.Mutex
	b      ml.Backend
	ck     *ml.Checkpoint
	cfg    *engine.Config
	lim    engine.Limits
	w      weights
	kv     *ml.KVPool
	closed bool

	invFreq  []float32 // text rotary frequencies
	freqAxis []int     // which position row (t, h, w) drives each frequency
	// logitRows are the logits buffers of closed sequences, for the next ones (a vocabulary's
	// worth each: 600 KB at 152k).
	logitRows sync.Pool
	// ropeCos and ropeSin are the angles of positions 0, 1, ... (hd/2 values each), grown on
	// demand (angles); ropeMu guards them (plans are made outside mu).
	ropeMu           sync.Mutex
	ropeCos, ropeSin []float32

	// image rows kept in backend memory (EncodeVisionDevice): every buffer made, and those
	// released; rowsMu guards rowsFree (Release runs on any goroutine).
	rowsMu   sync.Mutex
	rowsFree []ml.Tensor
}

// Interface guards.
var (
	_ engine.Model         = (*Model)(nil)
	_ engine.Batcher       = (*Model)(nil)
	_ engine.GreedyModel   = (*Model)(nil)
	_ engine.Pooled        = (*Model)(nil)
	_ engine.DeviceEncoder = (*Model)(nil)
)

// New binds the checkpoint's weights on b. The model owns b and ck from here on (Close closes
// them), also when New fails.
func New(b ml.Backend, ck *ml.Checkpoint, cfg *engine.Config, lim engine.Limits, opts Options) (*Model, error) {
	m := &Model{b: b, ck: ck, cfg: cfg, lim: lim}
	if err := ml.Do(b, func() error { return m.init(opts) }); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func (m *Model) init(opts Options) error {
	if m.cfg.ModelType != ModelType {
		return fmt.Errorf("model_type %q is not %s: %w", m.cfg.ModelType, ModelType, engine.ErrUnsupported)
	}
	if err := m.cfg.Validate(); err != nil {
		return err
	}
	if err := m.bind(); err != nil {
		return err
	}
	t := &m.cfg.Text
	// Qwen2_5_VLRotaryEmbedding: inv_freq = 1/theta^(arange(0, hd, 2)/hd) in F32; frequency chunk i
	// of mrope_section follows position row i.
	half := t.HeadDim / 2
	m.invFreq = invFreq(half, t.HeadDim, t.RopeTheta)
	for axis, n := range t.MRopeSection {
		for range n {
			m.freqAxis = append(m.freqAxis, axis)
		}
	}
	kvd := t.KVHeads * t.HeadDim
	block := opts.BlockTokens
	if block <= 0 {
		block = 16
	}
	tokens := opts.KVTokens
	if tokens <= 0 {
		perToken := int64(2*t.Layers*kvd) * m.b.DType().Size()
		tokens = int(min(16*int64(m.lim.ContextLength), (1<<30)/perToken))
		tokens = max(tokens, m.lim.ContextLength)
	}
	var err error
	m.kv, err = ml.NewKVPool(m.b, t.Layers, kvd, block, (tokens+block-1)/block, m.b.DType())
	if err != nil {
		return err
	}
	return nil
}

// invFreq is compute_default_rope_parameters in F32: 1 / theta^(arange(0, dim, 2)/dim), n values.
func invFreq(n, dim int, theta float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		e := float32(2*i) / float32(dim)
		out[i] = 1 / float32(math.Pow(theta, float64(e)))
	}
	return out
}

// bind maps every tensor the graph needs, by its checkpoint name.
func (m *Model) bind() error {
	ld := ml.NewLoader(m.b, m.ck)
	t, v := &m.cfg.Text, &m.cfg.Vision
	H, hd, I := t.Hidden, t.HeadDim, t.Intermediate
	qd, kvd := t.Heads*hd, t.KVHeads*hd
	w := &m.w
	w.embed = ld.Matrix(textPrefixes, "embed_tokens.weight", t.Vocab, H) // also lm_head's when tied
	if m.cfg.TieEmbeddings {
		w.lmHead = w.embed
	} else {
		w.lmHead = ld.Matrix(rootPrefixes, "lm_head.weight", t.Vocab, H)
	}
	w.finalNorm = ld.Vector(textPrefixes, "norm.weight", H)
	w.layers = make([]textLayer, t.Layers)
	for l := range w.layers {
		L := &w.layers[l]
		p := fmt.Sprintf("layers.%d.", l)
		L.attnNorm = ld.Vector(textPrefixes, p+"input_layernorm.weight", H)
		L.q = ld.Matrix(textPrefixes, p+"self_attn.q_proj.weight", qd, H)
		L.k = ld.Matrix(textPrefixes, p+"self_attn.k_proj.weight", kvd, H)
		L.v = ld.Matrix(textPrefixes, p+"self_attn.v_proj.weight", kvd, H)
		if t.QKVBias {
			L.qBias = ld.Vector(textPrefixes, p+"self_attn.q_proj.bias", qd)
			L.kBias = ld.Vector(textPrefixes, p+"self_attn.k_proj.bias", kvd)
			L.vBias = ld.Vector(textPrefixes, p+"self_attn.v_proj.bias", kvd)
		}
		L.o = ld.Matrix(textPrefixes, p+"self_attn.o_proj.weight", H, qd)
		L.mlpNorm = ld.Vector(textPrefixes, p+"post_attention_layernorm.weight", H)
		L.gate = ld.Matrix(textPrefixes, p+"mlp.gate_proj.weight", I, H)
		L.up = ld.Matrix(textPrefixes, p+"mlp.up_proj.weight", I, H)
		L.down = ld.Matrix(textPrefixes, p+"mlp.down_proj.weight", H, I)
	}

	VH, VI, unit := v.Hidden, v.Intermediate, v.MergeSize*v.MergeSize
	w.patch = ld.Matrix(visionPrefixes, "patch_embed.proj.weight", VH, v.PatchDim())
	w.blocks = make([]visionBlock, v.Depth)
	for l := range w.blocks {
		B := &w.blocks[l]
		p := fmt.Sprintf("blocks.%d.", l)
		B.norm1 = ld.Vector(visionPrefixes, p+"norm1.weight", VH)
		B.norm2 = ld.Vector(visionPrefixes, p+"norm2.weight", VH)
		B.qkv = ld.Matrix(visionPrefixes, p+"attn.qkv.weight", 3*VH, VH)
		B.qkvBias = ld.Vector(visionPrefixes, p+"attn.qkv.bias", 3*VH)
		B.proj = ld.Matrix(visionPrefixes, p+"attn.proj.weight", VH, VH)
		B.projB = ld.Vector(visionPrefixes, p+"attn.proj.bias", VH)
		// gate then up, their biases after (a backend placing tensors in load order can then run
		// each pair as one product, as it does q, k and v)
		B.gate = ld.Matrix(visionPrefixes, p+"mlp.gate_proj.weight", VI, VH)
		B.up = ld.Matrix(visionPrefixes, p+"mlp.up_proj.weight", VI, VH)
		B.gateB = ld.Vector(visionPrefixes, p+"mlp.gate_proj.bias", VI)
		B.upB = ld.Vector(visionPrefixes, p+"mlp.up_proj.bias", VI)
		B.down = ld.Matrix(visionPrefixes, p+"mlp.down_proj.weight", VH, VI)
		B.downB = ld.Vector(visionPrefixes, p+"mlp.down_proj.bias", VH)
	}
	w.mergerNorm = ld.Vector(visionPrefixes, "merger.ln_q.weight", VH)
	w.fc1 = ld.Matrix(visionPrefixes, "merger.mlp.0.weight", unit*VH, unit*VH)
	w.fc1B = ld.Vector(visionPrefixes, "merger.mlp.0.bias", unit*VH)
	w.fc2 = ld.Matrix(visionPrefixes, "merger.mlp.2.weight", v.OutHidden, unit*VH)
	w.fc2B = ld.Vector(visionPrefixes, "merger.mlp.2.bias", v.OutHidden)
	return ld.Err()
}

// Config implements engine.Model.
func (m *Model) Config() *engine.Config { return m.cfg }

// Limits implements engine.Model.
func (m *Model) Limits() engine.Limits { return m.lim }

// Backend is the backend the model runs on.
func (m *Model) Backend() ml.Backend { return m.b }

// KVUse implements engine.Pooled.
func (m *Model) KVUse() (used, total int) {
	if m.kv == nil {
		return 0, 0
	}
	return m.kv.Use()
}

// Close releases the backend and the checkpoint. It is safe to call more than once.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
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
	m      *Model
	kv     *ml.KVCache
	logits []float32
}

// NewSequence implements engine.Model.
func (m *Model) NewSequence(capacity int) (engine.Sequence, error) {
	if err := engine.CheckCapacity(m.lim, capacity); err != nil {
		return nil, err
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, engine.ErrClosed
	}
	kv, err := m.kv.Alloc(capacity)
	if err != nil {
		return nil, err
	}
	return &sequence{m: m, kv: kv}, nil
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
func (m *Model) takeLogits() []float32 {
	if p, ok := m.logitRows.Get().(*[]float32); ok && len(*p) == m.cfg.Text.Vocab {
		return *p
	}
	return make([]float32, m.cfg.Text.Vocab)
}

// EncodeVision implements engine.Model.
func (m *Model) EncodeVision(ctx context.Context, img engine.Image) (*engine.Embeddings, error) {
	return m.encode(ctx, img, false)
}

// EncodeVisionDevice implements engine.DeviceEncoder: the rows stay in backend memory for this
// model's prefill.
func (m *Model) EncodeVisionDevice(ctx context.Context, img engine.Image) (*engine.Embeddings, error) {
	return m.encode(ctx, img, true)
}

func (m *Model) encode(ctx context.Context, img engine.Image, keep bool) (*engine.Embeddings, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := engine.CheckImage(m.cfg, m.lim, img); err != nil {
		return nil, err
	}
	v := &m.cfg.Vision
	e := &engine.Embeddings{Tokens: img.Grid.Tokens(v.MergeSize), Dim: v.OutHidden}
	if !keep {
		e.Data = make([]float32, e.Tokens*e.Dim)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, engine.ErrClosed
	}
	b := m.b
	err := ml.Do(b, func() error {
		if !keep {
			res := b.Scratch("v.out", e.Tokens, e.Dim)
			m.visionOps(img, res)
			b.Read(e.Data, res)
			return b.Sync()
		}
		rows, err := m.takeRows(e.Tokens)
		if err != nil {
			return err
		}
		m.visionOps(img, rows.t.RowsAt(0, e.Tokens))
		if err := b.Sync(); err != nil {
			rows.Release()
			return err
		}
		e.Device = rows
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vision: %w", err)
	}
	return e, nil
}

// imageRows are vision-tower outputs kept in backend memory (engine.DeviceRows). Buffers are
// reused in op order, so one released while the work that fills it is still queued is safe to
// hand out again.
type imageRows struct {
	m    *Model
	t    ml.Tensor
	once sync.Once
}

// Release implements engine.DeviceRows.
func (r *imageRows) Release() {
	r.once.Do(func() {
		r.m.rowsMu.Lock()
		r.m.rowsFree = append(r.m.rowsFree, r.t)
		r.m.rowsMu.Unlock()
	})
}

// takeRows hands out the smallest released buffer of at least n rows, or a new one.
func (m *Model) takeRows(n int) (*imageRows, error) {
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
	t, err := m.b.Alloc(max(n, 256), m.cfg.Vision.OutHidden, m.b.DType())
	if err != nil {
		return nil, fmt.Errorf("image rows: %w", err)
	}
	return &imageRows{m: m, t: t}, nil
}

// Prefill implements engine.Model.
func (m *Model) Prefill(ctx context.Context, seq engine.Sequence, p engine.Prompt) ([]float32, error) {
	out, err := m.Forward(ctx, []engine.Input{{Seq: seq, IDs: p.IDs, Positions: p.Positions, Images: p.Images, Logits: true}})
	if err != nil {
		return nil, err
	}
	return out[0].Logits, nil
}

// PrefillGreedy implements engine.GreedyModel.
func (m *Model) PrefillGreedy(ctx context.Context, seq engine.Sequence, p engine.Prompt) (int32, error) {
	out, err := m.Forward(ctx, []engine.Input{{Seq: seq, IDs: p.IDs, Positions: p.Positions, Images: p.Images}})
	if err != nil {
		return 0, err
	}
	return out[0].Argmax, nil
}

// DecodeStep implements engine.Model.
func (m *Model) DecodeStep(ctx context.Context, seq engine.Sequence, token int32, pos int32) ([]float32, error) {
	out, err := m.Forward(ctx, []engine.Input{engine.DecodeInput(seq, token, pos, true)})
	if err != nil {
		return nil, err
	}
	return out[0].Logits, nil
}

// DecodeStepGreedy implements engine.GreedyModel.
func (m *Model) DecodeStepGreedy(ctx context.Context, seq engine.Sequence, token int32, pos int32) (int32, error) {
	out, err := m.Forward(ctx, []engine.Input{engine.DecodeInput(seq, token, pos, false)})
	if err != nil {
		return 0, err
	}
	return out[0].Argmax, nil
}
