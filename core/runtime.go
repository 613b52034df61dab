package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/imageio"
	"github.com/iris-vlm/iris/core/internal/plugin"
)

// Config configures a Runtime.
type Config struct {
	// Bundles are bundle directories to load.
	Bundles []string
	// Workers is how many requests of one model run at once (default DefaultWorkers): the
	// engine's scheduler batches their passes, up to this many inputs in one.
	Workers int
	// BatchTokens caps the tokens of one engine pass (default DefaultBatchTokens): prefill
	// chunks of at most this many tokens.
	BatchTokens int
	// KVCacheTokens sizes each model's KV-cache pool in tokens (0: the engine's default, the
	// larger of one context and the smaller of 16 contexts and 1 GiB of cache). Requests whose
	// sequences do not fit wait for blocks.
	KVCacheTokens int
	// VisionAlone runs the vision tower on one image at a time instead of the images of a
	// scheduler round in one pass (batched vision, the default).
	VisionAlone bool
	// VisionPatches caps the image patches of one vision-tower pass (0: the engine's default).
	VisionPatches int
	// DecodeApart runs decode steps in passes of their own instead of beside a round's prefill
	// chunks (engine.SchedulerOptions.DecodeApart).
	DecodeApart bool
	// DecodeByRequest has each decode step sent by its request after it took the token before,
	// instead of queued by the scheduler (engine.SchedulerOptions.DecodeByRequest).
	DecodeByRequest bool
	// DecodeHold is how long a round of decode steps alone (at least DecodeHoldRows of them,
	// 0: 32) may wait for the prompts of images in the tower, whose prefill pass then carries
	// them (engine.SchedulerOptions.DecodeHold; 0: DefaultDecodeHold, negative: never).
	DecodeHold     time.Duration
	DecodeHoldRows int
	// VisionSerial runs a cuda model's vision tower between the decoder's passes instead of
	// beside them on a stream of its own.
	VisionSerial bool
	// VisionLanes is how many tower passes of a cuda model run at once beside the decoder's
	// passes, a stream each (0: 2; ignored with VisionSerial).
	VisionLanes int
	// FusedSwiGLU runs a cuda bf16 model's gate/up products of prefill and tower passes with
	// SwiGLU (and biases) in their epilogue (cuda.Options.QuackSwiGLU: builds with the quack tag
	// only; others fail to load).
	FusedSwiGLU bool
	// PromptHeads is how many prompt heads (the tokens before a prompt's first image: the chat
	// template's system turn) keep their KV rows for the next prompts that start with them
	// (0: 8; negative: none).
	PromptHeads int
	// QueueDepth is how many more may wait; beyond it a request is refused as busy (default
	// DefaultQueueDepth).
	QueueDepth int
	// CacheDir holds compiled plugins across restarts; empty disables the disk cache.
	CacheDir string
	// EmbeddingCacheBytes caps each model's image-embedding cache (vision-tower outputs of
	// recent images, reused for the same image, bundle and plan); 0 (or less) disables it. Servers set
	// DefaultEmbeddingCacheBytes unless configured otherwise.
	EmbeddingCacheBytes int64
}

// Option changes how Open builds a Runtime.
type Option func(*options)

type options struct {
	vision     VisionTaskFactory
	text       TextTaskFactory
	registerer prometheus.Registerer
	tracer     trace.TracerProvider
	logger     *slog.Logger
}

// WithVisionTask sets the factory of vision-language tasks (the default runs the family plugin,
// the tokenizer and the engine the bundle names).
func WithVisionTask(f VisionTaskFactory) Option { return func(o *options) { o.vision = f } }

// WithTextTask sets the factory of text-generation tasks.
func WithTextTask(f TextTaskFactory) Option { return func(o *options) { o.text = f } }

// WithRegisterer sets where the runtime's Prometheus collectors go.
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.registerer = r } }

// WithTracerProvider sets the provider of the runtime's spans (default: the global one).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tracer = tp } }

// WithLogger sets the runtime's logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Runtime serves requests against a set of loaded bundles.
//
// # Notes
//
//   - Generate is safe for concurrent use.
//   - Close stops admitting requests, waits for running ones and frees every task.
type Runtime struct {
	models map[string]*servedModel
	order  []string
	tracer trace.Tracer
	log    *slog.Logger
	host   *plugin.Host
	ready  atomic.Bool
	closed atomic.Bool
	mu     sync.RWMutex // orders wg.Add in Generate before wg.Wait in Close
	wg     sync.WaitGroup
}

type servedModel struct {
	bundle  *bundles.Bundle
	info    ModelInfo
	vision  VisionTask
	text    TextTask
	workers chan struct{}
	limit   int64 // workers + queue depth
	inside  atomic.Int64
	waiting atomic.Int64 // admitted, waiting for a worker
	running atomic.Int64 // holding a worker
	kv      KVPooled     // the engine's KV pool; nil without one
	served  atomic.Int64 // requests finished, for Retry-After estimates
	busyNS  atomic.Int64 // their total run time
}

// Open loads and verifies every bundle and builds the tasks each one declares. It does not warm
// them up: call Warmup before reporting ready.
func Open(ctx context.Context, cfg Config, opts ...Option) (*Runtime, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	if o.registerer == nil {
		o.registerer = prometheus.NewRegistry() // collectors go nowhere
	}
	if o.tracer == nil {
		o.tracer = otel.GetTracerProvider()
	}
	if o.vision == nil {
		o.vision = defaultVisionTask
	}
	if o.text == nil {
		o.text = defaultTextTask
	}
	if len(cfg.Bundles) == 0 {
		return nil, errors.New("open runtime: no bundles")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.BatchTokens <= 0 {
		cfg.BatchTokens = DefaultBatchTokens
	}
	if cfg.QueueDepth < 0 {
		return nil, errors.New("open runtime: negative queue depth")
	}
	if cfg.KVCacheTokens < 0 {
		return nil, errors.New("open runtime: negative KV cache size")
	}
	if cfg.VisionLanes < 0 || cfg.VisionLanes > MaxVisionLanes {
		return nil, fmt.Errorf("open runtime: vision_lanes %d: want 0 (the default) to %d", cfg.VisionLanes, MaxVisionLanes)
	}
	if cfg.QueueDepth == 0 {
		cfg.QueueDepth = DefaultQueueDepth
	}
	r := &Runtime{models: map[string]*servedModel{}, tracer: o.tracer.Tracer("github.com/iris-vlm/iris/core"), log: o.logger}
	host, err := plugin.NewHost(plugin.Options{CacheDir: cfg.CacheDir, Registerer: o.registerer, TracerProvider: o.tracer, Logger: o.logger})
	if err != nil {
		return nil, fmt.Errorf("open runtime: %w", err)
	}
	r.host = host
	for _, dir := range cfg.Bundles {
		b, err := bundles.Load(dir)
		if err != nil {
			_ = r.Close()
			return nil, fmt.Errorf("open runtime: %w", err)
		}
		m := b.Manifest
		if _, dup := r.models[m.Name]; dup {
			_ = r.Close()
			return nil, fmt.Errorf("open runtime: two bundles are named %q", m.Name)
		}
		st, _ := statTime(b.Path(bundles.ManifestName))
		md := &servedModel{
			bundle:  b,
			workers: make(chan struct{}, cfg.Workers),
			limit:   int64(cfg.Workers + cfg.QueueDepth),
			info: ModelInfo{
				Name: m.Name, Family: m.Family, Digest: b.Digest, Created: st,
				ContextLength: m.Engine.ContextLength, MaxNewTokens: m.Generation.MaxNewTokens,
			},
		}
		for _, t := range m.Tasks {
			md.info.Tasks = append(md.info.Tasks, Task(t))
		}
		env := &TaskEnv{
			CacheDir:       cfg.CacheDir,
			Registerer:     prometheus.WrapRegistererWith(prometheus.Labels{"bundle": m.Name}, o.registerer),
			Tracer:         r.tracer,
			Logger:         o.logger.With("bundle", m.Name),
			tracerProvider: o.tracer,
			host:           host,
		}
		env.EmbeddingCacheBytes = cfg.EmbeddingCacheBytes
		env.MaxBatch, env.BatchTokens, env.KVCacheTokens = cfg.Workers, cfg.BatchTokens, cfg.KVCacheTokens
		env.VisionAlone, env.DecodeApart, env.VisionSerial, env.VisionLanes, env.FusedSwiGLU = cfg.VisionAlone, cfg.DecodeApart, cfg.VisionSerial, cfg.VisionLanes, cfg.FusedSwiGLU
		env.DecodeByRequest = cfg.DecodeByRequest
		env.DecodeHold, env.DecodeHoldRows = cfg.DecodeHold, cfg.DecodeHoldRows
		env.VisionPatches, env.PromptHeads = cfg.VisionPatches, cfg.PromptHeads
		r.models[m.Name] = md
		r.order = append(r.order, m.Name)
		if m.HasTask(bundles.TaskVisionLanguage) {
			if md.vision, err = o.vision(ctx, b, env); err != nil {
				_ = r.Close()
				return nil, fmt.Errorf("open runtime: bundle %s: vision-language task: %w", m.Name, err)
			}
		}
		if m.HasTask(bundles.TaskText) {
			if md.text, err = o.text(ctx, b, env); err != nil {
				_ = r.Close()
				return nil, fmt.Errorf("open runtime: bundle %s: text-generation task: %w", m.Name, err)
			}
		}
		md.kv = poolOf(md.vision, md.text)
		r.log.Info("bundle loaded", "bundle", m.Name, "family", m.Family, "tasks", m.Tasks, "digest", b.Digest[:12])
	}
	return r, nil
}

// Models lists the loaded bundles in load order.
func (r *Runtime) Models() []ModelInfo {
	out := make([]ModelInfo, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.models[n].info)
	}
	return out
}

// Model returns one loaded bundle's description.
func (r *Runtime) Model(name string) (ModelInfo, bool) {
	m, ok := r.models[name]
	if !ok {
		return ModelInfo{}, false
	}
	return m.info, true
}

// Ready reports nil once every bundle is loaded and warmed up.
func (r *Runtime) Ready() error {
	switch {
	case r.closed.Load():
		return errors.New("runtime closed")
	case !r.ready.Load():
		return errors.New("warming up")
	}
	return nil
}

// Warmup runs one small request through every declared task, so that plugins are compiled and
// engines touched before the first client request, then marks the runtime ready.
func (r *Runtime) Warmup(ctx context.Context) error {
	for _, name := range r.order {
		m := r.models[name]
		start := time.Now()
		if m.vision != nil {
			req := Request{ID: "warmup", Model: name, Text: "Describe the image.", Image: warmupPNG(), Params: Params{MaxTokens: 1}}
			if _, err := r.Generate(ctx, req, nil); err != nil {
				return fmt.Errorf("warm up %s: %w", name, err)
			}
		}
		if m.text != nil {
			req := Request{ID: "warmup", Model: name, Text: "Hello.", Params: Params{MaxTokens: 1}}
			if _, err := r.Generate(ctx, req, nil); err != nil {
				return fmt.Errorf("warm up %s: %w", name, err)
			}
		}
		r.log.Info("bundle warmed up", "bundle", name, "took", time.Since(start).Round(time.Millisecond))
	}
	r.ready.Store(true)
	return nil
}

// Stats is a snapshot of one model's load.
type Stats struct {
	Model string
	// Inside counts admitted requests: running plus waiting.
	Inside int
	// Capacity is the most that may be inside at once.
	Capacity int
	// Queued counts admitted requests waiting for a worker; Running those holding one.
	Queued, Running int
	// KVUsed and KVTotal are the blocks in use and the total of the model's KV-cache pool; both
	// 0 when its task's engine has no pool.
	KVUsed, KVTotal int
	// HeadCache says whether the model's engine keeps prompt heads (runtime.prompt_heads); then
	// PromptHeads are those kept and PromptHeadHits the prompts that copied one.
	HeadCache      bool
	PromptHeads    int
	PromptHeadHits int64
}

// Stats returns the load of every model.
func (r *Runtime) Stats() []Stats {
	out := make([]Stats, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.models[n].stats())
	}
	return out
}

// Close stops admitting requests, waits for running ones and frees every task. It is safe to call
// more than once.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.closed.Swap(true) {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	r.wg.Wait()
	var errs []error
	for _, m := range r.models {
		if m.vision != nil {
			errs = append(errs, m.vision.Close())
		}
		if m.text != nil {
			errs = append(errs, m.text.Close())
		}
	}
	if r.host != nil {
		errs = append(errs, r.host.Close(context.Background()))
	}
	return errors.Join(errs...)
}

// Resolve applies a bundle's generation defaults to a request's settings and checks their ranges.
func (r *Runtime) Resolve(modelName string, p Params) (Resolved, error) {
	m, ok := r.models[modelName]
	if !ok {
		return Resolved{}, Errorf(KindNotFound, "model_not_found", "model", "the model %q does not exist", modelName)
	}
	return resolve(m.bundle.Manifest, p)
}

func resolve(m *bundles.Manifest, p Params) (Resolved, error) {
	g := m.Generation
	out := Resolved{MaxTokens: g.MaxNewTokens, Temperature: g.Temperature, TopK: g.TopK, TopP: g.TopP, IgnoreEOS: p.IgnoreEOS}
	if p.MaxTokens != 0 {
		out.MaxTokens = p.MaxTokens
	}
	if p.Temperature != nil {
		out.Temperature = *p.Temperature
	}
	if p.TopK != nil {
		out.TopK = *p.TopK
	}
	if p.TopP != nil {
		out.TopP = *p.TopP
	}
	if p.Seed != nil {
		out.Seed = *p.Seed
	}
	if err := checkStop(p.Stop); err != nil {
		return out, err
	}
	out.Stop = p.Stop
	if p.System != nil && strings.IndexByte(*p.System, 0) >= 0 {
		return out, Errorf(KindInvalid, "invalid_value", "system", "the system message contains a NUL character")
	}
	out.System = p.System
	if p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs || (p.TopLogprobs > 0 && !p.Logprobs) {
		return out, Errorf(KindInvalid, "invalid_value", "top_logprobs", "top_logprobs must be in [0, %d], with logprobs", MaxTopLogprobs)
	}
	out.Logprobs, out.TopLogprobs = p.Logprobs, p.TopLogprobs
	var err error
	if out.Budget, err = resolveBudget(m, p); err != nil {
		return out, err
	}
	switch {
	case out.MaxTokens < 1:
		return out, Errorf(KindInvalid, "invalid_value", "max_tokens", "max_tokens must be at least 1")
	case out.MaxTokens >= m.Engine.ContextLength:
		return out, Errorf(KindInvalid, "context_length_exceeded", "max_tokens",
			"max_tokens %d does not fit the model's context of %d tokens", out.MaxTokens, m.Engine.ContextLength)
	case math.IsNaN(out.Temperature) || out.Temperature < 0 || out.Temperature > 100:
		return out, Errorf(KindInvalid, "invalid_value", "temperature", "temperature must be in [0, 100]")
	case out.TopK < 0:
		return out, Errorf(KindInvalid, "invalid_value", "top_k", "top_k must be >= 0")
	case math.IsNaN(out.TopP) || out.TopP <= 0 || out.TopP > 1:
		return out, Errorf(KindInvalid, "invalid_value", "top_p", "top_p must be in (0, 1]")
	}
	return out, nil
}

// Generate runs one request to completion, reporting events to emit (which may be nil). The
// bundle's declared tasks decide where it goes: a request with an image reaches only a
// vision-language task, a text-only request only a text-generation task.
func (r *Runtime) Generate(ctx context.Context, req Request, emit Emit) (res *Result, err error) {
	ctx, span := r.tracer.Start(ctx, "iris.generate", trace.WithAttributes(
		attribute.String("iris.request_id", req.ID),
		attribute.String("iris.correlation_id", req.CorrelationID),
		attribute.String("iris.model", req.Model),
	))
	defer func() { r.endSpan(span, res, err) }()
	r.mu.RLock()
	if r.closed.Load() {
		r.mu.RUnlock()
		return nil, Errorf(KindUnavailable, "shutting_down", "", "the server is shutting down")
	}
	r.wg.Add(1)
	r.mu.RUnlock()
	defer r.wg.Done()
	m, ok := r.models[req.Model]
	if !ok {
		return nil, Errorf(KindNotFound, "model_not_found", "model", "the model %q does not exist", req.Model)
	}
	span.SetAttributes(attribute.String("iris.bundle", m.info.Name), attribute.String("iris.bundle_digest", m.info.Digest))
	if req.Image != nil && m.vision == nil {
		return nil, Errorf(KindInvalid, "task_not_supported", "messages",
			"model %q declares no vision-language task (declared: %v); image requests are served only by one", req.Model, m.info.Tasks)
	}
	if req.Image == nil && m.text == nil {
		return nil, Errorf(KindInvalid, "task_not_supported", "messages",
			"model %q declares no text-generation task (declared: %v); send exactly one image with the question", req.Model, m.info.Tasks)
	}
	params, err := resolve(m.bundle.Manifest, req.Params)
	if err != nil {
		return nil, err
	}
	var img *Image
	var hdr imageio.Header
	// hashed is closed once img.Info.SHA256 is set: the digest (~20 us for a photo) is computed
	// beside the image's decoding, which takes milliseconds, and awaited before the task runs.
	var hashed chan struct{}
	if req.Image != nil {
		hdr, err = inspectImage(req.Image, m.bundle.Manifest.Image)
		if err != nil {
			return nil, err
		}
		img = newImage(hdr)
		hashed = make(chan struct{})
		go func() {
			sum := sha256.Sum256(req.Image)
			img.Info.SHA256 = hex.EncodeToString(sum[:])
			close(hashed)
		}()
		defer func() {
			if span.IsRecording() {
				<-hashed
				span.SetAttributes(attribute.String("iris.image.sha256", img.Info.SHA256))
			}
		}()
		span.SetAttributes(attribute.Int("iris.image.width", hdr.Width), attribute.Int("iris.image.height", hdr.Height))
	}

	// Admission: refuse rather than queue without bound.
	if n := m.inside.Add(1); n > m.limit {
		m.inside.Add(-1)
		return nil, &Error{Kind: KindBusy, Code: "server_busy", Message: "too many requests are queued for this model; retry later", RetryAfter: m.retryAfter()}
	}
	defer m.inside.Add(-1)
	queued := time.Now()
	if err := m.acquire(ctx); err != nil {
		return nil, err
	}
	defer m.release()
	started := time.Now()
	defer func() { m.served.Add(1); m.busyNS.Add(int64(time.Since(started))) }()
	timings := Timings{{Stage: StageQueue, Start: queued, Duration: started.Sub(queued)}}

	wrapped := func(ev Event) error {
		if ev.Kind == EventStart {
			ev.Image = nil
			if img != nil {
				// nothing reaches the client before the image is known to decode, also from a
				// task that never looked at the pixels
				if err := img.Await(ctx); err != nil {
					return err
				}
				info := img.Info
				ev.Image = &info
			}
			ev.Bundle = BundleInfo{Name: m.info.Name, Digest: m.info.Digest}
		}
		if emit == nil {
			return nil
		}
		return emit(ev)
	}
	// The pixels decode beside the task, which starts on the header (the plugin's plan and the
	// prompt need no pixels); the decoding stops early if the task ends first.
	var (
		decodeStart time.Time
		decodeTime  time.Duration
		stopDecode  = func() {}
	)
	if img != nil {
		decodeStart = time.Now()
		var dctx context.Context
		dctx, stopDecode = context.WithCancel(ctx)
		defer stopDecode()
		go func() {
			defer close(img.decoded)
			decodeImage(dctx, req.Image, hdr, decodeOptions(m.bundle.Manifest.Image), img)
			decodeTime = time.Since(decodeStart)
		}()
		<-hashed
	}
	res, err = r.runTask(ctx, m, &req, img, params, wrapped)
	if img != nil {
		if err == nil {
			err = img.Await(ctx) // a task that never looked at the pixels still fails on a bad image
		}
		stopDecode() // a task that failed first needs the pixels no more
		<-img.decoded
		timings = append(timings, StageTiming{Stage: StageDecodeImage, Start: decodeStart, Duration: decodeTime})
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, AsError(ctx.Err())
		}
		return nil, err
	}
	if img != nil {
		info := img.Info
		res.Image = &info
	}
	res.Bundle = BundleInfo{Name: m.info.Name, Digest: m.info.Digest}
	res.Params = params
	res.Timings = append(timings, res.Timings...)
	return res, nil
}

// runTask runs the request's task, turning a panic inside it into an internal error: a broken
// task fails its request, never the server.
func (r *Runtime) runTask(ctx context.Context, m *servedModel, req *Request, img *Image, params Resolved, emit Emit) (res *Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("task panicked", "bundle", m.info.Name, "request_id", req.ID, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res, err = nil, &Error{Kind: KindInternal, Code: "task_panic", Message: "internal error", Err: fmt.Errorf("task panicked: %v", p)}
		}
	}()
	if img != nil {
		res, err = m.vision.Answer(ctx, &VisionInput{RequestID: req.ID, Question: req.Text, TextFirst: req.TextFirst, Image: img, Params: params}, emit)
	} else {
		res, err = m.text.Complete(ctx, &TextInput{RequestID: req.ID, Question: req.Text, Params: params}, emit)
	}
	if err == nil && res == nil {
		err = &Error{Kind: KindInternal, Code: "internal_error", Message: "internal error", Err: errors.New("task returned no result")}
	}
	return res, err
}

// retryAfter estimates when a slot frees up from the mean run time so far.
func (m *servedModel) retryAfter() time.Duration {
	n := m.served.Load()
	if n == 0 {
		return time.Second
	}
	mean := time.Duration(m.busyNS.Load() / n)
	wait := mean * time.Duration(m.limit) / time.Duration(cap(m.workers))
	return min(max(wait.Round(time.Second), time.Second), time.Minute)
}

func (r *Runtime) endSpan(span trace.Span, res *Result, err error) {
	if err == nil && res == nil {
		err = errors.New("task returned no result")
	}
	if err != nil {
		e := AsError(err)
		span.SetAttributes(attribute.String("iris.status", "error"), attribute.String("iris.error.code", e.Code))
		span.SetStatus(codes.Error, e.Code)
		span.End()
		return
	}
	span.SetAttributes(attribute.String("iris.status", "ok"),
		attribute.Int("iris.tokens.prompt", res.Usage.PromptTokens),
		attribute.Int("iris.tokens.completion", res.Usage.CompletionTokens),
		attribute.Int("iris.tokens.image", res.Usage.ImageTokens),
		attribute.String("iris.finish_reason", string(res.FinishReason)))
	// Stage spans are recorded after the fact from the measured timings, so that tasks need no
	// tracing code of their own and every stage of every backend is reported the same way.
	// Under a parent that is not recorded (no exporter, or sampled out) they would not be
	// either (the samplers are parent-based): the result goes back to the client sooner.
	if !span.IsRecording() {
		span.End()
		return
	}
	stages := slices.Clone(res.Timings)
	sort.SliceStable(stages, func(i, j int) bool { return stages[i].Start.Before(stages[j].Start) })
	ctx := trace.ContextWithSpan(context.Background(), span)
	for _, st := range stages {
		if st.Start.IsZero() {
			continue
		}
		_, s := r.tracer.Start(ctx, "iris."+st.Stage, trace.WithTimestamp(st.Start))
		s.End(trace.WithTimestamp(st.Start.Add(st.Duration)))
	}
	span.End()
}
