package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/gateway/config"
	"github.com/iris-vlm/iris/gateway/server"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

// Directives a question may carry to steer the fake tasks.
const (
	doPanic       = "[panic]"          // the task panics
	doFailBefore  = "[fail-before]"    // the task fails before its start event
	doFailAfter   = "[fail-after]"     // the task fails after the start event and one delta
	doBlock       = "[block]"          // the task waits for its context to end
	doHold        = "[hold]"           // the task waits until the test releases it
	doStartSilent = "[no-start-event]" // the task never emits EventStart
)

// fakeTiming is what the fake reports for each of its stages; the runtime adds queue and
// decode_image.
var fakeStages = []string{core.StagePlan, core.StagePixels, core.StageVision, core.StagePrefill, core.StageDecode}

// recorder sees what reached the fake tasks.
type recorder struct {
	mu       sync.Mutex
	vision   []*core.VisionInput
	text     []*core.TextInput
	canceled chan string // request ids whose context ended while blocked
	blocking chan string // request ids now blocked (dropped when nobody listens)
	release  chan struct{}
	holding  chan string // request ids now holding
}

func newRecorder() *recorder {
	return &recorder{canceled: make(chan string, 16), blocking: make(chan string, 16), release: make(chan struct{}), holding: make(chan string, 16)}
}

func (r *recorder) lastVision() *core.VisionInput {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.vision) == 0 {
		return nil
	}
	return r.vision[len(r.vision)-1]
}

func (r *recorder) visionCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.vision)
}

func (r *recorder) lastText() *core.TextInput {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.text) == 0 {
		return nil
	}
	return r.text[len(r.text)-1]
}

// fakeVision answers deterministically from the image's header and the question.
type fakeVision struct{ rec *recorder }

func (f *fakeVision) Answer(ctx context.Context, in *core.VisionInput, emit core.Emit) (*core.Result, error) {
	f.rec.mu.Lock()
	f.rec.vision = append(f.rec.vision, in)
	f.rec.mu.Unlock()
	img := in.Image
	imageTokens := ceilDiv(img.Width, 28) * ceilDiv(img.Height, 28)
	answer := fmt.Sprintf("A %dx%d %s image. You asked: %s", img.Width, img.Height, img.Info.Format, in.Question)
	return runFake(ctx, f.rec, in.RequestID, in.Question, answer, imageTokens, in.Params, emit)
}

func (f *fakeVision) Close() error { return nil }

// fakeText echoes the prompt.
type fakeText struct{ rec *recorder }

func (f *fakeText) Complete(ctx context.Context, in *core.TextInput, emit core.Emit) (*core.Result, error) {
	f.rec.mu.Lock()
	f.rec.text = append(f.rec.text, in)
	f.rec.mu.Unlock()
	return runFake(ctx, f.rec, in.RequestID, in.Question, "You said: "+in.Question, 0, in.Params, emit)
}

func (f *fakeText) Close() error { return nil }

func runFake(ctx context.Context, rec *recorder, id, question, answer string, imageTokens int, p core.Resolved, emit core.Emit) (*core.Result, error) {
	words := strings.Fields(question)
	usage := core.Usage{PromptTokens: 10 + len(words) + imageTokens, ImageTokens: imageTokens}
	switch {
	case strings.Contains(question, doPanic):
		panic("fake task panicked")
	case strings.Contains(question, doFailBefore):
		return nil, core.Errorf(core.KindInternal, "plugin_trap", "", "the plugin trapped at %s", "0xdead")
	}
	if !strings.Contains(question, doStartSilent) {
		if err := emit(core.Event{Kind: core.EventStart, Usage: usage}); err != nil {
			return nil, err
		}
	}
	switch {
	case strings.Contains(question, doFailAfter):
		if err := emit(core.Event{Kind: core.EventDelta, Text: "Partial", Tokens: 1}); err != nil {
			return nil, err
		}
		return nil, core.Errorf(core.KindInternal, "engine_failed", "", "the engine failed")
	case strings.Contains(question, doBlock):
		select {
		case rec.blocking <- id:
		default:
		}
		<-ctx.Done()
		rec.canceled <- id
		return nil, ctx.Err()
	case strings.Contains(question, doHold):
		rec.holding <- id
		select {
		case <-rec.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	tokens := strings.SplitAfter(answer, " ")
	finish := core.FinishStop
	if len(tokens) > p.MaxTokens {
		tokens, finish = tokens[:p.MaxTokens], core.FinishLength
	}
	var (
		text     strings.Builder
		logprobs []core.TokenLogprob
	)
	for i, tok := range tokens {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		text.WriteString(tok)
		ev := core.Event{Kind: core.EventDelta, Text: tok, Tokens: 1}
		if p.Logprobs {
			// each word is a token of log-probability -(i+1)/10; its alternatives are letters
			lp := core.TokenLogprob{Token: tok, Bytes: []byte(tok), Logprob: -float32(i+1) / 10, Top: []core.TopLogprob{}}
			for k := range p.TopLogprobs {
				alt := string(rune('a' + k))
				lp.Top = append(lp.Top, core.TopLogprob{Token: alt, Bytes: []byte(alt), Logprob: -float32(k+1) / 4})
			}
			logprobs = append(logprobs, lp)
			ev.Logprobs = []core.TokenLogprob{lp}
		}
		if err := emit(ev); err != nil {
			return nil, err
		}
	}
	usage.CompletionTokens = len(tokens)
	now := time.Now()
	res := &core.Result{Text: text.String(), FinishReason: finish, Usage: usage, Logprobs: logprobs}
	for i, st := range fakeStages {
		res.Timings = append(res.Timings, core.StageTiming{Stage: st, Start: now, Duration: time.Duration(i+1) * time.Millisecond})
	}
	return res, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Bundle names of the test runtime.
const (
	bundleVL     = "vl"     // vision-language only, default limits
	bundleText   = "text"   // text-generation only
	bundleStrict = "strict" // vision-language with max_bytes 4096, min_side 16, no image budgets
	bundleSlow   = "slow"   // vision-language, for busy and disconnect tests
)

// testEnv is a real runtime over tiny bundles with fake tasks, behind the real server.
type testEnv struct {
	rt   *core.Runtime
	srv  *server.Server
	rec  *recorder
	reg  *prometheus.Registry
	logs *syncBuffer
}

// fixedNow is the clock of golden transcripts.
var fixedNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// envConfig is what an envOption may change before the env is built.
type envConfig struct {
	server   config.Server
	deps     server.Deps
	core     core.Config
	coreOpts []core.Option
}

type envOption func(*envConfig)

func newEnv(t testing.TB, opts ...envOption) *testEnv {
	t.Helper()
	dir := t.TempDir()
	ckpt := writeCheckpoint(t, filepath.Join(dir, "ckpt"))
	plugin := filepath.Join(dir, "plugin.wasm")
	if err := os.WriteFile(plugin, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	specs := []struct {
		name  string
		tasks []bundles.Task
		image bundles.Image
	}{
		{bundleVL, nil, bundles.Image{}},
		{bundleText, []bundles.Task{bundles.TaskText}, bundles.Image{}},
		{bundleStrict, nil, bundles.Image{MaxBytes: 4096, MinSide: 16}},
		{bundleSlow, nil, bundles.Image{}},
	}
	var dirs []string
	for _, s := range specs {
		out := filepath.Join(dir, "bundles", s.name)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := bundles.Build(t.Context(), bundles.BuildOptions{
			From: ckpt, Family: "qwen2_5_vl", Out: out, Plugin: plugin,
			Tasks: s.tasks, Image: s.image, ContextLength: 4096, MaxNewTokens: 64,
		})
		if err != nil {
			t.Fatalf("build bundle %s: %v", s.name, err)
		}
		if s.name == bundleStrict {
			dropBudgets(t, out)
		}
		dirs = append(dirs, out)
	}
	rec := newRecorder()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	ec := envConfig{
		server: config.Default().Server,
		deps:   server.Deps{Registry: reg, Logger: logger, Now: func() time.Time { return fixedNow }},
		core:   core.Config{Bundles: dirs, Workers: 1, QueueDepth: 1},
		coreOpts: []core.Option{
			core.WithVisionTask(func(context.Context, *bundles.Bundle, *core.TaskEnv) (core.VisionTask, error) {
				return &fakeVision{rec: rec}, nil
			}),
			core.WithTextTask(func(context.Context, *bundles.Bundle, *core.TaskEnv) (core.TextTask, error) {
				return &fakeText{rec: rec}, nil
			}),
			core.WithRegisterer(reg), core.WithLogger(logger),
		},
	}
	for _, o := range opts {
		o(&ec)
	}
	rt, err := core.Open(t.Context(), ec.core, ec.coreOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	if err := rt.Warmup(t.Context()); err != nil {
		t.Fatal(err)
	}
	ec.deps.Backend = rt
	srv, err := server.New(ec.server, ec.deps)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{rt: rt, srv: srv, rec: rec, reg: reg, logs: logs}
}

// dropBudgets rewrites a bundle's manifest without image budgets: a bundle whose image
// resolution is fixed.
func dropBudgets(t testing.TB, dir string) {
	editManifest(t, dir, func(m *bundles.Manifest) { m.Image.Budgets = nil })
}

// editManifest rewrites a bundle's manifest after edit changed it.
func editManifest(t testing.TB, dir string, edit func(*bundles.Manifest)) {
	t.Helper()
	path := filepath.Join(dir, bundles.ManifestName)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundles.DecodeManifest(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeCheckpoint(t testing.TB, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"config.json":              `{"model_type": "qwen2_5_vl", "max_position_embeddings": 128000, "eos_token_id": 151645}`,
		"model.safetensors":        "weights-bytes",
		"tokenizer.json":           `{"version": "1.0"}`,
		"tokenizer_config.json":    `{}`,
		"preprocessor_config.json": `{"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14}`,
		"generation_config.json":   `{"eos_token_id": [151645, 151643], "max_new_tokens": 64}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// do sends one request to the env's handler.
func (e *testEnv) do(t testing.TB, method, path, body string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return serve(e.srv.Handler(), req)
}

func serve(h http.Handler, req *http.Request) *http.Response {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Images.

func pngBytes(w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x * 7), uint8(y * 5), uint8(x + y), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func jpegBytes(w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 3), uint8(y * 2), 128, 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// noisyPNG is a PNG that compresses badly, to get over a byte limit.
func noisyPNG(w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	seed := uint32(7)
	for i := range img.Pix {
		seed = seed*1664525 + 1013904223
		img.Pix[i] = uint8(seed >> 24)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// pngBomb is a PNG whose header claims w x h pixels; it has no pixel data at all, so only a
// decoder that trusts the header allocates anything.
func pngBomb(w, h uint32) []byte {
	var buf bytes.Buffer
	buf.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&buf, binary.BigEndian, uint32(len(data)))
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		buf.WriteString(typ)
		buf.Write(data)
		_ = binary.Write(&buf, binary.BigEndian, crc.Sum32())
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	chunk("IHDR", ihdr)
	chunk("IEND", nil)
	return buf.Bytes()
}

func dataURL(mediaType string, b []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(b)
}
