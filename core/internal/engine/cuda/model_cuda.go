//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/gpu"
	"github.com/iris-vlm/iris/core/internal/par"
)

// rootPrefixes are where lm_head.weight may sit.
var rootPrefixes = []string{""}

// Interface guards.
var (
	_ engine.Model         = (*Model)(nil)
	_ engine.DeviceEncoder = (*Model)(nil)
	_ engine.GreedyModel   = (*Model)(nil)
	_ engine.Sequence      = (*Sequence)(nil)
)

// textLayer holds one decoder layer's device weights; q/k/v and gate/up are fused (rows stacked)
// so that each is one product.
type textLayer struct {
	attnNorm, mlpNorm gpu.DevPtr
	qkv, qkvBias      gpu.DevPtr // [qd+2*kvd, H], [qd+2*kvd] (0 without bias)
	o                 gpu.DevPtr // [H, qd]
	gateUp            gpu.DevPtr // [2*I, H]
	down              gpu.DevPtr // [H, I]
}

// visionBlock holds one ViT block's device weights.
type visionBlock struct {
	norm1, norm2       gpu.DevPtr
	qkv, qkvBias       gpu.DevPtr // [3*VH, VH], [3*VH]
	proj, projBias     gpu.DevPtr
	gateUp, gateUpBias gpu.DevPtr // [2*VI, VH], [2*VI]
	down, downBias     gpu.DevPtr
}

type weights struct {
	embed, lmHead, finalNorm gpu.DevPtr
	layers                   []textLayer
	invFreq                  gpu.DevPtr // f32 [hd/2]
	patch                    gpu.DevPtr // [VH, C*T*P*P]
	blocks                   []visionBlock
	mergerNorm               gpu.DevPtr
	fc1, fc1Bias             gpu.DevPtr // [4*VH, 4*VH]
	fc2, fc2Bias             gpu.DevPtr // [OH, 4*VH]
}

// decodeBufs are the fixed buffers of a decode step (the captured graph bakes their addresses).
type decodeBufs struct {
	x                                                 [2]gpu.DevPtr // the residual stream, alternating
	xn, qkv, att, t, gu, act, logits, logitsF32, part gpu.DevPtr
	pick                                              gpu.DevPtr // iris_argmax_top2's out and vals (16 bytes)
	pickPart                                          gpu.DevPtr // iris_argmax_part's values, then indexes
	ticket                                            gpu.DevPtr // int32 [heads], zero between steps
	splits                                            int
}

// stepArgs mirrors struct Step of iris.cu.
type stepArgs struct {
	Past, Token, Pos, Cap int32
	KCache, VCache        uint64
}

// Model is a checkpoint resident on one GPU.
type Model struct {
	cfg  *engine.Config
	lim  engine.Limits
	opts Options
	dt   dtype
	dev  *gpu.Device

	mu     sync.Mutex // serialises calls: one stream
	closed bool

	// Everything below is used only on the device thread (inside dev.Do).
	k        *kernelSet
	blas     *blas
	stream   *gpu.Stream
	arena    gpu.Buffer // every weight
	w        weights
	dec      decodeBufs
	decArena gpu.Buffer
	stepDev  gpu.Buffer
	stepHost *gpu.HostBuffer
	logits   *gpu.HostBuffer // f32 [vocab], where a call that asks for them leaves its logits
	pick     *gpu.HostBuffer // the argmax of every call's logits and the runner-up (int32 each)
	scratch  map[string]*gpu.Buffer
	staging  *gpu.HostBuffer // pinned upload area
	stageOff int64
	graph    *gpu.Graph
	graphErr error
	kvFree   []*kvCache
	prof     *profiler

	// image rows handed out by EncodeVisionDevice: rowsAll every buffer made (freed at Close),
	// rowsFree those released; rowsMu guards both (Release runs on any goroutine).
	rowsMu   sync.Mutex
	rowsAll  []gpu.Buffer
	rowsFree []gpu.Buffer
}

// rowsBuf is a device buffer of vision-tower output rows (engine.DeviceRows) in the model's
// storage type. Buffers are reused in stream order, so one released while the vision work that
// fills it is still queued is safe to hand out again.
type rowsBuf struct {
	m      *Model
	buf    gpu.Buffer
	tokens int
	once   sync.Once
}

// Release implements engine.DeviceRows.
func (r *rowsBuf) Release() {
	r.once.Do(func() {
		r.m.rowsMu.Lock()
		r.m.rowsFree = append(r.m.rowsFree, r.buf)
		r.m.rowsMu.Unlock()
	})
}

// takeRows hands out the smallest released buffer of at least n bytes, or a new one (on the
// device thread).
func (m *Model) takeRows(n int64, tokens int) (*rowsBuf, error) {
	m.rowsMu.Lock()
	defer m.rowsMu.Unlock()
	best := -1
	for i, b := range m.rowsFree {
		if b.Size >= n && (best < 0 || b.Size < m.rowsFree[best].Size) {
			best = i
		}
	}
	if best >= 0 {
		b := m.rowsFree[best]
		m.rowsFree = append(m.rowsFree[:best], m.rowsFree[best+1:]...)
		return &rowsBuf{m: m, buf: b, tokens: tokens}, nil
	}
	b, err := gpu.Alloc(max(n, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes of image rows: %w", n, err)
	}
	m.rowsAll = append(m.rowsAll, b)
	return &rowsBuf{m: m, buf: b, tokens: tokens}, nil
}

// Load reads dir/config.json (unless cfg is given) and the safetensors shards of an HF-layout
// checkpoint and uploads the weights to the GPU.
func Load(ctx context.Context, dir string, cfg *engine.Config, opts Options) (engine.Model, error) {
	return LoadModel(ctx, dir, cfg, opts)
}

// LoadModel is Load returning the concrete type, for tools that read Info or Profile.
func LoadModel(ctx context.Context, dir string, cfg *engine.Config, opts Options) (*Model, error) {
	if cfg == nil {
		var err error
		if cfg, err = engine.LoadConfig(dir); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, opts: opts, lim: engine.DefaultLimits(cfg), scratch: map[string]*gpu.Buffer{}}
	if opts.Limits != nil {
		m.lim = *opts.Limits
	}
	switch opts.Precision {
	case "", "bf16":
		m.dt = bf16
	case "fp32":
		m.dt = f32
	default:
		return nil, fmt.Errorf("precision %q: want bf16 or fp32", opts.Precision)
	}
	if hd := cfg.Text.HeadDim; !hasFlash(hd) || hd > 256 || hd%8 != 0 {
		return nil, fmt.Errorf("text head_dim %d: %w", hd, engine.ErrUnsupported)
	}
	if vhd := cfg.Vision.Hidden / cfg.Vision.Heads; !hasFlash(vhd) {
		return nil, fmt.Errorf("vision head_dim %d: %w", vhd, engine.ErrUnsupported)
	}
	ck, err := openCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	if m.dev, err = gpu.Open(opts.Device); err != nil {
		return nil, err
	}
	err = m.dev.Do(func() error { return m.init(ctx, ck) })
	if err != nil {
		_ = m.dev.Do(m.release)
		m.dev.Close()
		return nil, err
	}
	return m, nil
}

func hasFlash(hd int) bool {
	for _, d := range flashHeadDims {
		if d == hd {
			return true
		}
	}
	return false
}

// Info describes the device the model runs on.
func (m *Model) Info() gpu.Info { return m.dev.Info() }

// Precision is "bf16" or "fp32".
func (m *Model) Precision() string {
	if m.dt == bf16 {
		return "bf16"
	}
	return "fp32"
}

// Config implements engine.Model.
func (m *Model) Config() *engine.Config { return m.cfg }

// Limits implements engine.Model.
func (m *Model) Limits() engine.Limits { return m.lim }

// Close frees the device memory and the context. It is safe to call more than once.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	err := m.dev.Do(m.release)
	if cerr := m.dev.Close(); err == nil {
		err = cerr
	}
	return err
}

// release frees what init made (on the device thread).
func (m *Model) release() error {
	if m.stream != nil {
		_ = m.stream.Sync()
	}
	_ = m.graph.Destroy()
	for _, c := range m.kvFree {
		_ = c.buf.Free()
	}
	m.kvFree = nil
	for _, b := range m.scratch {
		_ = b.Free()
	}
	m.rowsMu.Lock()
	for i := range m.rowsAll {
		_ = m.rowsAll[i].Free()
	}
	m.rowsAll, m.rowsFree = nil, nil
	m.rowsMu.Unlock()
	_ = m.staging.Free()
	_ = m.logits.Free()
	_ = m.pick.Free()
	_ = m.stepHost.Free()
	_ = m.stepDev.Free()
	_ = m.decArena.Free()
	_ = m.arena.Free()
	if m.prof != nil {
		m.prof.destroy()
	}
	if m.blas != nil {
		m.blas.destroy()
	}
	if m.k != nil {
		_ = m.k.mod.Unload()
	}
	if m.stream != nil {
		_ = m.stream.Destroy()
	}
	return nil
}

func (m *Model) init(ctx context.Context, ck checkpoint) error {
	var err error
	if m.stream, err = gpu.NewStream(); err != nil {
		return err
	}
	if m.k, err = loadKernels(m.dt); err != nil {
		return err
	}
	if m.blas, err = newBlas(m.stream); err != nil {
		return err
	}
	if m.stepDev, err = gpu.Alloc(int64(unsafe.Sizeof(stepArgs{}))); err != nil {
		return err
	}
	if m.stepHost, err = gpu.AllocHost(int64(unsafe.Sizeof(stepArgs{}))); err != nil {
		return err
	}
	if m.pick, err = gpu.AllocHost(16); err != nil {
		return err
	}
	if m.logits, err = gpu.AllocHost(int64(m.cfg.Text.Vocab) * 4); err != nil {
		return err
	}
	if m.staging, err = gpu.AllocHost(64 << 20); err != nil {
		return err
	}
	if m.opts.Profile {
		m.prof = &profiler{}
	}
	if err := m.loadWeights(ctx, ck); err != nil {
		return err
	}
	return m.allocDecode()
}

// ----------------------------------------------------------------------------------------------
// weights

// arenaPlan lays tensors out in one allocation, 256-byte aligned.
type arenaPlan struct {
	size  int64
	items []struct {
		t   *tensor
		off int64
	}
}

func (a *arenaPlan) add(t *tensor, elt int64) int64 {
	off := a.size
	if t == nil { // a binding error, reported by the caller
		return off
	}
	a.items = append(a.items, struct {
		t   *tensor
		off int64
	}{t, off})
	a.size += (t.Numel()*elt + 255) &^ 255
	return off
}

// addPadded reserves rows x cols of elt-byte values for t (rows x n, n <= cols): the tensor is
// uploaded packed at the start of the region, then spread to row stride cols (padRows).
func (a *arenaPlan) addPadded(t *tensor, elt int64, rows, cols int) int64 {
	off := a.add(t, elt)
	a.size = off + (int64(rows)*int64(cols)*elt+255)&^255
	return off
}

// group reserves consecutive tensors as one region (the rows of fused matrices) and returns its
// offset; tensors must be given in row order.
func (a *arenaPlan) group(elt int64, ts ...*tensor) int64 {
	off := a.size
	for _, t := range ts {
		if t == nil {
			continue
		}
		a.items = append(a.items, struct {
			t   *tensor
			off int64
		}{t, a.size})
		a.size += t.Numel() * elt
	}
	a.size = (a.size + 255) &^ 255
	return off
}

func (m *Model) loadWeights(ctx context.Context, ck checkpoint) error {
	t, v := &m.cfg.Text, &m.cfg.Vision
	H, hd, I := t.Hidden, t.HeadDim, t.Intermediate
	qd, kvd := t.Heads*hd, t.KVHeads*hd
	VH, VI, OH := v.Hidden, v.Intermediate, v.OutHidden
	VIp := m.visionInnerPadded()
	unit := v.MergeSize * v.MergeSize
	elt := m.dt.size()

	var errs []error
	get := func(prefixes []string, rows, cols int, format string, args ...any) *tensor {
		name := fmt.Sprintf(format, args...)
		tn, err := ck.find(prefixes, name)
		if err == nil {
			err = shaped(tn, rows, cols)
		}
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		return tn
	}
	var plan arenaPlan
	type slot struct {
		off *int64
		dst *gpu.DevPtr
	}
	var slots []slot
	reserve := func(dst *gpu.DevPtr, off int64) {
		o := off
		slots = append(slots, slot{&o, dst})
	}

	w := &m.w
	reserve(&w.embed, plan.add(get(textPrefixes, t.Vocab, H, "embed_tokens.weight"), elt))
	if !m.cfg.TieEmbeddings {
		reserve(&w.lmHead, plan.add(get(rootPrefixes, t.Vocab, H, "lm_head.weight"), elt))
	}
	w.layers = make([]textLayer, t.Layers)
	for l := range w.layers {
		L := &w.layers[l]
		reserve(&L.attnNorm, plan.add(get(textPrefixes, H, 0, "layers.%d.input_layernorm.weight", l), elt))
		reserve(&L.mlpNorm, plan.add(get(textPrefixes, H, 0, "layers.%d.post_attention_layernorm.weight", l), elt))
		reserve(&L.qkv, plan.group(elt,
			get(textPrefixes, qd, H, "layers.%d.self_attn.q_proj.weight", l),
			get(textPrefixes, kvd, H, "layers.%d.self_attn.k_proj.weight", l),
			get(textPrefixes, kvd, H, "layers.%d.self_attn.v_proj.weight", l)))
		if t.QKVBias {
			reserve(&L.qkvBias, plan.group(elt,
				get(textPrefixes, qd, 0, "layers.%d.self_attn.q_proj.bias", l),
				get(textPrefixes, kvd, 0, "layers.%d.self_attn.k_proj.bias", l),
				get(textPrefixes, kvd, 0, "layers.%d.self_attn.v_proj.bias", l)))
		}
		reserve(&L.o, plan.add(get(textPrefixes, H, qd, "layers.%d.self_attn.o_proj.weight", l), elt))
		reserve(&L.gateUp, plan.group(elt,
			get(textPrefixes, I, H, "layers.%d.mlp.gate_proj.weight", l),
			get(textPrefixes, I, H, "layers.%d.mlp.up_proj.weight", l)))
		reserve(&L.down, plan.add(get(textPrefixes, H, I, "layers.%d.mlp.down_proj.weight", l), elt))
	}
	reserve(&w.finalNorm, plan.add(get(textPrefixes, H, 0, "norm.weight"), elt))

	reserve(&w.patch, plan.add(get(visionPrefixes, VH, v.PatchDim(), "patch_embed.proj.weight"), elt))
	w.blocks = make([]visionBlock, v.Depth)
	for l := range w.blocks {
		B := &w.blocks[l]
		reserve(&B.norm1, plan.add(get(visionPrefixes, VH, 0, "blocks.%d.norm1.weight", l), elt))
		reserve(&B.norm2, plan.add(get(visionPrefixes, VH, 0, "blocks.%d.norm2.weight", l), elt))
		reserve(&B.qkv, plan.add(get(visionPrefixes, 3*VH, VH, "blocks.%d.attn.qkv.weight", l), elt))
		reserve(&B.qkvBias, plan.add(get(visionPrefixes, 3*VH, 0, "blocks.%d.attn.qkv.bias", l), elt))
		reserve(&B.proj, plan.add(get(visionPrefixes, VH, VH, "blocks.%d.attn.proj.weight", l), elt))
		reserve(&B.projBias, plan.add(get(visionPrefixes, VH, 0, "blocks.%d.attn.proj.bias", l), elt))
		reserve(&B.gateUp, plan.group(elt,
			get(visionPrefixes, VI, VH, "blocks.%d.mlp.gate_proj.weight", l),
			get(visionPrefixes, VI, VH, "blocks.%d.mlp.up_proj.weight", l)))
		reserve(&B.gateUpBias, plan.group(elt,
			get(visionPrefixes, VI, 0, "blocks.%d.mlp.gate_proj.bias", l),
			get(visionPrefixes, VI, 0, "blocks.%d.mlp.up_proj.bias", l)))
		// padded to VIp columns: cuBLAS's tensor-core kernels want 16-byte rows (3420 bf16 are not)
		reserve(&B.down, plan.addPadded(get(visionPrefixes, VH, VI, "blocks.%d.mlp.down_proj.weight", l), elt, VH, VIp))
		reserve(&B.downBias, plan.add(get(visionPrefixes, VH, 0, "blocks.%d.mlp.down_proj.bias", l), elt))
	}
	reserve(&w.mergerNorm, plan.add(get(visionPrefixes, VH, 0, "merger.ln_q.weight"), elt))
	reserve(&w.fc1, plan.add(get(visionPrefixes, unit*VH, unit*VH, "merger.mlp.0.weight"), elt))
	reserve(&w.fc1Bias, plan.add(get(visionPrefixes, unit*VH, 0, "merger.mlp.0.bias"), elt))
	reserve(&w.fc2, plan.add(get(visionPrefixes, OH, unit*VH, "merger.mlp.2.weight"), elt))
	reserve(&w.fc2Bias, plan.add(get(visionPrefixes, OH, 0, "merger.mlp.2.bias"), elt))
	if len(errs) > 0 {
		return fmt.Errorf("binding checkpoint: %w", joinErrs(errs))
	}
	invOff := plan.size
	plan.size += int64(hd/2)*4 + 256

	var err error
	if m.arena, err = gpu.Alloc(plan.size); err != nil {
		return fmt.Errorf("weights (%.2f GB): %w", float64(plan.size)/1e9, err)
	}
	for _, s := range slots {
		*s.dst = m.arena.Ptr.Add(*s.off)
	}
	if m.cfg.TieEmbeddings {
		w.lmHead = w.embed
	}
	w.invFreq = m.arena.Ptr.Add(invOff)
	inv := textInvFreq(t)
	if err := gpu.CopyHtoD(w.invFreq, unsafe.Pointer(&inv[0]), int64(len(inv))*4); err != nil {
		return err
	}
	if err := m.upload(ctx, &plan); err != nil {
		return err
	}
	return m.padVisionDown()
}

// visionInnerPadded is the vision MLP's inner size rounded up to 16 bytes of the storage type.
func (m *Model) visionInnerPadded() int {
	per := int(16 / m.dt.size())
	return (m.cfg.Vision.Intermediate + per - 1) / per * per
}

// padVisionDown spreads each vision block's down_proj weight, uploaded packed, to row stride
// visionInnerPadded with zero columns (through a scratch copy: the rows move forward in place).
func (m *Model) padVisionDown() error {
	v := &m.cfg.Vision
	VH, VI, VIp := v.Hidden, v.Intermediate, m.visionInnerPadded()
	if VIp == VI {
		return nil
	}
	n := int64(VH) * int64(VI) * m.dt.size()
	tmp, err := gpu.Alloc(n)
	if err != nil {
		return err
	}
	defer func() { _ = tmp.Free() }()
	for _, B := range m.w.blocks {
		if err := m.stream.CopyDtoD(tmp.Ptr, B.down, n); err != nil {
			return err
		}
		if err := m.k.padRows.Launch(grid2(VH, VIp), gpu.Dim3{X: 256}, 0, m.stream,
			gpu.P(B.down), gpu.P(tmp.Ptr), gpu.I(VH), gpu.I(VI), gpu.I(VIp)); err != nil {
			return err
		}
	}
	return m.stream.Sync()
}

func joinErrs(errs []error) error {
	if len(errs) > 4 {
		return fmt.Errorf("%w (and %d more)", errs[0], len(errs)-1)
	}
	msg := ""
	for i, e := range errs {
		if i > 0 {
			msg += "; "
		}
		msg += e.Error()
	}
	return fmt.Errorf("%s", msg)
}

// upload reads every planned tensor from its file into pinned memory and copies it to the
// arena, converting BF16 <-> F32 on the device where the checkpoint's type differs from the
// model's. Files are read in offset order.
func (m *Model) upload(ctx context.Context, plan *arenaPlan) error {
	items := plan.items
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].t.file != items[j].t.file {
			return items[i].t.file < items[j].t.file
		}
		return items[i].t.Offset < items[j].t.Offset
	})
	const chunk = 64 << 20
	// two pinned halves: one is read into while the other's copy runs
	host, err := gpu.AllocHost(2 * chunk)
	if err != nil {
		return err
	}
	defer func() { _ = host.Free() }()
	conv, err := gpu.Alloc(chunk)
	if err != nil {
		return err
	}
	defer func() { _ = conv.Free() }()
	done := [2]*gpu.Event{}
	for i := range done {
		if done[i], err = gpu.NewEvent(); err != nil {
			return err
		}
		defer func() { _ = done[i].Destroy() }()
		if err := done[i].Record(m.stream); err != nil {
			return err
		}
	}
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	half := 0
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := it.t
		if f == nil || f.Name() != t.file {
			if f != nil {
				f.Close()
			}
			if f, err = os.Open(t.file); err != nil {
				return err
			}
		}
		srcElt := int64(2)
		if t.Dtype == "F32" {
			srcElt = 4
		}
		dst := m.arena.Ptr.Add(it.off)
		const step = chunk // whole elements of either type
		for done0 := int64(0); done0 < t.Size; done0 += step {
			n := min(step, t.Size-done0)
			if err := done[half].Sync(); err != nil {
				return err
			}
			buf := host.Bytes()[int64(half)*chunk : int64(half)*chunk+n]
			if _, err := f.ReadAt(buf, t.Offset+done0); err != nil && err != io.EOF {
				return fmt.Errorf("reading %s from %s: %w", t.Name, t.file, err)
			}
			src := unsafe.Pointer(&buf[0])
			elems := n / srcElt
			out := dst.Add(done0 / srcElt * m.dt.size())
			switch {
			case srcElt == m.dt.size():
				err = m.stream.CopyHtoD(out, src, n)
			case m.dt == f32: // BF16 checkpoint, f32 model
				if err = m.stream.CopyHtoD(conv.Ptr, src, n); err == nil {
					err = m.k.bf16ToF32.Launch(grid1(elems), gpu.Dim3{X: 256}, 0, m.stream, gpu.P(out), gpu.P(conv.Ptr), gpu.L(elems))
				}
			default: // F32 checkpoint, bf16 model
				if err = m.stream.CopyHtoD(conv.Ptr, src, n); err == nil {
					err = m.k.f32ToBF16.Launch(grid1(elems), gpu.Dim3{X: 256}, 0, m.stream, gpu.P(out), gpu.P(conv.Ptr), gpu.L(elems))
				}
			}
			if err != nil {
				return fmt.Errorf("uploading %s: %w", t.Name, err)
			}
			if err := done[half].Record(m.stream); err != nil {
				return err
			}
			// conv is reused by the next chunk: the stream orders it after this conversion
			half ^= 1
		}
	}
	return m.stream.Sync()
}

// grid1 is a 1-D grid for n elements of 256-thread blocks, capped (the kernels stride).
func grid1(n int64) gpu.Dim3 {
	b := (n + 255) / 256
	if b > 65535*4 {
		b = 65535 * 4
	}
	if b < 1 {
		b = 1
	}
	return gpu.Dim3{X: int(b)}
}

// allocDecode allocates the decode step's fixed buffers.
func (m *Model) allocDecode() error {
	t := &m.cfg.Text
	e := m.dt.size()
	qd, kvd := int64(t.Heads*t.HeadDim), int64(t.KVHeads*t.HeadDim)
	m.dec.splits = (min(m.lim.ContextLength, graphContext) + decSK - 1) / decSK
	sizes := []struct {
		p *gpu.DevPtr
		n int64
	}{
		{&m.dec.x[0], int64(t.Hidden) * e}, {&m.dec.x[1], int64(t.Hidden) * e}, {&m.dec.xn, int64(t.Hidden) * e}, {&m.dec.qkv, (qd + 2*kvd) * e},
		{&m.dec.att, qd * e}, {&m.dec.t, int64(t.Hidden) * e}, {&m.dec.ticket, int64(t.Heads) * 4},
		{&m.dec.gu, 2 * int64(t.Intermediate) * e}, {&m.dec.act, int64(t.Intermediate) * e},
		{&m.dec.logits, int64(t.Vocab) * e}, {&m.dec.logitsF32, int64(t.Vocab) * 4}, {&m.dec.pick, 16}, {&m.dec.pickPart, 2 * argmaxParts * 8},
		{&m.dec.part, int64(t.Heads*m.dec.splits*(t.HeadDim+2)) * 4},
	}
	var total int64
	for _, s := range sizes {
		total += (s.n + 255) &^ 255
	}
	var err error
	if m.decArena, err = gpu.Alloc(total); err != nil {
		return err
	}
	off := int64(0)
	for _, s := range sizes {
		*s.p = m.decArena.Ptr.Add(off)
		off += (s.n + 255) &^ 255
	}
	// the decode attention's tickets start at zero; the kernel leaves them so
	return m.stream.Memset32(m.dec.ticket, 0, int64(t.Heads))
}

// graphContext caps the cache length the captured decode graph is sized for (its split count);
// longer sequences decode with plain launches.
const graphContext = 8192

// buf returns the scratch buffer called name with at least n bytes, growing it (the stream is
// drained first: a pending kernel may still use the old one).
func (m *Model) buf(name string, n int64) (gpu.DevPtr, error) {
	b := m.scratch[name]
	if b != nil && b.Size >= n {
		return b.Ptr, nil
	}
	if b != nil {
		if err := m.stream.Sync(); err != nil {
			return 0, err
		}
		_ = b.Free()
	}
	nb, err := gpu.Alloc(max(n, 256)*5/4 + 256)
	if err != nil {
		return 0, fmt.Errorf("scratch %s: %w", name, err)
	}
	m.scratch[name] = &nb
	return nb.Ptr, nil
}

// stage copies host data to dst through the pinned staging area, asynchronously on the model's
// stream; the area is recycled after each call's final synchronisation (resetStage).
func (m *Model) stage(dst gpu.DevPtr, src unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	need := (n + 255) &^ 255
	if m.stageOff+need > int64(len(m.staging.Bytes())) {
		if err := m.stream.Sync(); err != nil {
			return err
		}
		m.stageOff = 0
		if need > int64(len(m.staging.Bytes())) {
			_ = m.staging.Free()
			var err error
			if m.staging, err = gpu.AllocHost(need * 3 / 2); err != nil {
				return err
			}
		}
	}
	area := m.staging.Bytes()[m.stageOff : m.stageOff+n]
	parallelCopy(area, unsafe.Slice((*byte)(src), n))
	m.stageOff += need
	return m.stream.CopyHtoD(dst, unsafe.Pointer(&area[0]), n)
}

func (m *Model) resetStage() { m.stageOff = 0 }

// parallelCopyMin is the size from which parallelCopy splits the copy, in bands of at least
// 256 KiB: one core copies about 10 GB/s, so an image's 3 MB of f32 pixels took 0.3 ms of the
// request before the upload.
const parallelCopyMin = 1 << 20

// parallelCopy is copy(dst, src) for len(dst) == len(src), in bands over the cores when the
// copy is large.
func parallelCopy(dst, src []byte) {
	if len(dst) < parallelCopyMin {
		copy(dst, src)
		return
	}
	// bands of 256 KiB at least, 8 at most
	par.Bands(len(dst), max(256<<10, (len(dst)+7)/8), func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
}

// ----------------------------------------------------------------------------------------------
// sequences

// kvCache is one sequence's keys and values: (layers, cap, kv_heads*head_dim) each.
type kvCache struct {
	buf gpu.Buffer
	cap int
}

func (c *kvCache) k() gpu.DevPtr { return c.buf.Ptr }
func (c *kvCache) v(half int64) gpu.DevPtr {
	return c.buf.Ptr.Add(half)
}

// Sequence is one request's KV cache on the device.
type Sequence struct {
	m      *Model
	kv     *kvCache
	cap    int
	len    int
	logits []float32
}

// kvBucket rounds a capacity up so that caches are reused across requests of similar length.
func kvBucket(n int) int { return (n + 511) &^ 511 }

func (m *Model) kvHalf(capacity int) int64 {
	t := &m.cfg.Text
	return int64(t.Layers) * int64(capacity) * int64(t.KVHeads*t.HeadDim) * m.dt.size()
}

// NewSequence implements engine.Model. The cache comes from the model's pool (allocated on first
// use for its size class, kept for reuse).
func (m *Model) NewSequence(capacity int) (engine.Sequence, error) {
	if err := engine.CheckCapacity(m.lim, capacity); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, engine.ErrClosed
	}
	var kv *kvCache
	err := m.dev.Do(func() error {
		best := -1
		for i, c := range m.kvFree {
			if c.cap >= capacity && (best < 0 || c.cap < m.kvFree[best].cap) {
				best = i
			}
		}
		if best >= 0 {
			kv = m.kvFree[best]
			m.kvFree = append(m.kvFree[:best], m.kvFree[best+1:]...)
			return nil
		}
		c := min(kvBucket(capacity), max(m.lim.ContextLength, capacity))
		b, err := gpu.Alloc(2 * m.kvHalf(c))
		if err != nil {
			return fmt.Errorf("KV cache for %d tokens: %w", c, err)
		}
		kv = &kvCache{buf: b, cap: c}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Sequence{m: m, kv: kv, cap: capacity, logits: make([]float32, m.cfg.Text.Vocab)}, nil
}

// Len implements engine.Sequence.
func (s *Sequence) Len() int {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	return s.len
}

// Cap implements engine.Sequence.
func (s *Sequence) Cap() int { return s.cap }

// Reset implements engine.Sequence.
func (s *Sequence) Reset() {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	s.len = 0
}

// Close implements engine.Sequence: the cache goes back to the model's pool. It is safe to call
// more than once, also after the model is closed.
func (s *Sequence) Close() error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.kv == nil {
		return nil
	}
	if !s.m.closed {
		s.m.kvFree = append(s.m.kvFree, s.kv) // only the device thread reads the pool, under mu
	}
	s.kv = nil
	return nil
}

func (m *Model) sequence(seq engine.Sequence) (*Sequence, error) {
	s, ok := seq.(*Sequence)
	if !ok || s.m != m {
		return nil, fmt.Errorf("sequence from another model: %w", engine.ErrInvalidInput)
	}
	if s.kv == nil {
		return nil, engine.ErrClosed
	}
	return s, nil
}

// setStep writes the sequence's step arguments to pinned memory; the next call copies them to
// the device on the stream (inside the decode graph, as its first node).
func (m *Model) setStep(s *Sequence, token, pos int32) {
	st := (*stepArgs)(m.stepHost.Ptr())
	*st = stepArgs{Past: int32(s.len), Token: token, Pos: pos, Cap: int32(s.kv.cap),
		KCache: uint64(s.kv.k()), VCache: uint64(s.kv.v(m.kvHalf(s.kv.cap)))}
}

// ----------------------------------------------------------------------------------------------
// profiling

// profiler accumulates GPU time between named marks of a call.
type profiler struct {
	events []*gpu.Event
	names  []string
	n      int
	totals map[string]time.Duration
	counts map[string]int
}

// mark records that the work enqueued since the previous mark belongs to stage name.
func (m *Model) mark(name string) error {
	p := m.prof
	if p == nil {
		return nil
	}
	if p.totals == nil {
		p.totals, p.counts = map[string]time.Duration{}, map[string]int{}
	}
	if p.n == len(p.events) {
		e, err := gpu.NewEvent()
		if err != nil {
			return err
		}
		p.events = append(p.events, e)
		p.names = append(p.names, "")
	}
	p.names[p.n] = name
	err := p.events[p.n].Record(m.stream)
	p.n++
	return err
}

// collect adds the durations of the call's marks (after its final sync); the first mark opens.
func (m *Model) collect() {
	p := m.prof
	if p == nil || p.n == 0 {
		return
	}
	for i := 1; i < p.n; i++ {
		if d, err := p.events[i].Since(p.events[i-1]); err == nil {
			p.totals[p.names[i]] += d
			p.counts[p.names[i]]++
		}
	}
	p.n = 0
}

func (p *profiler) destroy() {
	for _, e := range p.events {
		_ = e.Destroy()
	}
}

// SetProfile turns the per-stage GPU timing of Options.Profile on or off.
func (m *Model) SetProfile(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	_ = m.dev.Do(func() error {
		switch {
		case on && m.prof == nil:
			m.prof = &profiler{}
		case !on && m.prof != nil:
			m.prof.destroy()
			m.prof = nil
		}
		return nil
	})
}

// StageTime is the GPU time of one stage over the calls since the last Profile.
type StageTime struct {
	Stage string
	Total time.Duration
	Calls int
}

// Profile returns and clears the per-stage GPU times (Options.Profile), sorted by stage name.
func (m *Model) Profile() []StageTime {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []StageTime
	if m.prof == nil {
		return nil
	}
	for k, v := range m.prof.totals {
		out = append(out, StageTime{Stage: k, Total: v, Calls: m.prof.counts[k]})
	}
	m.prof.totals, m.prof.counts = nil, nil
	sort.Slice(out, func(i, j int) bool { return out[i].Stage < out[j].Stage })
	return out
}

// textInvFreq is compute_default_rope_parameters in F32: 1 / theta^(arange(0, hd, 2)/hd).
func textInvFreq(t *engine.TextConfig) []float32 {
	out := make([]float32, t.HeadDim/2)
	for i := range out {
		e := float32(2*i) / float32(t.HeadDim)
		out[i] = 1 / float32(math.Pow(t.RopeTheta, float64(e)))
	}
	return out
}
