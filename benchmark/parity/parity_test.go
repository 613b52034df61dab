package parity

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/benchmark/aiperf"
	"github.com/iris-vlm/iris/benchmark/workload"
	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core"
)

// wordsVision answers with as many words as the request allows, so that every setting that
// reaches the task shows in the answer.
type wordsVision struct{}

func (wordsVision) Answer(_ context.Context, in *core.VisionInput, _ core.Emit) (*core.Result, error) {
	n := min(in.Params.MaxTokens, 3)
	return &core.Result{Text: strings.Repeat("w", n), Usage: core.Usage{CompletionTokens: n}, FinishReason: core.FinishStop}, nil
}
func (wordsVision) Close() error { return nil }

func openRuntime(t *testing.T) *core.Runtime {
	t.Helper()
	from := t.TempDir()
	for n, body := range map[string]string{"config.json": `{"model_type": "qwen2_5_vl"}`, "model.safetensors": "x", "tokenizer.json": "{}"} {
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
	rt, err := core.Open(t.Context(), core.Config{Bundles: []string{out}},
		core.WithVisionTask(func(context.Context, *bundles.Bundle, *core.TaskEnv) (core.VisionTask, error) {
			return wordsVision{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

func pngURI(t *testing.T, shade uint8) (string, []byte) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 32, 32))
	for i := range img.Pix {
		img.Pix[i] = shade
	}
	img.Set(1, 1, color.RGBA{1, 2, 3, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes()), b.Bytes()
}

func ptr[T any](v T) *T { return &v }

func body(t *testing.T, row aiperf.Row, s workload.Settings) []byte {
	t.Helper()
	if s.Model == "" {
		s.Model = "demo"
	}
	reqs, err := workload.Build([]aiperf.Row{row}, s)
	if err != nil {
		t.Fatal(err)
	}
	return reqs[0].Body
}

// TestOneRequestShape checks that the settings of a run reach the runtime's request unchanged
// through the body the profiler sends: the review of the upstream profiler found native runs
// with other token limits than the HTTP runs.
func TestOneRequestShape(t *testing.T) {
	uri, img := pngURI(t, 9)
	row := aiperf.Row{SessionID: "s", Text: "What is it?", Image: uri, OutputLength: 7}
	tests := []struct {
		name string
		s    workload.Settings
		want core.Params
	}{
		{"row limit", workload.Settings{}, core.Params{MaxTokens: 7}},
		{"run limit wins", workload.Settings{MaxTokens: 10}, core.Params{MaxTokens: 10}},
		{"every setting", workload.Settings{MaxTokens: 10, Temperature: ptr(0.0), TopK: ptr(1), TopP: ptr(0.5), Seed: ptr(int64(3)), IgnoreEOS: true, Stream: true},
			core.Params{MaxTokens: 10, Temperature: ptr(0.0), TopK: ptr(1), TopP: ptr(0.5), Seed: ptr(int64(3)), IgnoreEOS: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := Request(body(t, row, tt.s))
			if err != nil {
				t.Fatal(err)
			}
			if req.Model != "demo" || req.Text != row.Text || !bytes.Equal(req.Image, img) || !req.TextFirst {
				t.Errorf("request %+v", req)
			}
			p, w := req.Params, tt.want
			if p.MaxTokens != w.MaxTokens || !eq(p.Temperature, w.Temperature) || !eq(p.TopK, w.TopK) || !eq(p.TopP, w.TopP) || !eq(p.Seed, w.Seed) || p.IgnoreEOS != w.IgnoreEOS {
				t.Errorf("params %+v, want %+v", p, w)
			}
		})
	}
	// No limit anywhere: the body sets none and the bundle's own default applies.
	req, err := Request(body(t, aiperf.Row{SessionID: "s", Text: "q", Image: uri}, workload.Settings{}))
	if err != nil || req.Params.MaxTokens != 0 {
		t.Fatalf("params %+v, %v", req.Params, err)
	}
}

func eq[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// TestKeyCoverage checks that every setting that changes an answer changes the identity key, so
// that a record can only match the native answer of the very same request.
func TestKeyCoverage(t *testing.T) {
	rt := openRuntime(t)
	uri, _ := pngURI(t, 9)
	other, _ := pngURI(t, 10)
	base := aiperf.Row{SessionID: "s", Text: "What is it?", Image: uri}
	baseSet := workload.Settings{MaxTokens: 10, Temperature: ptr(0.0), TopK: ptr(1)}
	key := func(b []byte, sha string) string {
		req, err := Request(b)
		if err != nil {
			t.Fatal(err)
		}
		k, err := Key(rt, req, sha)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	want := key(body(t, base, baseSet), "")
	with := func(f func(*workload.Settings)) []byte {
		s := baseSet
		f(&s)
		return body(t, base, s)
	}
	differ := map[string][]byte{
		"max tokens":  with(func(s *workload.Settings) { s.MaxTokens = 9 }),
		"temperature": with(func(s *workload.Settings) { s.Temperature = ptr(0.7) }),
		"top_k":       with(func(s *workload.Settings) { s.TopK = ptr(2) }),
		"top_p":       with(func(s *workload.Settings) { s.TopP = ptr(0.9) }),
		"seed":        with(func(s *workload.Settings) { s.Seed = ptr(int64(1)) }),
		"ignore_eos":  with(func(s *workload.Settings) { s.IgnoreEOS = true }),
		"question":    body(t, aiperf.Row{SessionID: "s", Text: "What is that?", Image: uri}, baseSet),
		"image":       body(t, aiperf.Row{SessionID: "s", Text: "What is it?", Image: other}, baseSet),
		"part order": []byte(strings.Replace(string(body(t, base, baseSet)),
			`[{"type":"text","text":"What is it?"},{"type":"image_url","image_url":{"url":"`+uri+`"}}]`,
			`[{"type":"image_url","image_url":{"url":"`+uri+`"}},{"type":"text","text":"What is it?"}]`, 1)),
	}
	for name, b := range differ {
		if key(b, "") == want {
			t.Errorf("%s: same key as the base request", name)
		}
	}
	if key(body(t, base, baseSet), strings.Repeat("0", 64)) == want {
		t.Error("a different server-reported image digest kept the key")
	}
	same := map[string][]byte{
		"same body":          body(t, base, baseSet),
		"stream":             with(func(s *workload.Settings) { s.Stream = true }),
		"explicit top_p one": with(func(s *workload.Settings) { s.TopP = ptr(1.0) }),
	}
	for name, b := range same {
		if key(b, "") != want {
			t.Errorf("%s: key changed", name)
		}
	}
}

func TestCheck(t *testing.T) {
	rt := openRuntime(t)
	uri, _ := pngURI(t, 9)
	row := aiperf.Row{SessionID: "s", Text: "What is it?", Image: uri}
	b10 := body(t, row, workload.Settings{MaxTokens: 10})
	b2 := body(t, row, workload.Settings{MaxTokens: 2})
	native, err := RunNative(t.Context(), rt, [][]byte{b10, b10})
	if err != nil {
		t.Fatal(err)
	}
	if len(native) != 1 {
		t.Fatalf("%d native answers for one distinct request", len(native))
	}
	obs := []Observed{
		{RequestID: "ok", Phase: "profiling", Body: b10, Text: "www", CompletionTokens: 3},
		{RequestID: "text", Phase: "profiling", Body: b10, Text: "wwx", CompletionTokens: 3},
		{RequestID: "tokens", Phase: "profiling", Body: b10, Text: "www", CompletionTokens: 4},
		{RequestID: "no usage", Phase: "profiling", Body: b10, Text: "www", CompletionTokens: -1},
		// Answered as the native run answers max_tokens 10, but the request said 2.
		{RequestID: "other limit", Phase: "profiling", Body: b2, Text: "www", CompletionTokens: 3},
		{RequestID: "failed", Phase: "profiling", Body: b10, Failed: true},
		{RequestID: "garbage", Phase: "profiling", Body: []byte("{"), Text: "www", CompletionTokens: 3},
	}
	rep := Check(rt, native, obs)
	want := map[string]Outcome{"ok": Match, "text": Mismatch, "tokens": Mismatch, "no usage": Mismatch,
		"other limit": Unmatched, "failed": Failed, "garbage": Unmatched}
	for _, v := range rep.Verdicts {
		if v.Outcome != want[v.RequestID] {
			t.Errorf("%s: %s (%s), want %s", v.RequestID, v.Outcome, v.Detail, want[v.RequestID])
		}
	}
	if rep.OK() || len(rep.Failures()) != 6 {
		t.Errorf("report OK=%v with %d failures", rep.OK(), len(rep.Failures()))
	}
	if !Check(rt, native, obs[:1]).OK() {
		t.Error("a run of matches is not OK")
	}
	if Check(rt, native, nil).OK() {
		t.Error("a run without records is OK")
	}
}
