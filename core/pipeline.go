package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/pixels"
	"github.com/iris-vlm/iris/core/internal/plugin"
	"github.com/iris-vlm/iris/core/internal/prep"
	"github.com/iris-vlm/iris/core/internal/tokenize"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// visionTask is the vision-language task every bundle gets by default: the family plugin plans
// and frames, the host executes the pixel plan, the tokenizer encodes, the engine generates.
type visionTask struct {
	name  string
	tok   *tokenize.Tokenizer
	plug  *plugin.Plugin
	prep  *prep.Preparer
	model model.Model
	// sched batches the model's requests (nil for a model that takes no batches: each
	// request then runs alone)
	sched *engine.Scheduler
	stop  []int32
	cache *embedCache // nil when disabled
	// grounding reads boxes out of the answers (the bundle's generation.grounding); nil: none
	grounding *bundles.Grounding
}

func defaultVisionTask(ctx context.Context, b *bundles.Bundle, env *TaskEnv) (VisionTask, error) {
	m := b.Manifest
	if env.host == nil {
		return nil, errors.New("no plugin host")
	}
	t := &visionTask{name: m.Name, grounding: m.Generation.Grounding}
	ok := false
	defer func() {
		if !ok {
			_ = t.Close()
		}
	}()
	var err error
	if t.tok, err = tokenize.Load(b.Dir); err != nil {
		return nil, err
	}
	wasm, err := os.ReadFile(b.Path(m.Plugin.File))
	if err != nil {
		return nil, fmt.Errorf("read plugin: %w", err)
	}
	lim := plugin.Limits{MemoryPages: uint32(m.Plugin.MaxMemoryPages), Timeout: time.Duration(m.Plugin.TimeoutMS) * time.Millisecond}
	if t.plug, err = env.host.Load(ctx, m.Family, wasm, m.Plugin.SHA256, lim); err != nil {
		return nil, err
	}
	if fam := t.plug.Describe().Family; fam != m.Family {
		return nil, fmt.Errorf("plugin %s is for family %q, the bundle is %q", m.Plugin.File, fam, m.Family)
	}
	if err := t.plug.CheckParams(m.Plugin.Params); err != nil {
		return nil, fmt.Errorf("plugin params: %w", err)
	}
	if m.Image.Budgets != nil {
		// a budget is handed to the plugin as these two params: it must read them
		desc := t.plug.Describe()
		for _, name := range []string{paramMinPixels, paramMaxPixels} {
			if ps, ok := desc.Param(name); !ok || ps.Type != abi.ParamInt {
				return nil, fmt.Errorf("image.budgets: the %s plugin declares no int param %q to receive a budget", m.Family, name)
			}
		}
		if _, err := defaultBudget(m); err != nil {
			return nil, err
		}
	}
	if t.prep, err = prep.New(prep.Config{Plugin: t.plug, Tokenizer: t.tok, Params: m.Plugin.Params, TracerProvider: env.tracerProvider}); err != nil {
		return nil, err
	}
	if t.model, err = loadEngine(ctx, b, env); err != nil {
		return nil, err
	}
	if t.cache, err = newEmbedCache(b, env.EmbeddingCacheBytes, env.Registerer); err != nil {
		return nil, err
	}
	if _, batches := t.model.(model.Batcher); batches {
		opts := engine.SchedulerOptions{MaxBatch: env.MaxBatch, StepTokens: env.BatchTokens, VisionAlone: env.VisionAlone, VisionPatches: env.VisionPatches, DecodeApart: env.DecodeApart, DecodeByRequest: env.DecodeByRequest,
			DecodeHold: env.DecodeHold, DecodeHoldRows: env.DecodeHoldRows}
		if t.sched, err = engine.NewScheduler(t.model, opts); err != nil {
			return nil, err
		}
		if err := registerScheduler(env.Registerer, t.sched); err != nil {
			return nil, err
		}
	}
	t.stop = slices.Clone(m.Generation.StopIDs)
	ok = true
	return t, nil
}

// Answer runs one image question.
func (t *visionTask) Answer(ctx context.Context, in *VisionInput, emit Emit) (*Result, error) {
	t0 := time.Now()
	// prep plans, frames and tokenizes while the runtime still decodes the pixels
	im := in.Image
	await := func(ctx context.Context) (*pixels.RGB, error) {
		if err := im.Await(ctx); err != nil {
			return nil, err
		}
		return &pixels.RGB{W: im.Width, H: im.Height, Pix: im.Pix}, nil
	}
	pr, err := t.prep.Prepare(ctx, prep.Input{Width: im.Width, Height: im.Height, Await: await, Format: im.Info.Format,
		HasAlpha: im.HasAlpha, Question: in.Question, TextFirst: in.TextFirst, System: in.Params.System,
		Params: budgetParams(in.Params.Budget)})
	if err != nil {
		return nil, prepError(err)
	}
	defer pr.Release() // also on the paths that return before the image is encoded
	timings := prepTimings(t0, pr.Timings)

	stop := t.stop
	for _, id := range pr.StopIDs {
		if !slices.Contains(stop, id) {
			stop = append(slices.Clone(stop), id)
		}
	}
	var (
		stream  = t.tok.NewStream(true)
		pending int            // tokens since the last delta
		ids     []int32        // every token so far; the last pending are the next delta's
		lps     []TokenLogprob // their logprobs entries, when asked for
		allLps  []TokenLogprob // every entry: the answer's
		stops   *stopper
	)
	if len(in.Params.Stop) > 0 {
		stops = &stopper{stops: in.Params.Stop}
	}
	// send emits a delta for the tokens since the last one, with their logprobs entries.
	send := func(text string) error {
		// capped, so that the next tokens appended to ids never show through the delta's
		n := len(ids)
		ev := Event{Kind: EventDelta, Text: text, Tokens: pending, TokenIDs: ids[n-pending : n : n], Logprobs: lps}
		pending, lps = 0, nil
		return emit(ev)
	}
	// deliver sends text that became final; with stop strings, only what can no longer be the
	// start of one, and nothing after one (then it asks the engine to stop).
	deliver := func(d string) error {
		hit := false
		if stops != nil {
			d, hit = stops.push(d)
		}
		if d != "" || hit {
			if err := send(d); err != nil {
				return err
			}
		}
		if hit {
			return engine.ErrStop
		}
		return nil
	}
	req := engine.Request{
		IDs: pr.InputIDs,
		Images: []model.Image{{
			Pixels: pr.PixelValues,
			Grid:   model.Grid{T: pr.Grid.T, H: pr.Grid.H, W: pr.Grid.W},
			Masks:  patchRects(pr.Masks),
			Tiles:  patchRects(pr.Tiles),
		}},
		MaxNewTokens: in.Params.MaxTokens,
		Sampling:     engine.Sampling{Temperature: in.Params.Temperature, TopK: in.Params.TopK, TopP: in.Params.TopP, Seed: in.Params.Seed},
		StopIDs:      stop,
		IgnoreEOS:    in.Params.IgnoreEOS,
		Logprobs:     in.Params.Logprobs,
		TopLogprobs:  in.Params.TopLogprobs,
		OnLogprob: func(lp engine.TokenLogprob) {
			e := t.logprob(lp)
			lps, allLps = append(lps, e), append(allLps, e)
		},
		OnToken: func(id int32) error {
			pending++
			ids = append(ids, id)
			if d := stream.Add(id); d != "" {
				return deliver(d)
			}
			return nil
		},
	}
	// Bounds before kernels: a request the model cannot hold is a client error, and nothing ran.
	if err := engine.Check(t.model.Config(), t.model.Limits(), &req); err != nil {
		return nil, boundsError(err)
	}
	if err := emit(Event{Kind: EventStart, Usage: Usage{PromptTokens: len(pr.InputIDs), ImageTokens: pr.ImageTokens}, PromptIDs: pr.InputIDs}); err != nil {
		return nil, err
	}
	t1 := time.Now()
	encode := func(ctx context.Context, img model.Image) (*model.Embeddings, error) {
		return engine.Encode(ctx, t.model, img)
	}
	if t.sched != nil {
		encode = t.sched.Encode // the tower takes its turn in the scheduler's rounds
	}
	cv, err := t.cache.embed(ctx, encode, im.Info.SHA256, pr, &req.Images[0])
	if err != nil {
		return nil, engineError(err)
	}
	defer cv.done() // the cache's rows are borrowed until the engine is done
	// the image is encoded: its pixel_values (the request's largest buffer, up to tens of MB) go
	// back now rather than after the answer's decode steps
	req.Images[0].Pixels = nil
	pr.Release()
	var gen *engine.Result
	if t.sched != nil {
		gen, err = t.sched.Generate(ctx, req)
	} else {
		gen, err = engine.Generate(ctx, t.model, req)
	}
	if err != nil {
		return nil, engineError(err)
	}
	finish := FinishStop
	if gen.Finish == engine.FinishLength {
		finish = FinishLength
	}
	// The engine ended on a stop token unless a stop string ended it (ErrStop, during the
	// generation: a stop string found in the text flushed below came after the engine's end).
	var stopToken *int32
	if gen.Finish == engine.FinishStop && (stops == nil || !stops.hit) {
		stopToken = &gen.StopToken
	}
	var text string
	switch {
	case stops == nil:
		if d := stream.Flush(); d != "" || pending > 0 {
			if err := send(d); err != nil {
				return nil, err
			}
		}
		text = t.tok.DecodeSkipSpecial(gen.Tokens)
	case stops.hit:
		text = stops.text()
	default:
		// the end of the answer: an incomplete character, then what was held back for a stop
		// string that never came (or comes in this last piece)
		if d := stream.Flush(); d != "" {
			if err := deliver(d); errors.Is(err, engine.ErrStop) {
				finish = FinishStop
			} else if err != nil {
				return nil, err
			}
		}
		if !stops.hit {
			if d := stops.flush(); d != "" || pending > 0 {
				if err := send(d); err != nil {
					return nil, err
				}
			}
		}
		text = stops.text()
	}
	timings = append(timings, engineTimings(t1, cv, gen.Timings)...)
	if in.Params.Logprobs && allLps == nil {
		allLps = []TokenLogprob{} // asked for, no token: an empty list, not none
	}
	return &Result{
		Text:         text,
		Logprobs:     allLps,
		TokenIDs:     gen.Tokens,
		StopToken:    stopToken,
		PromptIDs:    pr.InputIDs,
		Boxes:        decodeBoxes(gen.Tokens, t.grounding, im.Width, im.Height, t.tok.Decode),
		FinishReason: finish,
		Usage:        Usage{PromptTokens: gen.PromptTokens, CompletionTokens: len(gen.Tokens), ImageTokens: gen.ImageTokens},
		Timings:      timings,
	}, nil
}

// logprob names an engine entry's tokens: their bytes (a byte-level BPE token may hold part of
// a character) and text. A tokenizer without byte-level tokens gives each token's decoded text.
func (t *visionTask) logprob(lp engine.TokenLogprob) TokenLogprob {
	out := TokenLogprob{Logprob: lp.Logprob}
	out.Token, out.Bytes = t.token(lp.ID)
	if len(lp.Top) > 0 {
		out.Top = make([]TopLogprob, len(lp.Top))
		for i, e := range lp.Top {
			out.Top[i].Logprob = e.Logprob
			out.Top[i].Token, out.Top[i].Bytes = t.token(e.ID)
		}
	}
	return out
}

func (t *visionTask) token(id int32) (string, []byte) {
	b, err := t.tok.TokenBytes(id)
	if err != nil {
		s := t.tok.Decode([]int32{id})
		return s, []byte(s)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), b
}

// Close frees the engine, the plugin and the tokenizer. It is safe to call more than once.
func (t *visionTask) Close() error {
	var errs []error
	if t.sched != nil {
		errs = append(errs, t.sched.Close()) // no pass runs once the model closes
		t.sched = nil
	}
	t.cache.close() // its device rows go back before the model closes
	t.cache = nil
	if t.model != nil {
		errs = append(errs, t.model.Close())
		t.model = nil
	}
	if t.plug != nil {
		errs = append(errs, t.plug.Close(context.Background()))
		t.plug = nil
	}
	if t.tok != nil {
		errs = append(errs, t.tok.Close())
		t.tok = nil
	}
	return errors.Join(errs...)
}

// prepTimings places prep's stages from start: plan, then frame and tokenize beside pixels.
func prepTimings(start time.Time, pt prep.Timings) Timings {
	return Timings{
		{Stage: StagePlan, Start: start, Duration: pt.Plan},
		{Stage: StageFrame, Start: start.Add(pt.FrameStart), Duration: pt.Frame},
		{Stage: StageTokenize, Start: start.Add(pt.FrameStart + pt.Frame), Duration: pt.Tokenize},
		{Stage: StagePixels, Start: start.Add(pt.PixelsStart), Duration: pt.Pixels},
	}
}

// prepError classifies a preprocessing error: the plugin's refusals are the client's, its
// failures and the host's are ours.
func prepError(err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return ce // the image's decoding error: the client's, classified already
	}
	var ae *abi.Error
	if errors.As(err, &ae) {
		if ae.Kind == abi.Refusal {
			param := "image"
			if ae.Code == abi.CodeSystemNotSupported {
				param = "system"
			}
			return &Error{Kind: KindInvalid, Code: ae.Code, Param: param, Message: ae.Message, Err: err}
		}
		return &Error{Kind: KindInternal, Code: "plugin_failure", Message: "internal error", Err: err}
	}
	var pe *plugin.Error
	if errors.As(err, &pe) {
		switch pe.Code {
		case plugin.CodeTimeout:
			return &Error{Kind: KindTimeout, Code: pe.Code, Message: "the family plugin ran past its deadline", Err: err}
		case plugin.CodeCanceled:
			return &Error{Kind: KindCanceled, Code: "request_canceled", Message: "the request was canceled", Err: err}
		}
		return &Error{Kind: KindInternal, Code: pe.Code, Message: "internal error", Err: err}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return AsError(err)
	}
	return &Error{Kind: KindInternal, Code: "preprocess_failed", Message: "internal error", Err: err}
}

func boundsError(err error) error {
	switch {
	case errors.Is(err, model.ErrContextExceeded):
		return &Error{Kind: KindInvalid, Code: "context_length_exceeded", Param: "max_tokens", Message: err.Error(), Err: err}
	case errors.Is(err, model.ErrImageTooLarge):
		return &Error{Kind: KindInvalid, Code: "image_too_large", Param: "image", Message: err.Error(), Err: err}
	}
	return &Error{Kind: KindInvalid, Code: "invalid_request", Message: err.Error(), Err: err}
}

// engineError classifies cancellation; anything else (an emit error, a kernel failure) passes
// through for the runtime and the gateway to classify.
func engineError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return AsError(err)
	}
	return err
}

func defaultTextTask(ctx context.Context, b *bundles.Bundle, env *TaskEnv) (TextTask, error) {
	return nil, fmt.Errorf("family %s has no text-generation task in this build: declare only %q", b.Manifest.Family, bundles.TaskVisionLanguage)
}

// registerScheduler exports the scheduler's counters: inputs over passes is the mean batch.
func registerScheduler(reg prometheus.Registerer, s *engine.Scheduler) error {
	passes := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "iris_engine_passes_total",
		Help: "Engine passes (forward steps) run; each holds the next token of every running answer and prefill chunks of new prompts.",
	}, func() float64 { return float64(s.Stats().Passes) })
	inputs := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "iris_engine_pass_inputs_total",
		Help: "Sequences in those passes, summed: over iris_engine_passes_total, the mean batch.",
	}, func() float64 { return float64(s.Stats().Inputs) })
	images := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "iris_engine_vision_images_total",
		Help: "Images the vision tower encoded in the scheduler's rounds (embedding-cache hits are not).",
	}, func() float64 { return float64(s.Stats().Images) })
	visionPasses := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "iris_engine_vision_passes_total",
		Help: "Vision-tower passes that encoded them: a round's images go in one pass when the model takes batches (over it, iris_engine_vision_images_total is the mean vision batch).",
	}, func() float64 { return float64(s.Stats().VisionPasses) })
	retries := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "iris_engine_vision_batch_retries_total",
		Help: "Vision batches that failed and were encoded again image by image (so that a bad image fails only its request).",
	}, func() float64 { return float64(s.Stats().VisionRetries) })
	collectors := []prometheus.Collector{passes, inputs, images, visionPasses, retries}
	for i, phase := range engine.PhaseNames {
		collectors = append(collectors, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "iris_engine_seconds_total",
			Help:        "Wall time of the engine's scheduler loop by phase: gather (waiting for the running requests' next inputs: the device idles), vision, prefill, decode, hold (decode steps waiting for the prompts of images in the tower, runtime.decode_hold) (on a GPU the vision tower has a loop of its own beside the others: its time overlaps theirs).",
			ConstLabels: prometheus.Labels{"phase": phase},
		}, func() float64 { return s.Stats().Spent[i].Seconds() }))
		if phase == "gather" || phase == "hold" {
			continue
		}
		for c, class := range engine.BatchClasses {
			labels := prometheus.Labels{"phase": phase, "batch": class}
			collectors = append(collectors, prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "iris_engine_batch_passes_total",
				Help:        "The scheduler's passes by phase and batch size (vision: the images of a round), in classes of powers of two.",
				ConstLabels: labels,
			}, func() float64 { return float64(s.Stats().ByBatch[i][c].Passes) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "iris_engine_batch_seconds_total",
				Help:        "Their wall time: over iris_engine_batch_passes_total, the mean pass of a phase at a batch size (a decode pass is bound by reading the weights, so it should cost about the same at 1 and at 32).",
				ConstLabels: labels,
			}, func() float64 { return s.Stats().ByBatch[i][c].Spent.Seconds() }))
		}
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register scheduler metrics: %w", err)
		}
	}
	return nil
}

// patchRects converts prep's per-view rectangles in patches (patch masks, tile places) to the
// engine's (nil stays nil).
func patchRects(rects []abi.Rect) []model.PatchRect {
	if rects == nil {
		return nil
	}
	out := make([]model.PatchRect, len(rects))
	for i, m := range rects {
		out[i] = model.PatchRect{X: m.X, Y: m.Y, W: m.Width, H: m.Height}
	}
	return out
}
