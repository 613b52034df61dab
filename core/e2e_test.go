package core_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/core/coretest"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
)

// TestEndToEndGreedyParity runs every fixture case through the whole runtime (image decode, the
// wasm plugin, native pixels, the tokenizer, the C engine) and compares with transformers.
func TestEndToEndGreedyParity(t *testing.T) {
	names, err := fixture.CaseNames()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 8 {
		t.Fatalf("%d fixture cases, want >= 8", len(names))
	}
	for _, model := range []string{"tiny-untied", "tiny-tied"} {
		t.Run(model, func(t *testing.T) {
			golden, err := fixture.LoadGolden(model)
			if err != nil {
				t.Fatal(err)
			}
			rt, err := core.Open(t.Context(), core.Config{Bundles: []string{coretest.Bundle(t, model, 1024)}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rt.Close() })
			for _, g := range golden.Cases {
				t.Run(g.Case, func(t *testing.T) {
					c, err := fixture.LoadCase(g.Case)
					if err != nil {
						t.Fatal(err)
					}
					img, err := os.ReadFile(filepath.Join(fixture.Root(), fixture.Family, "cases", c.Image))
					if err != nil {
						t.Fatal(err)
					}
					var streamed strings.Builder
					res, err := rt.Generate(t.Context(), core.Request{
						Model: model, Text: c.Question, Image: img,
						Params: core.Params{MaxTokens: len(g.Tokens), IgnoreEOS: true},
					}, func(ev core.Event) error {
						if ev.Kind == core.EventDelta {
							streamed.WriteString(ev.Text)
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(res.TokenIDs, g.Tokens) {
						t.Fatalf("greedy tokens differ from transformers:\n got %v\nwant %v", res.TokenIDs, g.Tokens)
					}
					if res.Usage.PromptTokens != len(c.InputIDs) || res.Usage.CompletionTokens != len(g.Tokens) {
						t.Fatalf("usage %+v, want prompt %d completion %d", res.Usage, len(c.InputIDs), len(g.Tokens))
					}
					if !slices.Equal(res.PromptIDs, c.InputIDs) || res.StopToken != nil {
						t.Fatalf("prompt ids differ from transformers' input_ids, or a stop token %v with ignore_eos", res.StopToken)
					}
					if streamed.String() != res.Text {
						t.Fatalf("streamed text %q differs from the answer %q", streamed.String(), res.Text)
					}
				})
			}
		})
	}
}

// TestBoundsBeforeKernels: a request the context cannot hold is refused as a client error, and
// the next valid request still works.
func TestBoundsBeforeKernels(t *testing.T) {
	dir := coretest.Bundle(t, "tiny-untied", 1024)
	rt, err := core.Open(t.Context(), core.Config{Bundles: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	c, err := fixture.LoadCase("large_644x476")
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(filepath.Join(fixture.Root(), fixture.Family, "cases", c.Image))
	if err != nil {
		t.Fatal(err)
	}
	// The prompt is about 400 tokens: 900 new tokens fit the budget check on max_tokens alone
	// but not prompt + max_tokens in the 1024-token context.
	_, err = rt.Generate(t.Context(), core.Request{Model: "tiny-untied", Text: c.Question, Image: img, Params: core.Params{MaxTokens: 900}}, nil)
	var e *core.Error
	if !errorsAs(err, &e) || e.Kind != core.KindInvalid || e.Code != "context_length_exceeded" {
		t.Fatalf("over-long request: %v, want 400 context_length_exceeded", err)
	}
	res, err := rt.Generate(t.Context(), core.Request{Model: "tiny-untied", Text: c.Question, Image: img, Params: core.Params{MaxTokens: 4}}, nil)
	if err != nil || res.Usage.CompletionTokens == 0 {
		t.Fatalf("the next valid request: %+v, %v", res, err)
	}
}

// TestStopStrings runs the real runtime once without stop strings, then with stop strings cut
// from that answer (one spanning several tokens, one inside a single token's text): the answer
// must end right before the stop string with finish_reason stop, streamed and not alike.
func TestStopStrings(t *testing.T) {
	const model = "tiny-untied"
	rt, err := core.Open(t.Context(), core.Config{Bundles: []string{coretest.Bundle(t, model, 1024)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	c, err := fixture.LoadCase("rect_320x240")
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(filepath.Join(fixture.Root(), fixture.Family, "cases", c.Image))
	if err != nil {
		t.Fatal(err)
	}
	run := func(stop []string) (*core.Result, string) {
		t.Helper()
		var (
			streamed strings.Builder
			ids      []int32
		)
		res, err := rt.Generate(t.Context(), core.Request{Model: model, Text: c.Question, Image: img,
			Params: core.Params{MaxTokens: 24, IgnoreEOS: true, Stop: stop}}, func(ev core.Event) error {
			if ev.Kind == core.EventDelta {
				streamed.WriteString(ev.Text)
				ids = append(ids, ev.TokenIDs...)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// a stop string is not a stop token; the deltas' ids are the answer's
		if res.StopToken != nil || !slices.Equal(ids, res.TokenIDs) {
			t.Fatalf("stop %q: stop token %v, deltas' ids %v, answer's %v", stop, res.StopToken, ids, res.TokenIDs)
		}
		return res, streamed.String()
	}
	full, _ := run(nil)
	if len(full.Text) < 12 || full.FinishReason != core.FinishLength {
		t.Fatalf("the answer without stop strings is too short to cut: %q (%s)", full.Text, full.FinishReason)
	}
	mid := len(full.Text) / 2
	for !utf8.RuneStart(full.Text[mid]) {
		mid++
	}
	end := mid + 1
	for end < len(full.Text) && !utf8.RuneStart(full.Text[end]) {
		end++
	}
	cases := []struct {
		name string
		stop []string
	}{
		{"spans tokens", []string{full.Text[mid:min(mid+6, len(full.Text))]}},
		{"one character", []string{full.Text[mid:end]}},
		{"absent and present", []string{"\x01never", full.Text[mid:min(mid+3, len(full.Text))]}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, streamed := run(tc.stop)
			want := full.Text[:strings.Index(full.Text, tc.stop[len(tc.stop)-1])]
			if res.Text != want || res.FinishReason != core.FinishStop {
				t.Fatalf("stop %q: answer %q (%s), want %q (stop)", tc.stop, res.Text, res.FinishReason, want)
			}
			if streamed != res.Text {
				t.Fatalf("streamed %q, answer %q", streamed, res.Text)
			}
			if res.Usage.CompletionTokens >= full.Usage.CompletionTokens {
				t.Errorf("%d tokens: generation did not stop early", res.Usage.CompletionTokens)
			}
		})
	}
	res, streamed := run([]string{"\x01never"})
	if res.Text != full.Text || streamed != full.Text || res.FinishReason != core.FinishLength {
		t.Fatalf("an absent stop string changed the answer: %q (%s)", res.Text, res.FinishReason)
	}
}

// TestSystemMessage runs the real runtime with client system messages. Qwen2.5-VL's default
// system turn sent explicitly gives the very prompt and answer of a request without one; another
// system message replaces it (prompt ids against transformers: prep's TestGolden).
func TestSystemMessage(t *testing.T) {
	const model = "tiny-untied"
	rt, err := core.Open(t.Context(), core.Config{Bundles: []string{coretest.Bundle(t, model, 1024)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	c, err := fixture.LoadCase("square_56")
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(filepath.Join(fixture.Root(), fixture.Family, "cases", c.Image))
	if err != nil {
		t.Fatal(err)
	}
	run := func(system *string) *core.Result {
		t.Helper()
		res, err := rt.Generate(t.Context(), core.Request{Model: model, Text: c.Question, Image: img,
			Params: core.Params{MaxTokens: 8, IgnoreEOS: true, System: system}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	plain := run(nil)
	if plain.Usage.PromptTokens != len(c.InputIDs) {
		t.Fatalf("prompt %d tokens, the fixture's is %d", plain.Usage.PromptTokens, len(c.InputIDs))
	}
	def := "You are a helpful assistant."
	same := run(&def)
	if same.Usage.PromptTokens != plain.Usage.PromptTokens || !slices.Equal(same.TokenIDs, plain.TokenIDs) {
		t.Errorf("the default system prompt sent explicitly changed the answer: %v vs %v", same.TokenIDs, plain.TokenIDs)
	}
	if same.Params.Key("q", "x") == plain.Params.Key("q", "x") {
		t.Error("the system message is not part of the answer's identity")
	}
	short := "Hi."
	other := run(&short)
	// "You are a helpful assistant." is 6 tokens, "Hi." 2.
	if other.Usage.PromptTokens != plain.Usage.PromptTokens-4 {
		t.Errorf("prompt %d tokens with a 2-token system message, want %d", other.Usage.PromptTokens, plain.Usage.PromptTokens-4)
	}
}

// TestLogprobs runs the real runtime with logprobs and top_logprobs, streamed: the tokens are
// those of a request without them, the log-probabilities transformers' (golden_logprobs.py)
// within 1e-4, the streamed entries those of the answer, one per token, and each entry's bytes
// are the token's part of the answer.
func TestLogprobs(t *testing.T) {
	const model, name = "tiny-untied", "rect_320x240"
	raw, err := os.ReadFile(filepath.Join(fixture.Root(), fixture.Family, "golden", "logprobs-"+model+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Case  string
			Steps []struct {
				Token       int32
				Logprob     float64
				TopLogprobs []float64 `json:"top_logprobs"`
			}
		}
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	rt, err := core.Open(t.Context(), core.Config{Bundles: []string{coretest.Bundle(t, model, 1024)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	c, err := fixture.LoadCase(name)
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(filepath.Join(fixture.Root(), fixture.Family, "cases", c.Image))
	if err != nil {
		t.Fatal(err)
	}
	var streamed []core.TokenLogprob
	res, err := rt.Generate(t.Context(), core.Request{Model: model, Text: c.Question, Image: img,
		Params: core.Params{MaxTokens: 8, IgnoreEOS: true, Logprobs: true, TopLogprobs: 5}}, func(ev core.Event) error {
		streamed = append(streamed, ev.Logprobs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := rt.Generate(t.Context(), core.Request{Model: model, Text: c.Question, Image: img,
		Params: core.Params{MaxTokens: 8, IgnoreEOS: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.TokenIDs, plain.TokenIDs) || plain.Logprobs != nil {
		t.Fatalf("logprobs changed the tokens: %v vs %v", res.TokenIDs, plain.TokenIDs)
	}
	if len(res.Logprobs) != len(res.TokenIDs) || len(streamed) != len(res.Logprobs) {
		t.Fatalf("%d entries, %d streamed, for %d tokens", len(res.Logprobs), len(streamed), len(res.TokenIDs))
	}
	var want []struct {
		Token       int32
		Logprob     float64
		TopLogprobs []float64 `json:"top_logprobs"`
	}
	for _, gc := range golden.Cases {
		if gc.Case == name {
			want = gc.Steps
		}
	}
	var text []byte
	for i, lp := range res.Logprobs {
		if res.TokenIDs[i] != want[i].Token || math.Abs(float64(lp.Logprob)-want[i].Logprob) > 1e-4 {
			t.Errorf("step %d: token %d logprob %v, transformers %d %v", i, res.TokenIDs[i], lp.Logprob, want[i].Token, want[i].Logprob)
		}
		if len(lp.Top) != 5 || math.Abs(float64(lp.Top[0].Logprob)-want[i].TopLogprobs[0]) > 1e-4 || lp.Top[0].Logprob < lp.Top[4].Logprob {
			t.Errorf("step %d: top %+v", i, lp.Top)
		}
		if s := streamed[i]; s.Token != lp.Token || s.Logprob != lp.Logprob || len(s.Top) != len(lp.Top) {
			t.Errorf("step %d: streamed %+v, answer %+v", i, s, lp)
		}
		if res.TokenIDs[i] < 151643 { // special tokens are skipped from the text
			text = append(text, lp.Bytes...)
		}
	}
	if string(text) != res.Text {
		t.Errorf("the entries' bytes give %q, the answer is %q", text, res.Text)
	}
}

// TestImageBudgets runs the real runtime (a bundle built with its family's budgets) at several
// budgets: fewer or more image tokens, the budget reported in the result, and the default budget
// giving the very answer of a request without one.
func TestImageBudgets(t *testing.T) {
	const model = "tiny-untied"
	rt, err := core.Open(t.Context(), core.Config{Bundles: []string{coretest.Bundle(t, model, 4096)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	c, err := fixture.LoadCase("large_644x476")
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(filepath.Join(fixture.Root(), fixture.Family, "cases", c.Image))
	if err != nil {
		t.Fatal(err)
	}
	run := func(p core.Params) *core.Result {
		t.Helper()
		p.MaxTokens, p.IgnoreEOS = 4, true
		res, err := rt.Generate(t.Context(), core.Request{Model: model, Text: c.Question, Image: img, Params: p}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	plain := run(core.Params{})
	// 644x476 at the default budget is 23x17 cells of 28 px: 391 image tokens
	if b := plain.Params.Budget; b == nil || b.Detail != "auto" || !b.Default || plain.Usage.ImageTokens != 391 {
		t.Fatalf("default: budget %+v, %d image tokens", b, plain.Usage.ImageTokens)
	}
	auto := run(core.Params{Detail: "auto"})
	if !slices.Equal(auto.TokenIDs, plain.TokenIDs) || auto.Usage != plain.Usage {
		t.Errorf("detail auto changed the answer")
	}
	for _, tc := range []struct {
		name   string
		p      core.Params
		tokens int
		budget core.PixelBudget
	}{
		// image tokens from transformers' smart_resize(476, 644, 28, min, max): 364x504, 252x364, 672x924
		{"low", core.Params{Detail: "low"}, 234, core.PixelBudget{Detail: "low", MinPixels: 3136, MaxPixels: 200704}},
		{"max_pixels", core.Params{MaxPixels: 100000}, 117, core.PixelBudget{Detail: "auto", MinPixels: 3136, MaxPixels: 100000}},
		{"min_pixels up", core.Params{MinPixels: 600000}, 792, core.PixelBudget{Detail: "auto", MinPixels: 600000, MaxPixels: 12845056}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(tc.p)
			if b := res.Params.Budget; b == nil || *b != tc.budget || res.Usage.ImageTokens != tc.tokens {
				t.Fatalf("budget %+v, %d image tokens; want %+v, %d", b, res.Usage.ImageTokens, tc.budget, tc.tokens)
			}
			if res.Params.Key("q", "x") == plain.Params.Key("q", "x") {
				t.Error("the budget is not part of the answer's identity")
			}
		})
	}
}
