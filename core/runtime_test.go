package core_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/internal/poll"
)

// echoVision is a test double: it answers with the question reversed, one rune per token.
type echoVision struct {
	calls  atomic.Int64
	block  chan struct{} // when non-nil, Answer waits on it
	lastIn atomic.Pointer[core.VisionInput]
	closed atomic.Bool
}

func (e *echoVision) Answer(ctx context.Context, in *core.VisionInput, emit core.Emit) (*core.Result, error) {
	e.calls.Add(1)
	e.lastIn.Store(in)
	if e.block != nil {
		select {
		case <-e.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := emit(core.Event{Kind: core.EventStart, Usage: core.Usage{PromptTokens: 10, ImageTokens: 4}}); err != nil {
		return nil, err
	}
	var out []rune
	for i, r := range []rune(in.Question) {
		if i >= in.Params.MaxTokens {
			break
		}
		out = append([]rune{r}, out...)
		if err := emit(core.Event{Kind: core.EventDelta, Text: string(r), Tokens: 1}); err != nil {
			return nil, err
		}
	}
	reason := core.FinishStop
	if len(out) < len([]rune(in.Question)) {
		reason = core.FinishLength
	}
	return &core.Result{Text: string(out), FinishReason: reason, Usage: core.Usage{PromptTokens: 10, CompletionTokens: len(out), ImageTokens: 4}}, nil
}

func (e *echoVision) Close() error { e.closed.Store(true); return nil }

type echoText struct{ calls atomic.Int64 }

func (e *echoText) Complete(ctx context.Context, in *core.TextInput, emit core.Emit) (*core.Result, error) {
	e.calls.Add(1)
	_ = emit(core.Event{Kind: core.EventStart})
	return &core.Result{Text: "text:" + in.Question, FinishReason: core.FinishStop}, nil
}
func (e *echoText) Close() error { return nil }

// testBundle builds a bundle declaring tasks; the model files are placeholders the fakes ignore.
func testBundle(t *testing.T, name string, tasks ...bundles.Task) string {
	t.Helper()
	from := t.TempDir()
	for n, body := range map[string]string{
		"config.json":       `{"model_type": "qwen2_5_vl"}`,
		"model.safetensors": "x",
		"tokenizer.json":    "{}",
	} {
		if err := os.WriteFile(filepath.Join(from, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plugin := filepath.Join(t.TempDir(), "p.wasm")
	_ = os.WriteFile(plugin, []byte("\x00asm"), 0o644)
	out := filepath.Join(t.TempDir(), name)
	if _, err := bundles.Build(t.Context(), bundles.BuildOptions{From: from, Family: "qwen2_5_vl", Out: out, Plugin: plugin, Tasks: tasks, ContextLength: 512, MaxNewTokens: 16}); err != nil {
		t.Fatal(err)
	}
	return out
}

func pngBytes(t testing.TB, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 7, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type env struct {
	rt     *core.Runtime
	vision *echoVision
	text   *echoText
}

func open(t *testing.T, cfg core.Config, vision *echoVision) env {
	t.Helper()
	if vision == nil {
		vision = &echoVision{}
	}
	text := &echoText{}
	rt, err := core.Open(t.Context(), cfg,
		core.WithVisionTask(func(context.Context, *bundles.Bundle, *core.TaskEnv) (core.VisionTask, error) { return vision, nil }),
		core.WithTextTask(func(context.Context, *bundles.Bundle, *core.TaskEnv) (core.TextTask, error) { return text, nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return env{rt, vision, text}
}

func code(err error) string {
	var e *core.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return "unclassified"
}

func TestDispatchFollowsDeclaredTasks(t *testing.T) {
	vl := testBundle(t, "vl", bundles.TaskVisionLanguage)
	txt := testBundle(t, "txt", bundles.TaskText)
	both := testBundle(t, "both", bundles.TaskVisionLanguage, bundles.TaskText)
	f := open(t, core.Config{Bundles: []string{vl, txt, both}}, nil)
	img := pngBytes(t, 32, 24)
	tests := []struct {
		name, model string
		image       []byte
		wantCode    string
		wantVision  bool
	}{
		{"image to vision bundle", "vl", img, "", true},
		{"image to text-only bundle", "txt", img, "task_not_supported", false},
		{"text to vision-only bundle", "vl", nil, "task_not_supported", false},
		{"text to text bundle", "txt", nil, "", false},
		{"image to bundle with both", "both", img, "", true},
		{"text to bundle with both", "both", nil, "", false},
		{"unknown model", "nope", img, "model_not_found", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v0, t0 := f.vision.calls.Load(), f.text.calls.Load()
			res, err := f.rt.Generate(t.Context(), core.Request{Model: tt.model, Text: "hello", Image: tt.image}, nil)
			if tt.wantCode != "" {
				if code(err) != tt.wantCode {
					t.Fatalf("err = %v, want code %s", err, tt.wantCode)
				}
				if f.vision.calls.Load() != v0 || f.text.calls.Load() != t0 {
					t.Fatal("a refused request reached a task")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotVision := f.vision.calls.Load() == v0+1
			if gotVision != tt.wantVision || (!gotVision && f.text.calls.Load() != t0+1) {
				t.Fatalf("dispatch: vision=%v, want %v", gotVision, tt.wantVision)
			}
			if tt.wantVision {
				if res.Image == nil || res.Image.Width != 32 || res.Image.Height != 24 || len(res.Image.SHA256) != 64 {
					t.Fatalf("image info %+v", res.Image)
				}
				if res.Text != "olleh" {
					t.Fatalf("text %q", res.Text)
				}
			}
			if res.Bundle.Name != tt.model || len(res.Bundle.Digest) != 64 {
				t.Fatalf("bundle info %+v", res.Bundle)
			}
		})
	}
}

func TestResolveDefaultsAndRanges(t *testing.T) {
	f := open(t, core.Config{Bundles: []string{testBundle(t, "vl", bundles.TaskVisionLanguage)}}, nil)
	p, err := f.rt.Resolve("vl", core.Params{})
	if err != nil || p.MaxTokens != 16 || p.Temperature != 0 || p.TopP != 1 {
		t.Fatalf("defaults: %+v %v", p, err)
	}
	neg, nan, big := -1.0, 0.0, 2.0
	nan = nan / nan
	k := -1
	for _, tt := range []struct {
		name string
		p    core.Params
		code string
	}{
		{"max over context", core.Params{MaxTokens: 512}, "context_length_exceeded"},
		{"negative max", core.Params{MaxTokens: -3}, "invalid_value"},
		{"negative temperature", core.Params{Temperature: &neg}, "invalid_value"},
		{"nan temperature", core.Params{Temperature: &nan}, "invalid_value"},
		{"negative top_k", core.Params{TopK: &k}, "invalid_value"},
		{"top_p over one", core.Params{TopP: &big}, "invalid_value"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.rt.Resolve("vl", tt.p); code(err) != tt.code {
				t.Fatalf("err %v, want %s", err, tt.code)
			}
		})
	}
}

func TestBusyWhenQueueFull(t *testing.T) {
	block := make(chan struct{})
	f := open(t, core.Config{Bundles: []string{testBundle(t, "vl", bundles.TaskVisionLanguage)}, Workers: 1, QueueDepth: 1}, &echoVision{block: block})
	img := pngBytes(t, 8, 8)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			_, err := f.rt.Generate(context.Background(), core.Request{Model: "vl", Text: "hi", Image: img}, nil)
			errs <- err
		})
	}
	poll.Until(t, 10*time.Second, "two requests inside the task", insideAtLeast(f, 2))
	_, err := f.rt.Generate(t.Context(), core.Request{Model: "vl", Text: "hi", Image: img}, nil)
	var e *core.Error
	if !errors.As(err, &e) || e.Kind != core.KindBusy || e.RetryAfter <= 0 {
		t.Fatalf("third request: %v, want busy with Retry-After", err)
	}
	close(block)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("queued request failed: %v", err)
		}
	}
	if _, err := f.rt.Generate(t.Context(), core.Request{Model: "vl", Text: "hi", Image: img}, nil); err != nil {
		t.Fatalf("after the queue drained: %v", err)
	}
}

// insideAtLeast is a poll.Until state: "" once n requests are inside the runtime's first task.
func insideAtLeast(f env, n int) func() string {
	return func() string {
		if in := f.rt.Stats()[0].Inside; in < n {
			return fmt.Sprintf("%d inside", in)
		}
		return ""
	}
}

func TestCancelWhileQueued(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	f := open(t, core.Config{Bundles: []string{testBundle(t, "vl", bundles.TaskVisionLanguage)}, Workers: 1, QueueDepth: 4}, &echoVision{block: block})
	img := pngBytes(t, 8, 8)
	go func() {
		_, _ = f.rt.Generate(context.Background(), core.Request{Model: "vl", Text: "hi", Image: img}, nil)
	}()
	poll.Until(t, 10*time.Second, "a request inside the task", insideAtLeast(f, 1))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := f.rt.Generate(ctx, core.Request{Model: "vl", Text: "hi", Image: img}, nil)
	var e *core.Error
	if !errors.As(err, &e) || e.Kind != core.KindTimeout {
		t.Fatalf("queued request past its deadline: %v", err)
	}
}

func TestEventsAndTimings(t *testing.T) {
	f := open(t, core.Config{Bundles: []string{testBundle(t, "vl", bundles.TaskVisionLanguage)}}, nil)
	var events []core.Event
	res, err := f.rt.Generate(t.Context(), core.Request{Model: "vl", Text: "abc", Image: pngBytes(t, 16, 16), TextFirst: true}, func(ev core.Event) error {
		events = append(events, ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 4 || events[0].Kind != core.EventStart || events[0].Image == nil || events[0].Bundle.Name != "vl" {
		t.Fatalf("events %+v", events)
	}
	var b strings.Builder
	for _, ev := range events[1:] {
		b.WriteString(ev.Text)
	}
	if b.String() != "abc" || res.Text != "cba" {
		t.Fatalf("deltas %q result %q", b.String(), res.Text)
	}
	if !f.vision.lastIn.Load().TextFirst {
		t.Fatal("TextFirst lost")
	}
	if res.Timings.Get(core.StageDecodeImage) <= 0 || res.Timings[0].Stage != core.StageQueue {
		t.Fatalf("timings %+v", res.Timings)
	}
	// The client going away stops the request.
	stop := errors.New("client gone")
	_, err = f.rt.Generate(t.Context(), core.Request{Model: "vl", Text: "abcdef", Image: pngBytes(t, 16, 16)}, func(ev core.Event) error {
		if ev.Kind == core.EventDelta {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("emit error not returned: %v", err)
	}
}

func TestWarmupAndReady(t *testing.T) {
	f := open(t, core.Config{Bundles: []string{testBundle(t, "vl", bundles.TaskVisionLanguage)}}, nil)
	if f.rt.Ready() == nil {
		t.Fatal("ready before warm-up")
	}
	if err := f.rt.Warmup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.Ready(); err != nil {
		t.Fatal(err)
	}
	if f.vision.calls.Load() != 1 {
		t.Fatalf("warm-up made %d calls", f.vision.calls.Load())
	}
	if err := f.rt.Close(); err != nil {
		t.Fatal(err)
	}
	if !f.vision.closed.Load() || f.rt.Ready() == nil {
		t.Fatal("close did not close the task or still ready")
	}
	if _, err := f.rt.Generate(t.Context(), core.Request{Model: "vl", Text: "x", Image: pngBytes(t, 8, 8)}, nil); code(err) != "shutting_down" {
		t.Fatalf("after close: %v", err)
	}
}

func TestOpenRefusesTamperedBundle(t *testing.T) {
	dir := testBundle(t, "vl", bundles.TaskVisionLanguage)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := core.Open(t.Context(), core.Config{Bundles: []string{dir}})
	if err == nil || !strings.Contains(err.Error(), "model.safetensors") {
		t.Fatalf("open of a tampered bundle: %v", err)
	}
}

func errorsAs(err error, target **core.Error) bool { return errors.As(err, target) }

// TestOpenRefusesBadLimits: numbers of the configuration that cannot hold are refused with
// what was wrong, before any bundle is read.
func TestOpenRefusesBadLimits(t *testing.T) {
	dir := testBundle(t, "vl", bundles.TaskVisionLanguage)
	for _, tc := range []struct {
		name string
		cfg  core.Config
		want string
	}{
		{"queue depth", core.Config{QueueDepth: -1}, "queue depth"},
		{"KV cache", core.Config{KVCacheTokens: -1}, "KV cache"},
		{"negative lanes", core.Config{VisionLanes: -1}, "vision_lanes -1"},
		{"too many lanes", core.Config{VisionLanes: core.MaxVisionLanes + 1}, "vision_lanes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Bundles = []string{dir}
			rt, err := core.Open(t.Context(), tc.cfg)
			if err == nil {
				rt.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
