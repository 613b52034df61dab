package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/gateway/openai"
)

const chatPath = "/v1/chat/completions"

func textPart(q string) map[string]any { return map[string]any{"type": "text", "text": q} }

func imagePart(url string) map[string]any {
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}
}

// chat builds a request body for model with one user message of the given content (a string or
// parts) and extra top-level fields.
func chat(model string, content any, extra map[string]any) string {
	m := map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": content}}}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// withMessages builds a body with the given raw messages.
func withMessages(msgs ...map[string]any) string {
	b, _ := json.Marshal(map[string]any{"model": bundleVL, "messages": msgs})
	return string(b)
}

const question = "What is in this image?"

var (
	png64x48   = pngBytes(64, 48)
	pngURL     = dataURL("image/png", png64x48)
	jpeg40x30  = jpegBytes(40, 30)
	okParts    = []any{textPart(question), imagePart(pngURL)}
	imageParam = "messages[0].content[1].image_url.url"
	uuidRe     = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

func vl(extra map[string]any) string { return chat(bundleVL, okParts, extra) }

// withDetail is a vision request whose image part has the given detail value.
func withDetail(model string, detail any, extra map[string]any) string {
	part := map[string]any{"type": "image_url", "image_url": map[string]any{"url": pngURL, "detail": detail}}
	return chat(model, []any{textPart(question), part}, extra)
}

// budgetOf reads the iris extension's image budget.
func budgetOf(t *testing.T, body []byte) openai.IrisBudget {
	t.Helper()
	cc := completionOf(t, body)
	if cc.Iris == nil || cc.Iris.Image == nil || cc.Iris.Image.Budget == nil {
		t.Fatalf("no budget in %s", body)
	}
	return *cc.Iris.Image.Budget
}

const detailParam = "messages[0].content[1].image_url.detail"

func withImage(url string) string {
	return chat(bundleVL, []any{textPart(question), imagePart(url)}, nil)
}

type contractCase struct {
	name   string
	method string // default POST
	path   string // default /v1/chat/completions
	body   string
	header http.Header
	status int
	// alsoStatus is a second accepted status: image_too_large is 400 or 413 while core settles
	// whether an image over a cap is KindInvalid or KindTooLarge (imageio says 413).
	alsoStatus int
	code       string // error code, for non-2xx
	param      string // error param, for non-2xx
	// startsTask marks a refusal found only while the pixels decode, which runs beside the
	// task: the task starts on the checked header, and its first event waits for the pixels.
	startsTask bool
	check      func(t *testing.T, e *testEnv, resp *http.Response, body []byte)
}

func completionOf(t *testing.T, body []byte) openai.ChatCompletion {
	t.Helper()
	var cc openai.ChatCompletion
	if err := json.Unmarshal(body, &cc); err != nil {
		t.Fatalf("decode completion: %v\n%s", err, body)
	}
	return cc
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var contractCases = []contractCase{
	// Served.
	{name: "image after text", body: vl(nil), status: 200, check: func(t *testing.T, e *testEnv, resp *http.Response, body []byte) {
		cc := completionOf(t, body)
		want := "A 64x48 png image. You asked: " + question
		if cc.Object != "chat.completion" || len(cc.Choices) != 1 || cc.Choices[0].Message.Content != want ||
			cc.Choices[0].Message.Role != "assistant" || cc.Choices[0].FinishReason != "stop" || cc.Model != bundleVL {
			t.Errorf("completion %+v", cc)
		}
		img := ceilDiv(64, 28) * ceilDiv(48, 28)
		u := cc.Usage
		if u == nil || u.PromptTokens != 10+5+img || u.CompletionTokens != len(strings.Fields(want)) ||
			u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.PromptTokensDetails.ImageTokens != img {
			t.Errorf("usage %+v", u)
		}
		info, _ := e.rt.Model(bundleVL)
		ir := cc.Iris
		if ir == nil || ir.Image == nil || ir.Image.SHA256 != sha(png64x48) || ir.Image.Format != "png" ||
			ir.Image.Width != 64 || ir.Image.Height != 48 || ir.Bundle.Name != bundleVL || ir.Bundle.Digest != info.Digest {
			t.Fatalf("iris %+v", ir)
		}
		for _, st := range append([]string{core.StageQueue, core.StageDecodeImage}, fakeStages...) {
			if _, ok := ir.TimingsMS[st]; !ok {
				t.Errorf("timings_ms lacks %s: %v", st, ir.TimingsMS)
			}
		}
		if ir.TimingsMS[core.StageVision] != 3 {
			t.Errorf("vision took %v ms, the fake said 3", ir.TimingsMS[core.StageVision])
		}
		if in := e.rec.lastVision(); !in.TextFirst || in.Question != question || in.Image.Width != 64 {
			t.Errorf("task input %+v", in)
		}
		if id := resp.Header.Get("X-Request-ID"); !uuidRe.MatchString(id) || cc.ID != "chatcmpl-"+id {
			t.Errorf("request id %q, completion id %q", id, cc.ID)
		}
	}},
	{name: "image before text", body: chat(bundleVL, []any{imagePart(pngURL), textPart(question)}, nil), status: 200,
		check: func(t *testing.T, e *testEnv, _ *http.Response, _ []byte) {
			if in := e.rec.lastVision(); in.TextFirst {
				t.Error("the task was told the text came first")
			}
		}},
	{name: "jpeg", body: withImage(dataURL("image/jpeg", jpeg40x30)), status: 200, check: func(t *testing.T, _ *testEnv, _ *http.Response, body []byte) {
		if im := completionOf(t, body).Iris.Image; im.Format != "jpeg" || im.Width != 40 || im.SHA256 != sha(jpeg40x30) {
			t.Errorf("image %+v", im)
		}
	}},
	{name: "image/jpg media type", body: withImage(dataURL("image/jpg", jpeg40x30)), status: 200},
	{name: "text-only string to a text bundle", body: chat(bundleText, "Hello there", nil), status: 200,
		check: func(t *testing.T, e *testEnv, _ *http.Response, body []byte) {
			cc := completionOf(t, body)
			if cc.Choices[0].Message.Content != "You said: Hello there" || cc.Iris.Image != nil || cc.Usage.PromptTokensDetails.ImageTokens != 0 {
				t.Errorf("completion %+v", cc)
			}
			if in := e.rec.lastText(); in == nil || in.Question != "Hello there" {
				t.Errorf("text task input %+v", in)
			}
		}},
	{name: "text-only part to a text bundle", body: chat(bundleText, []any{textPart("Hi")}, nil), status: 200},
	{name: "generation settings reach the task", body: vl(map[string]any{"max_tokens": 3, "temperature": 0.5, "top_k": 7, "top_p": 0.9, "seed": 42, "ignore_eos": true}),
		status: 200, check: func(t *testing.T, e *testEnv, _ *http.Response, body []byte) {
			cc := completionOf(t, body)
			if cc.Choices[0].FinishReason != "length" || cc.Usage.CompletionTokens != 3 || cc.Choices[0].Message.Content != "A 64x48 png " {
				t.Errorf("completion %+v", cc.Choices[0])
			}
			p := e.rec.lastVision().Params
			if p.MaxTokens != 3 || p.Temperature != 0.5 || p.TopK != 7 || p.TopP != 0.9 || p.Seed != 42 || !p.IgnoreEOS {
				t.Errorf("resolved params %+v", p)
			}
		}},
	{name: "stop strings reach the task", body: vl(map[string]any{"stop": []string{"\n", "END"}}), status: 200,
		check: func(t *testing.T, e *testEnv, _ *http.Response, _ []byte) {
			if p := e.rec.lastVision().Params; len(p.Stop) != 2 || p.Stop[0] != "\n" || p.Stop[1] != "END" {
				t.Errorf("stop %q", p.Stop)
			}
		}},
	{name: "stop as one string", body: vl(map[string]any{"stop": "."}), status: 200,
		check: func(t *testing.T, e *testEnv, _ *http.Response, _ []byte) {
			if p := e.rec.lastVision().Params; len(p.Stop) != 1 || p.Stop[0] != "." {
				t.Errorf("stop %q", p.Stop)
			}
		}},
	{name: "stop empty forms", body: vl(map[string]any{"stop": ""}), status: 200,
		check: func(t *testing.T, e *testEnv, _ *http.Response, _ []byte) {
			if p := e.rec.lastVision().Params; p.Stop != nil {
				t.Errorf("stop %q", p.Stop)
			}
		}},
	{name: "system message reaches the task", body: withMessages(map[string]any{"role": "system", "content": "Be brief."}, map[string]any{"role": "user", "content": okParts}),
		status: 200, check: func(t *testing.T, e *testEnv, _ *http.Response, _ []byte) {
			if p := e.rec.lastVision().Params; p.System == nil || *p.System != "Be brief." {
				t.Errorf("system %v", p.System)
			}
		}},
	{name: "developer message as text parts", body: withMessages(map[string]any{"role": "developer", "content": []any{textPart("Be "), textPart("brief.")}}, map[string]any{"role": "user", "content": okParts}),
		status: 200, check: func(t *testing.T, e *testEnv, _ *http.Response, _ []byte) {
			if p := e.rec.lastVision().Params; p.System == nil || *p.System != "Be brief." {
				t.Errorf("system %v", p.System)
			}
		}},
	{name: "no system message", body: vl(nil), status: 200, check: func(t *testing.T, e *testEnv, _ *http.Response, _ []byte) {
		if p := e.rec.lastVision().Params; p.System != nil {
			t.Errorf("system %q", *p.System)
		}
	}},
	{name: "logprobs with top_logprobs", body: vl(map[string]any{"logprobs": true, "top_logprobs": 3, "max_tokens": 2}), status: 200,
		check: func(t *testing.T, e *testEnv, _ *http.Response, body []byte) {
			if p := e.rec.lastVision().Params; !p.Logprobs || p.TopLogprobs != 3 {
				t.Errorf("params %+v", p)
			}
			var raw struct {
				Choices []struct {
					Logprobs struct {
						Content []struct {
							Token       string
							Logprob     float64
							Bytes       []int
							TopLogprobs []struct {
								Token   string
								Logprob float64
								Bytes   []int
							} `json:"top_logprobs"`
						}
					}
				}
			}
			if err := json.Unmarshal(body, &raw); err != nil {
				t.Fatal(err)
			}
			c := raw.Choices[0].Logprobs.Content
			if len(c) != 2 || c[0].Token != "A " || c[0].Bytes[0] != 'A' || c[0].Bytes[1] != ' ' || c[1].Logprob != -0.2 ||
				len(c[1].TopLogprobs) != 3 || c[1].TopLogprobs[2].Token != "c" || c[1].TopLogprobs[2].Bytes[0] != 'c' {
				t.Errorf("logprobs %s", body)
			}
		}},
	{name: "logprobs without top_logprobs", body: vl(map[string]any{"logprobs": true, "top_logprobs": 0, "max_tokens": 1}), status: 200,
		check: func(t *testing.T, _ *testEnv, _ *http.Response, body []byte) {
			if !strings.Contains(string(body), `"logprobs":{"content":[{"token":"A ","logprob":-0.1`) || !strings.Contains(string(body), `"bytes":[65,32],"top_logprobs":[]}]}`) {
				t.Errorf("body %s", body)
			}
		}},
	{name: "logprobs false", body: vl(map[string]any{"logprobs": false}), status: 200,
		check: func(t *testing.T, e *testEnv, _ *http.Response, body []byte) {
			if strings.Contains(string(body), "logprobs") || e.rec.lastVision().Params.Logprobs {
				t.Errorf("logprobs in %s", body)
			}
		}},
	{name: "detail low", body: withDetail(bundleVL, "low", nil), status: 200,
		check: func(t *testing.T, e *testEnv, _ *http.Response, body []byte) {
			want := core.PixelBudget{Detail: "low", MinPixels: 3136, MaxPixels: 200704}
			if b := e.rec.lastVision().Params.Budget; b == nil || *b != want {
				t.Errorf("task budget %+v, want %+v", b, want)
			}
			if b := budgetOf(t, body); b != (openai.IrisBudget{Detail: "low", MinPixels: 3136, MaxPixels: 200704}) {
				t.Errorf("iris budget %+v", b)
			}
		}},
	{name: "detail high", body: withDetail(bundleVL, "high", nil), status: 200,
		check: func(t *testing.T, _ *testEnv, _ *http.Response, body []byte) {
			if b := budgetOf(t, body); b != (openai.IrisBudget{Detail: "high", MinPixels: 3136, MaxPixels: 12845056}) {
				t.Errorf("iris budget %+v", b)
			}
		}},
	{name: "detail auto is the bundle's default", body: withDetail(bundleVL, "auto", nil), status: 200,
		check: func(t *testing.T, e *testEnv, _ *http.Response, body []byte) {
			if b := budgetOf(t, body); b != (openai.IrisBudget{Detail: "auto", MinPixels: 3136, MaxPixels: 12845056}) {
				t.Errorf("iris budget %+v", b)
			}
			if b := e.rec.lastVision().Params.Budget; b == nil || !b.Default {
				t.Errorf("task budget %+v is not the default", b)
			}
		}},
	{name: "min_pixels and max_pixels", body: vl(map[string]any{"min_pixels": 50000, "max_pixels": 100000}), status: 200,
		check: func(t *testing.T, _ *testEnv, _ *http.Response, body []byte) {
			if b := budgetOf(t, body); b != (openai.IrisBudget{Detail: "auto", MinPixels: 50000, MaxPixels: 100000}) {
				t.Errorf("iris budget %+v", b)
			}
		}},
	{name: "max_pixels clamped to the bundle's bounds", body: withDetail(bundleVL, "low", map[string]any{"max_pixels": int64(1) << 40}), status: 200,
		check: func(t *testing.T, _ *testEnv, _ *http.Response, body []byte) {
			if b := budgetOf(t, body); b != (openai.IrisBudget{Detail: "low", MinPixels: 3136, MaxPixels: 12845056}) {
				t.Errorf("iris budget %+v", b)
			}
		}},
	{name: "min_pixels clamped to the bundle's bounds", body: vl(map[string]any{"min_pixels": 1, "max_pixels": 2}), status: 200,
		check: func(t *testing.T, _ *testEnv, _ *http.Response, body []byte) {
			if b := budgetOf(t, body); b != (openai.IrisBudget{Detail: "auto", MinPixels: 3136, MaxPixels: 3136}) {
				t.Errorf("iris budget %+v", b)
			}
		}},
	{name: "detail auto on a bundle without budgets", body: withDetail(bundleStrict, "auto", nil), status: 200,
		check: func(t *testing.T, _ *testEnv, _ *http.Response, body []byte) {
			if cc := completionOf(t, body); cc.Iris.Image.Budget != nil {
				t.Errorf("budget %+v from a bundle without budgets", cc.Iris.Image.Budget)
			}
		}},
	{name: "max_completion_tokens", body: vl(map[string]any{"max_completion_tokens": 2}), status: 200,
		check: func(t *testing.T, e *testEnv, _ *http.Response, _ []byte) {
			if p := e.rec.lastVision().Params; p.MaxTokens != 2 {
				t.Errorf("max tokens %d", p.MaxTokens)
			}
		}},
	{name: "bundle defaults apply", body: vl(nil), status: 200, check: func(t *testing.T, e *testEnv, _ *http.Response, _ []byte) {
		if p := e.rec.lastVision().Params; p.MaxTokens != 64 {
			t.Errorf("default max tokens %d, the bundle says 64", p.MaxTokens)
		}
	}},
	{name: "aiperf extras ignored", body: vl(map[string]any{"min_tokens": 4, "stream": false, "stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true},
		"user": "u", "metadata": map[string]any{"k": "v"}, "n": 1, "stop": nil, "logprobs": false, "top_logprobs": 0}), status: 200},
	{name: "request ids echoed", body: vl(nil), header: http.Header{"X-Request-Id": {"req-123"}, "X-Correlation-Id": {"corr-9"}}, status: 200,
		check: func(t *testing.T, e *testEnv, resp *http.Response, body []byte) {
			if resp.Header.Get("X-Request-ID") != "req-123" || resp.Header.Get("X-Correlation-ID") != "corr-9" {
				t.Errorf("headers %v", resp.Header)
			}
			if completionOf(t, body).ID != "chatcmpl-req-123" || e.rec.lastVision().RequestID != "req-123" {
				t.Error("the request id did not reach the completion and the task")
			}
		}},
	{name: "invalid request id replaced", body: vl(nil), header: http.Header{"X-Request-Id": {"has space"}, "X-Correlation-Id": {strings.Repeat("c", 200)}}, status: 200,
		check: func(t *testing.T, _ *testEnv, resp *http.Response, _ []byte) {
			if id := resp.Header.Get("X-Request-ID"); !uuidRe.MatchString(id) {
				t.Errorf("request id %q", id)
			}
			if resp.Header.Get("X-Correlation-ID") != "" {
				t.Error("an over-long correlation id was echoed")
			}
		}},

	// Malformed bodies and unsupported shapes: refused by the gateway.
	{name: "malformed json", body: `{"model":`, status: 400, code: "invalid_json"},
	{name: "empty body", body: ``, status: 400, code: "invalid_json"},
	{name: "max_tokens as a string", body: vl(map[string]any{"max_tokens": "10"}), status: 400, code: "invalid_type", param: "max_tokens"},
	{name: "temperature as a string", body: vl(map[string]any{"temperature": "0"}), status: 400, code: "invalid_type", param: "temperature"},
	{name: "missing model", body: `{"messages":[{"role":"user","content":"hi"}]}`, status: 400, code: "missing_parameter", param: "model"},
	{name: "two messages", body: withMessages(map[string]any{"role": "user", "content": "a"}, map[string]any{"role": "user", "content": "b"}),
		status: 400, code: "unsupported_message_count", param: "messages"},
	{name: "system then assistant", body: withMessages(map[string]any{"role": "system", "content": "x"}, map[string]any{"role": "assistant", "content": "y"}),
		status: 400, code: "unsupported_role", param: "messages[1].role"},
	{name: "system, user, assistant", body: withMessages(map[string]any{"role": "system", "content": "x"}, map[string]any{"role": "user", "content": okParts}, map[string]any{"role": "assistant", "content": "y"}),
		status: 400, code: "unsupported_message_count", param: "messages"},
	{name: "system content a number", body: withMessages(map[string]any{"role": "system", "content": 3}, map[string]any{"role": "user", "content": okParts}),
		status: 400, code: "invalid_type", param: "messages[0].content"},
	{name: "system content with an image", body: withMessages(map[string]any{"role": "system", "content": []any{imagePart(pngURL)}}, map[string]any{"role": "user", "content": okParts}),
		status: 400, code: "unsupported_content_part", param: "messages[0].content[0].type"},
	{name: "system with NUL", body: withMessages(map[string]any{"role": "system", "content": "a\x00"}, map[string]any{"role": "user", "content": okParts}),
		status: 400, code: "invalid_value", param: "messages[0].content"},
	{name: "two images after a system message", body: withMessages(map[string]any{"role": "system", "content": "x"}, map[string]any{"role": "user", "content": []any{textPart(question), imagePart(pngURL), imagePart(pngURL)}}),
		status: 400, code: "too_many_images", param: "messages[1].content[2]"},
	{name: "detail unknown", body: withDetail(bundleVL, "ultra", nil), status: 400, code: "invalid_value", param: detailParam},
	{name: "detail a number", body: withDetail(bundleVL, 1, nil), status: 400, code: "invalid_type", param: detailParam},
	{name: "min_pixels zero", body: vl(map[string]any{"min_pixels": 0}), status: 400, code: "invalid_value", param: "min_pixels"},
	{name: "max_pixels negative", body: vl(map[string]any{"max_pixels": -5}), status: 400, code: "invalid_value", param: "max_pixels"},
	{name: "max_pixels over 2^40", body: vl(map[string]any{"max_pixels": int64(1)<<40 + 1}), status: 400, code: "invalid_value", param: "max_pixels"},
	{name: "min_pixels over max_pixels", body: vl(map[string]any{"min_pixels": 200000, "max_pixels": 100000}), status: 400, code: "conflicting_parameters", param: "max_pixels"},
	{name: "min_pixels a string", body: vl(map[string]any{"min_pixels": "5000"}), status: 400, code: "invalid_type", param: "min_pixels"},
	{name: "max_pixels a fraction", body: vl(map[string]any{"max_pixels": 5000.5}), status: 400, code: "invalid_type", param: "max_pixels"},
	{name: "detail low on a bundle without budgets", body: withDetail(bundleStrict, "low", nil), status: 400, code: "image_budget_not_supported", param: detailParam},
	{name: "max_pixels on a bundle without budgets", body: chat(bundleStrict, okParts, map[string]any{"max_pixels": 5000}), status: 400, code: "image_budget_not_supported", param: "max_pixels"},
	{name: "system role", body: withMessages(map[string]any{"role": "system", "content": "be brief"}), status: 400, code: "unsupported_role", param: "messages[0].role"},
	{name: "developer role", body: withMessages(map[string]any{"role": "developer", "content": "x"}), status: 400, code: "unsupported_role", param: "messages[0].role"},
	{name: "assistant role", body: withMessages(map[string]any{"role": "assistant", "content": "x"}), status: 400, code: "unsupported_role", param: "messages[0].role"},
	{name: "two images", body: chat(bundleVL, []any{textPart(question), imagePart(pngURL), imagePart(pngURL)}, nil), status: 400, code: "too_many_images", param: "messages[0].content[2]"},
	{name: "no text", body: chat(bundleVL, []any{imagePart(pngURL)}, nil), status: 400, code: "missing_text", param: "messages[0].content"},
	{name: "two text parts", body: chat(bundleVL, []any{textPart("a"), imagePart(pngURL), textPart("b")}, nil), status: 400, code: "too_many_text_parts", param: "messages[0].content[2]"},
	{name: "audio part", body: chat(bundleVL, []any{textPart(question), map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": "AAAA", "format": "wav"}}}, nil),
		status: 400, code: "unsupported_content_part", param: "messages[0].content[1].type"},
	{name: "video part", body: chat(bundleVL, []any{textPart(question), map[string]any{"type": "video_url", "video_url": map[string]any{"url": "x"}}}, nil),
		status: 400, code: "unsupported_content_part", param: "messages[0].content[1].type"},
	{name: "file part", body: chat(bundleVL, []any{textPart(question), map[string]any{"type": "file", "file": map[string]any{"file_id": "f"}}}, nil),
		status: 400, code: "unsupported_content_part", param: "messages[0].content[1].type"},
	{name: "n 2", body: vl(map[string]any{"n": 2}), status: 400, code: "unsupported_parameter", param: "n"},
	{name: "stop over four", body: vl(map[string]any{"stop": []string{"a", "b", "c", "d", "e"}}), status: 400, code: "invalid_value", param: "stop"},
	{name: "stop empty string in array", body: vl(map[string]any{"stop": []string{".", ""}}), status: 400, code: "invalid_value", param: "stop[1]"},
	{name: "stop over 256 bytes", body: vl(map[string]any{"stop": strings.Repeat("x", 257)}), status: 400, code: "invalid_value", param: "stop[0]"},
	{name: "stop a number", body: vl(map[string]any{"stop": 1}), status: 400, code: "invalid_type", param: "stop"},
	{name: "stop item a number", body: vl(map[string]any{"stop": []any{".", 2}}), status: 400, code: "invalid_type", param: "stop[1]"},
	{name: "tools", body: vl(map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}}), status: 400, code: "unsupported_parameter", param: "tools"},
	{name: "tool_choice", body: vl(map[string]any{"tool_choice": "auto"}), status: 400, code: "unsupported_parameter", param: "tool_choice"},
	{name: "functions", body: vl(map[string]any{"functions": []any{map[string]any{"name": "f"}}}), status: 400, code: "unsupported_parameter", param: "functions"},
	{name: "response_format", body: vl(map[string]any{"response_format": map[string]any{"type": "json_object"}}), status: 400, code: "unsupported_parameter", param: "response_format"},
	{name: "logprobs a string", body: vl(map[string]any{"logprobs": "yes"}), status: 400, code: "invalid_type", param: "logprobs"},
	{name: "top_logprobs over 20", body: vl(map[string]any{"logprobs": true, "top_logprobs": 21}), status: 400, code: "invalid_value", param: "top_logprobs"},
	{name: "top_logprobs negative", body: vl(map[string]any{"logprobs": true, "top_logprobs": -1}), status: 400, code: "invalid_value", param: "top_logprobs"},
	{name: "top_logprobs without logprobs", body: vl(map[string]any{"top_logprobs": 2}), status: 400, code: "invalid_value", param: "top_logprobs"},
	{name: "top_logprobs a fraction", body: vl(map[string]any{"logprobs": true, "top_logprobs": 1.5}), status: 400, code: "invalid_type", param: "top_logprobs"},
	{name: "top_logprobs a string", body: vl(map[string]any{"logprobs": true, "top_logprobs": "2"}), status: 400, code: "invalid_type", param: "top_logprobs"},
	{name: "reasoning_effort", body: vl(map[string]any{"reasoning_effort": "high"}), status: 400, code: "unsupported_parameter", param: "reasoning_effort"},
	{name: "chat_template_kwargs", body: vl(map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": true}}), status: 400, code: "unsupported_parameter", param: "chat_template_kwargs"},
	{name: "enable_thinking", body: vl(map[string]any{"enable_thinking": false}), status: 400, code: "unsupported_parameter", param: "enable_thinking"},
	{name: "thinking", body: vl(map[string]any{"thinking": map[string]any{"type": "enabled"}}), status: 400, code: "unsupported_parameter", param: "thinking"},
	{name: "max_tokens zero", body: vl(map[string]any{"max_tokens": 0}), status: 400, code: "invalid_value", param: "max_tokens"},
	{name: "max_tokens negative", body: vl(map[string]any{"max_tokens": -1}), status: 400, code: "invalid_value", param: "max_tokens"},
	{name: "max tokens disagree", body: vl(map[string]any{"max_tokens": 4, "max_completion_tokens": 5}), status: 400, code: "conflicting_parameters", param: "max_completion_tokens"},
	{name: "temperature negative", body: vl(map[string]any{"temperature": -0.5}), status: 400, code: "invalid_value", param: "temperature"},
	{name: "top_k negative", body: vl(map[string]any{"top_k": -1}), status: 400, code: "invalid_value", param: "top_k"},
	{name: "top_p zero", body: vl(map[string]any{"top_p": 0}), status: 400, code: "invalid_value", param: "top_p"},
	{name: "top_p over one", body: vl(map[string]any{"top_p": 1.5}), status: 400, code: "invalid_value", param: "top_p"},
	{name: "NUL in the question", body: chat(bundleVL, []any{textPart("a\x00b"), imagePart(pngURL)}, nil), status: 400, code: "invalid_value", param: "messages[0].content[0].text"},
	{name: "malformed base64", body: withImage("data:image/png;base64,iVBO%%%"), status: 400, code: "invalid_image_url", param: imageParam},
	{name: "gif media type", body: withImage(dataURL("image/gif", []byte("GIF89a"))), status: 400, code: "unsupported_image_format", param: imageParam},
	{name: "not a data url", body: withImage("iVBORw0KGgo="), status: 400, code: "invalid_image_url", param: imageParam},
	{name: "empty image", body: withImage("data:image/png;base64,"), status: 400, code: "image_empty", param: imageParam},
	{name: "remote url while disabled", body: withImage("https://images.example.com/cat.png"), status: 400, code: "image_url_not_allowed", param: imageParam},
	{name: "file url", body: withImage("file:///etc/hosts"), status: 400, code: "image_url_not_allowed", param: imageParam},

	// Refused by the runtime, mapped by the gateway.
	{name: "unknown model", body: chat("no-such-model", okParts, nil), status: 404, code: "model_not_found", param: "model"},
	{name: "max_tokens over the context", body: vl(map[string]any{"max_tokens": 5000}), status: 400, code: "context_length_exceeded", param: "max_tokens"},
	{name: "max_completion_tokens over the context", body: vl(map[string]any{"max_completion_tokens": 4096}), status: 400, code: "context_length_exceeded", param: "max_completion_tokens"},
	{name: "image to a text-only bundle", body: chat(bundleText, okParts, nil), status: 400, code: "task_not_supported", param: "messages"},
	{name: "text-only to a vision-only bundle", body: chat(bundleVL, question, nil), status: 400, code: "task_not_supported", param: "messages"},
	{name: "30000x30000 png bomb", body: withImage(dataURL("image/png", pngBomb(30000, 30000))), status: 400, alsoStatus: 413, code: "image_too_large", param: imageParam},
	{name: "truncated png", body: withImage(dataURL("image/png", png64x48[:len(png64x48)/2])), status: 400, code: "image_corrupt", param: imageParam, startsTask: true},
	{name: "truncated png, streamed", body: chat(bundleVL, []any{textPart(question), imagePart(dataURL("image/png", png64x48[:len(png64x48)/2]))}, map[string]any{"stream": true}),
		status: 400, code: "image_corrupt", param: imageParam, startsTask: true},
	{name: "not an image", body: withImage(dataURL("image/png", []byte("this is not a png at all"))), status: 400, code: "unsupported_image_format", param: imageParam},
	{name: "image over the bundle's max_bytes", body: chat(bundleStrict, []any{textPart(question), imagePart(dataURL("image/png", noisyPNG(64, 64)))}, nil),
		status: 400, alsoStatus: 413, code: "image_too_large", param: imageParam},
	{name: "image under the bundle's min_side", body: chat(bundleStrict, []any{textPart(question), imagePart(dataURL("image/png", pngBytes(8, 8)))}, nil),
		status: 400, code: "image_too_small", param: imageParam},
	{name: "task failure before start", body: chat(bundleVL, []any{textPart(doFailBefore), imagePart(pngURL)}, nil), status: 500, code: "plugin_trap",
		check: func(t *testing.T, _ *testEnv, _ *http.Response, body []byte) {
			if strings.Contains(string(body), "0xdead") {
				t.Errorf("internal detail reached the client: %s", body)
			}
		}},
	{name: "panic in the task", body: chat(bundleVL, []any{textPart(doPanic), imagePart(pngURL)}, nil), status: 500, code: "task_panic",
		check: func(t *testing.T, e *testEnv, resp *http.Response, _ []byte) {
			if resp := e.do(t, "POST", chatPath, vl(nil), nil); resp.StatusCode != 200 {
				t.Errorf("the next request got %d", resp.StatusCode)
			}
			id := resp.Header.Get("X-Request-ID")
			if !regexp.MustCompile(`"msg":"task panicked".*"request_id":"` + id + `"`).MatchString(e.logs.String()) {
				t.Errorf("the panic was not logged with its request id %s", id)
			}
		}},
	{name: "stream refused before start is plain JSON", body: chat("no-such-model", okParts, map[string]any{"stream": true}), status: 404, code: "model_not_found", param: "model",
		check: func(t *testing.T, _ *testEnv, resp *http.Response, _ []byte) {
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("content type %q", ct)
			}
		}},

	// Other routes.
	{name: "GET on chat", method: "GET", status: 405, code: "method_not_allowed"},
	{name: "unknown route", path: "/v1/completions", status: 404, code: "not_found"},
	{name: "models", method: "GET", path: "/v1/models", status: 200, check: func(t *testing.T, e *testEnv, _ *http.Response, body []byte) {
		var list openai.ModelList
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		if list.Object != "list" || len(list.Data) != 4 || list.Data[0].ID != bundleVL || list.Data[1].Iris.Tasks[0] != string(core.TaskText) {
			t.Errorf("models %s", body)
		}
	}},
	{name: "one model", method: "GET", path: "/v1/models/" + bundleVL, status: 200, check: func(t *testing.T, e *testEnv, _ *http.Response, body []byte) {
		var m openai.Model
		info, _ := e.rt.Model(bundleVL)
		if err := json.Unmarshal(body, &m); err != nil || m.ID != bundleVL || m.Iris.Digest != info.Digest || m.Iris.ContextLength != 4096 {
			t.Errorf("model %s (%v)", body, err)
		}
	}},
	{name: "unknown model info", method: "GET", path: "/v1/models/nope", status: 404, code: "model_not_found", param: "model"},
	{name: "healthz", method: "GET", path: "/healthz", status: 200},
	{name: "readyz", method: "GET", path: "/readyz", status: 200},
}

// TestContract runs every rule of the HTTP contract against the real router and the real
// runtime, with fake tasks.
func TestContract(t *testing.T) {
	if len(contractCases) < 40 {
		t.Fatalf("only %d contract cases", len(contractCases))
	}
	e := newEnv(t)
	for _, tt := range contractCases {
		t.Run(tt.name, func(t *testing.T) {
			method, path := tt.method, tt.path
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = chatPath
			}
			before := e.rec.visionCalls()
			resp := e.do(t, method, path, tt.body, tt.header)
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status && (tt.alsoStatus == 0 || resp.StatusCode != tt.alsoStatus) {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if resp.Header.Get("X-Request-ID") == "" {
				t.Error("no X-Request-ID")
			}
			if tt.status >= 400 {
				checkError(t, body, tt.code, tt.param)
				if tt.status < 500 && !tt.startsTask && e.rec.visionCalls() != before {
					t.Error("a refused request reached the vision task")
				}
			}
			if tt.check != nil {
				tt.check(t, e, resp, body)
			}
		})
	}
}

func checkError(t *testing.T, body []byte, code, param string) {
	t.Helper()
	var raw map[string]map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	e := raw["error"]
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error body lacks %q: %s", k, body)
		}
	}
	if e["code"] != code {
		t.Errorf("code %v, want %s (%s)", e["code"], code, body)
	}
	wantParam := any(nil)
	if param != "" {
		wantParam = param
	}
	if e["param"] != wantParam {
		t.Errorf("param %v, want %v", e["param"], wantParam)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Error("empty message")
	}
}
