package profile

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iris-vlm/iris/benchmark/parity"
	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/gateway/config"
	"github.com/iris-vlm/iris/gateway/server"
	"github.com/iris-vlm/iris/gateway/telemetry"
)

// scriptedVision stands in for the engine: its answer depends only on the question, the image
// digest and the resolved settings, as a deterministic engine's would. twist changes the
// answer, to play a server whose engine differs from the native one.
type scriptedVision struct {
	twist bool
}

var vocabulary = []string{"A", " red", " square", " on", " white", "."}

func (s *scriptedVision) Answer(ctx context.Context, in *core.VisionInput, emit core.Emit) (*core.Result, error) {
	start := time.Now()
	n := 1 + int(in.Image.Info.SHA256[0])%4
	if in.Params.Temperature > 0 {
		n++
	}
	if s.twist {
		n++
	}
	n = min(n, in.Params.MaxTokens, len(vocabulary))
	usage := core.Usage{PromptTokens: 90 + len(in.Question), ImageTokens: 64}
	if err := emit(core.Event{Kind: core.EventStart, Usage: usage}); err != nil {
		return nil, err
	}
	var text strings.Builder
	for _, w := range vocabulary[:n] {
		time.Sleep(time.Millisecond) // a decode step's time: the answers' latencies are what is profiled
		text.WriteString(w)
		if err := emit(core.Event{Kind: core.EventDelta, Text: w, Tokens: 1}); err != nil {
			return nil, err
		}
	}
	usage.CompletionTokens = n
	step := time.Since(start) / 4
	var timings core.Timings
	for i, st := range []string{core.StagePlan, core.StageVision, core.StagePrefill, core.StageDecode} {
		timings = append(timings, core.StageTiming{Stage: st, Start: start.Add(time.Duration(i) * step), Duration: step})
	}
	reason := core.FinishStop
	if n == in.Params.MaxTokens {
		reason = core.FinishLength
	}
	return &core.Result{Text: text.String(), FinishReason: reason, Usage: usage, Timings: timings}, nil
}

func (s *scriptedVision) Close() error { return nil }

func visionFactory(v core.VisionTask) core.Option {
	return core.WithVisionTask(func(context.Context, *bundles.Bundle, *core.TaskEnv) (core.VisionTask, error) { return v, nil })
}

// testBundle builds a bundle named demo from placeholder checkpoint files.
func testBundle(t *testing.T) string {
	t.Helper()
	from := t.TempDir()
	for n, body := range map[string]string{
		"config.json":       `{"model_type": "qwen2_5_vl"}`,
		"model.safetensors": "placeholder weights",
		"tokenizer.json":    "{}",
	} {
		if err := os.WriteFile(filepath.Join(from, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plugin := filepath.Join(t.TempDir(), "p.wasm")
	if err := os.WriteFile(plugin, []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "demo")
	if _, err := bundles.Build(t.Context(), bundles.BuildOptions{From: from, Family: "qwen2_5_vl", Out: out, Plugin: plugin,
		Tasks: []bundles.Task{bundles.TaskVisionLanguage}, ContextLength: 512, MaxNewTokens: 16}); err != nil {
		t.Fatal(err)
	}
	return out
}

// nativeOpener opens the bundle in-process with the scripted engine.
func nativeOpener() openNative {
	return func(ctx context.Context, bundle string) (parity.Runtime, func() error, error) {
		rt, err := core.Open(ctx, core.Config{Bundles: []string{bundle}}, visionFactory(&scriptedVision{}), core.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return nil, nil, err
		}
		return rt, rt.Close, nil
	}
}

// gateway is the real Iris HTTP server over the real runtime, with the scripted engine.
type gateway struct {
	url      string
	requests atomic.Int64
}

type gatewayOptions struct {
	twist bool
	// otlp is the address spans are exported to; empty exports none.
	otlp string
	// before runs before request n (1-based) is served; a non-zero status answers it instead.
	before func(n int64) int
}

func startGateway(t *testing.T, bundle string, o gatewayOptions) *gateway {
	t.Helper()
	tcfg := telemetry.Config{Exporter: telemetry.ExporterNone}
	if o.otlp != "" {
		tcfg = telemetry.Config{Exporter: telemetry.ExporterOTLPHTTP, Endpoint: "http://" + o.otlp, BatchDelay: 20 * time.Millisecond}
	}
	tel, err := telemetry.Setup(t.Context(), tcfg)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := core.Open(t.Context(), core.Config{Bundles: []string{bundle}}, visionFactory(&scriptedVision{twist: o.twist}),
		core.WithTracerProvider(tel.TracerProvider()), core.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Warmup(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(config.Default().Server, server.Deps{Backend: rt, TracerProvider: tel.TracerProvider(),
		Propagator: tel.Propagator(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{}
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := g.requests.Add(1)
		if o.before != nil {
			if status := o.before(n); status != 0 {
				http.Error(w, `{"error":{"message":"scripted failure"}}`, status)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	g.url = hs.URL
	t.Cleanup(func() {
		hs.Close()
		_ = tel.Shutdown(context.Background())
		_ = rt.Close()
	})
	return g
}

func pngDataURI(t *testing.T, w, h int, c color.RGBA) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{c.R ^ uint8(x), c.G ^ uint8(y), c.B, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// writeInput writes a three-row single_turn file.
func writeInput(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.jsonl")
	var b bytes.Buffer
	for i, c := range []color.RGBA{{200, 30, 30, 255}, {30, 200, 30, 255}, {30, 30, 200, 255}} {
		row := map[string]any{"session_id": "img-000" + string(rune('0'+i)), "text": "What is the main object in this image? Answer in one word.",
			"image": pngDataURI(t, 64, 48, c), "output_length": 10}
		line, _ := json.Marshal(row)
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// gitRepo makes a work tree with one committed file.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init"}} {
		if out, err := runGit(dir, args...); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return dir
}
