// Package native is Iris's CPU engine: a C forward pass (iris_engine.h and one .c file per
// concern) behind cgo, implementing engine.Model for Qwen2-VL-style checkpoints.
//
// Weights are mapped from the safetensors shards and used in place (BF16 and F32; F16 is widened
// at load); every computation is F32, which reproduces transformers run in float32 on the same
// checkpoint. Matrix products use AVX2/FMA kernels when the CPU has them and portable C otherwise,
// on a pthread pool owned by the model.
//
// # Notes
//
//   - A Model is safe for concurrent use; its calls are serialised, each using all the model's
//     threads.
//   - A Sequence belongs to one request at a time.
//   - Close on a Model or Sequence is idempotent; a Sequence may outlive its Model (it then only
//     reports engine.ErrClosed).
package native

/*
#cgo CFLAGS: -O3 -std=gnu11 -Wall -Wextra -Wno-unused-parameter
#cgo LDFLAGS: -lm -lpthread
#include <stdlib.h>
#include "iris_engine.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/engine"
)

// Interface guards.
var (
	_ engine.Model    = (*Model)(nil)
	_ engine.Sequence = (*Sequence)(nil)
)

// StatusError is a failure status from the C engine.
type StatusError struct {
	Op     string // the call that failed, e.g. "load"
	Code   int    // the iris_status value
	Msg    string // iris_status_string
	Detail string // what the engine said about it, if anything
}

func (e *StatusError) Error() string {
	if e.Detail != "" && e.Detail != e.Msg {
		return fmt.Sprintf("native %s: %s: %s", e.Op, e.Msg, e.Detail)
	}
	return fmt.Sprintf("native %s: %s", e.Op, e.Msg)
}

// Unwrap maps the statuses a caller can act on to the engine's sentinel errors.
func (e *StatusError) Unwrap() error {
	switch C.iris_status(e.Code) {
	case C.IRIS_ERR_CAPACITY:
		return engine.ErrContextExceeded
	case C.IRIS_ERR_INVALID:
		return engine.ErrInvalidInput
	}
	return nil
}

// check turns a status into an error; it is the only place that does.
func check(op string, s C.iris_status, detail string) error {
	if s == C.IRIS_OK {
		return nil
	}
	return &StatusError{Op: op, Code: int(s), Msg: C.GoString(C.iris_status_string(s)), Detail: detail}
}

// Options tune a load.
type Options struct {
	// Threads is the size of the model's thread pool; 0 means one per online CPU.
	Threads int
	// Kernels caps the matmul kernels: "" (the best the CPU has), "avx512", "avx2" or
	// "generic" (portable C). Results agree to rounding; tests pin each one.
	Kernels string
	// Limits bound requests; nil means engine.DefaultLimits of the config.
	Limits *engine.Limits
}

// Model is a checkpoint loaded into the C engine.
type Model struct {
	mu  sync.Mutex // serialises every call into C
	m   *C.iris_model
	cfg *engine.Config
	lim engine.Limits
	// calls counts entries into the forward pass, so tests can prove a refusal ran nothing.
	calls atomic.Int64
}

// Load reads dir/config.json and maps the safetensors shards of an HF-layout checkpoint.
func Load(dir string, opts Options) (*Model, error) {
	cfg, err := engine.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	shards, err := engine.Shards(dir)
	if err != nil {
		return nil, err
	}
	return Open(cfg, shards, opts)
}

// params maps the config onto the C graph description.
func params(cfg *engine.Config, opts Options) (C.iris_model_params, error) {
	p := C.iris_model_params_default()
	t, v := &cfg.Text, &cfg.Vision
	if v.Depth > C.IRIS_MAX_BLOCKS {
		return p, fmt.Errorf("vision depth %d over %d: %w", v.Depth, C.IRIS_MAX_BLOCKS, engine.ErrUnsupported)
	}
	p.hidden, p.layers, p.heads = C.int(t.Hidden), C.int(t.Layers), C.int(t.Heads)
	p.kv_heads, p.head_dim, p.intermediate = C.int(t.KVHeads), C.int(t.HeadDim), C.int(t.Intermediate)
	p.vocab = C.int(t.Vocab)
	p.rms_eps, p.rope_theta = C.float(t.RMSNormEps), C.float(t.RopeTheta)
	for i, s := range t.MRopeSection {
		p.mrope_section[i] = C.int(s)
	}
	p.tie_embeddings = cbool(cfg.TieEmbeddings)
	p.qkv_bias = cbool(t.QKVBias)
	p.v_depth, p.v_hidden, p.v_heads = C.int(v.Depth), C.int(v.Hidden), C.int(v.Heads)
	p.v_intermediate, p.v_in_channels = C.int(v.Intermediate), C.int(v.InChannels)
	p.v_patch, p.v_temporal_patch, p.v_merge = C.int(v.PatchSize), C.int(v.TemporalPatchSize), C.int(v.MergeSize)
	p.v_window, p.v_out_hidden = C.int(v.WindowSize), C.int(v.OutHidden)
	p.v_rope_theta, p.v_eps = C.float(v.RopeTheta), C.float(v.NormEps)
	for _, b := range v.FullAttBlocks {
		p.v_fullatt[b] = 1
	}
	p.threads = C.int(opts.Threads)
	switch opts.Kernels {
	case "":
		p.kernels = C.IRIS_KERNELS_BEST
	case "generic":
		p.kernels = C.IRIS_KERNELS_GENERIC
	case "avx2":
		p.kernels = C.IRIS_KERNELS_AVX2
	case "avx512":
		p.kernels = C.IRIS_KERNELS_AVX512
	default:
		return p, fmt.Errorf("kernels %q: want avx512, avx2 or generic", opts.Kernels)
	}
	return p, nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Open loads the weights of cfg from shards.
func Open(cfg *engine.Config, shards []string, opts Options) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p, err := params(cfg, opts)
	if err != nil {
		return nil, err
	}
	lim := engine.DefaultLimits(cfg)
	if opts.Limits != nil {
		lim = *opts.Limits
	}
	paths := make([]*C.char, len(shards))
	for i, s := range shards {
		paths[i] = C.CString(s)
	}
	defer func() {
		for _, s := range paths {
			C.free(unsafe.Pointer(s))
		}
	}()
	// The array of C pointers lives in C memory: cgo forbids passing Go memory that holds
	// pointers, even to C memory.
	arr := (**C.char)(C.malloc(C.size_t(len(paths)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	defer C.free(unsafe.Pointer(arr))
	copy(unsafe.Slice(arr, len(paths)), paths)
	var errbuf [512]C.char
	var m *C.iris_model
	s := C.iris_model_load(arr, C.int(len(paths)), &p, &m, &errbuf[0], C.size_t(len(errbuf)))
	if err := check("load", s, C.GoString(&errbuf[0])); err != nil {
		return nil, err
	}
	return &Model{m: m, cfg: cfg, lim: lim}, nil
}

// Config implements engine.Model.
func (m *Model) Config() *engine.Config { return m.cfg }

// Limits implements engine.Model.
func (m *Model) Limits() engine.Limits { return m.lim }

// Kernels names the matmul kernels in use: "avx512", "avx2" or "generic".
func (m *Model) Kernels() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		return ""
	}
	return C.GoString(C.iris_model_kernels(m.m))
}

// Close frees the model. It is safe to call more than once.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m != nil {
		C.iris_model_free(m.m)
		m.m = nil
	}
	return nil
}

// EncodeVision implements engine.Model.
func (m *Model) EncodeVision(ctx context.Context, img engine.Image) (*engine.Embeddings, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := engine.CheckImage(m.cfg, m.lim, img); err != nil {
		return nil, err
	}
	v := &m.cfg.Vision
	g := img.Grid
	e := &engine.Embeddings{Tokens: g.Tokens(v.MergeSize), Dim: v.OutHidden}
	e.Data = make([]float32, e.Tokens*e.Dim)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		return nil, engine.ErrClosed
	}
	m.calls.Add(1)
	s := C.iris_vision_encode(m.m, (*C.float)(&img.Pixels[0]), C.int(g.Patches()), C.int(v.PatchDim()),
		C.int(g.T), C.int(g.H), C.int(g.W), (*C.float)(&e.Data[0]))
	if err := check("vision", s, ""); err != nil {
		return nil, err
	}
	return e, nil
}

// Sequence is a KV cache in C memory.
type Sequence struct {
	m      *Model
	s      *C.iris_seq
	cap    int
	logits []float32
}

// NewSequence implements engine.Model.
func (m *Model) NewSequence(capacity int) (engine.Sequence, error) {
	if err := engine.CheckCapacity(m.lim, capacity); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		return nil, engine.ErrClosed
	}
	var s *C.iris_seq
	if err := check("new sequence", C.iris_seq_new(m.m, C.int(capacity), &s), ""); err != nil {
		return nil, err
	}
	return &Sequence{m: m, s: s, cap: capacity, logits: make([]float32, m.cfg.Text.Vocab)}, nil
}

// Len implements engine.Sequence.
func (s *Sequence) Len() int {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	return int(C.iris_seq_len(s.s))
}

// Cap implements engine.Sequence.
func (s *Sequence) Cap() int { return s.cap }

// Reset implements engine.Sequence.
func (s *Sequence) Reset() {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	C.iris_seq_reset(s.s)
}

// Close implements engine.Sequence; it is safe to call more than once.
func (s *Sequence) Close() error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.s != nil {
		C.iris_seq_free(s.s)
		s.s = nil
	}
	return nil
}

func (m *Model) sequence(seq engine.Sequence) (*Sequence, error) {
	s, ok := seq.(*Sequence)
	if !ok || s.m != m {
		return nil, fmt.Errorf("sequence from another model: %w", engine.ErrInvalidInput)
	}
	return s, nil
}

// Prefill implements engine.Model.
func (m *Model) Prefill(ctx context.Context, seq engine.Sequence, p engine.Prompt) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := m.sequence(seq)
	if err != nil {
		return nil, err
	}
	in, err := p.Flatten(m.cfg)
	if err != nil {
		return nil, err
	}
	if len(in.Device) > 0 {
		return nil, fmt.Errorf("image embeddings on another model's device: %w", engine.ErrInvalidInput)
	}
	n, rows := len(p.IDs), len(in.Slots)
	pos, slots, embeds := in.Pos, in.Slots, in.Embeds
	var embPtr *C.float
	var slotPtr *C.int32_t
	if rows > 0 {
		embPtr, slotPtr = (*C.float)(&embeds[0]), (*C.int32_t)(&slots[0])
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || s.s == nil {
		return nil, engine.ErrClosed
	}
	m.calls.Add(1)
	st := C.iris_prefill(m.m, s.s, (*C.int32_t)(&p.IDs[0]), C.int(n), embPtr, slotPtr, C.int(rows),
		(*C.int32_t)(&pos[0]), (*C.float)(&s.logits[0]))
	if err := check("prefill", st, ""); err != nil {
		return nil, err
	}
	return s.logits, nil
}

// DecodeStep implements engine.Model.
func (m *Model) DecodeStep(ctx context.Context, seq engine.Sequence, token int32, pos int32) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := m.sequence(seq)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || s.s == nil {
		return nil, engine.ErrClosed
	}
	m.calls.Add(1)
	st := C.iris_decode(m.m, s.s, C.int32_t(token), C.int32_t(pos), (*C.float)(&s.logits[0]))
	if err := check("decode", st, ""); err != nil {
		return nil, err
	}
	return s.logits, nil
}
