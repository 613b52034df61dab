package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iris-vlm/iris/benchmark/sse"
	"github.com/iris-vlm/iris/gateway/openai"
	"github.com/iris-vlm/iris/internal/poll"
)

var update = flag.Bool("update", false, "rewrite golden files")

var streamOn = map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}}

// sseTranscriptCases are streamed byte for byte into testdata/<name>.sse.golden.
var sseTranscriptCases = []struct {
	name string
	body string
}{
	{"image_usage", chat(bundleVL, okParts, streamOn)},
	{"image_first_no_usage", chat(bundleVL, []any{imagePart(pngURL), textPart("Name the colours.")}, map[string]any{"stream": true, "max_tokens": 4})},
	{"text_only", chat(bundleText, "Hello <there> & welcome", streamOn)},
	{"error_after_start", chat(bundleVL, []any{textPart(doFailAfter), imagePart(pngURL)}, streamOn)},
	{"no_start_event", chat(bundleVL, []any{textPart(doStartSilent), imagePart(pngURL)}, streamOn)},
	{"logprobs", chat(bundleVL, okParts, map[string]any{"stream": true, "max_tokens": 3, "logprobs": true, "top_logprobs": 2})},
}

// measured matches the timings only the runtime measures; everything else in a transcript is
// deterministic (the fake's own stages report fixed durations, the clock is fixed).
var measured = regexp.MustCompile(`"(queue|decode_image)":[0-9.e+-]+`)

func TestStreamGolden(t *testing.T) {
	e := newEnv(t)
	for _, tt := range sseTranscriptCases {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.do(t, "POST", chatPath, tt.body, http.Header{"X-Request-Id": {"req-" + tt.name}})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("content type %q", ct)
			}
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			got := measured.ReplaceAllString(string(raw), `"$1":MEASURED`)
			for _, m := range e.rt.Models() {
				got = strings.ReplaceAll(got, m.Digest, "DIGEST_OF_"+m.Name)
			}
			path := filepath.Join("testdata", tt.name+".sse.golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("golden transcript missing (go test -run TestStreamGolden -update): %v", err)
			}
			if got != string(want) {
				t.Fatalf("transcript differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
			}
		})
	}
}

// TestStreamGoldenTranscripts reads each committed transcript with the SSE reader of Iris's
// clients (benchmark/sse) and checks it against the answer the fake task gives (fixture_test.go:
// "A <w>x<h> <format> image. You asked: <question>", or "You said: <question>", a token a
// word), computed here and not by the server: the text the deltas make, one finish reason, the
// usage, the error event, the log-probabilities, the OpenAI chunk framing and the closing
// [DONE]. The golden comparison above catches any change; this catches a golden that is wrong.
func TestStreamGoldenTranscripts(t *testing.T) {
	words := func(s string) []string { return strings.SplitAfter(s, " ") }
	vlAnswer := func(q string) string { return "A 64x48 png image. You asked: " + q }
	const imageTokens = 3 * 2 // 64x48 in 28-pixel cells
	for _, tc := range []struct {
		name, model string
		text        string // the answer the deltas make
		finish      string // "" when the stream ends in an error event
		prompt      int    // usage.prompt_tokens; -1: no usage chunk
		errCode     string
		logprobs    bool
	}{
		{"image_usage", bundleVL, vlAnswer(question), "stop", 10 + len(strings.Fields(question)) + imageTokens, "", false},
		{"image_first_no_usage", bundleVL, strings.Join(words(vlAnswer("Name the colours."))[:4], ""), "length", -1, "", false},
		{"text_only", bundleText, "You said: Hello <there> & welcome", "stop", 10 + 4, "", false},
		{"error_after_start", bundleVL, "Partial", "", -1, "engine_failed", false},
		{"no_start_event", bundleVL, vlAnswer(doStartSilent), "stop", 10 + 1 + imageTokens, "", false},
		{"logprobs", bundleVL, strings.Join(words(vlAnswer(question))[:3], ""), "length", -1, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tc.name+".sse.golden"))
			if err != nil {
				t.Fatal(err)
			}
			// the timings only the runtime measures are masked in the golden: any number will do
			r := sse.NewReader(strings.NewReader(strings.ReplaceAll(string(raw), "MEASURED", "0")))
			var (
				text            strings.Builder
				deltas          int
				finishes        []string
				usage           *usageJSON
				errCode         string
				done, afterDone bool
			)
			for i := 0; ; i++ {
				msg, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				event, data := sse.Data(msg)
				switch {
				case done:
					afterDone = true
				case data == "[DONE]":
					done = true
					continue
				case event == "error":
					var e struct {
						Error struct{ Code string } `json:"error"`
					}
					if err := json.Unmarshal([]byte(data), &e); err != nil {
						t.Fatalf("message %d: error event %q: %v", i, data, err)
					}
					errCode = e.Error.Code
					continue
				case event != "":
					t.Fatalf("message %d: event %q", i, event)
				}
				var c struct {
					ID, Object, Model string
					Choices           []struct {
						Delta struct {
							Role    string
							Content *string
						}
						Logprobs *struct {
							Content []struct {
								Token   string
								Logprob float64
							}
						}
						FinishReason *string `json:"finish_reason"`
					}
					Usage *usageJSON
				}
				if err := json.Unmarshal([]byte(data), &c); err != nil {
					t.Fatalf("message %d: %q: %v", i, data, err)
				}
				if c.ID != "chatcmpl-req-"+tc.name || c.Object != "chat.completion.chunk" || c.Model != tc.model {
					t.Errorf("message %d: id %q, object %q, model %q", i, c.ID, c.Object, c.Model)
				}
				if i == 0 {
					if len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant" || c.Choices[0].Delta.Content == nil || *c.Choices[0].Delta.Content != "" {
						t.Errorf("the first chunk is not the assistant's empty role chunk: %s", data)
					}
					continue
				}
				if c.Usage != nil {
					usage = c.Usage
				}
				for _, ch := range c.Choices {
					if ch.FinishReason != nil {
						finishes = append(finishes, *ch.FinishReason)
					}
					if ch.Delta.Content == nil {
						continue
					}
					tok := *ch.Delta.Content
					if tc.logprobs {
						if lp := ch.Logprobs; lp == nil || len(lp.Content) != 1 || lp.Content[0].Token != tok ||
							math.Abs(lp.Content[0].Logprob+float64(deltas+1)/10) > 1e-6 {
							t.Errorf("delta %d (%q): logprobs %+v, want the token at %v", deltas, tok, ch.Logprobs, -float64(deltas+1)/10)
						}
					}
					text.WriteString(tok)
					deltas++
				}
			}
			if !done || afterDone {
				t.Errorf("the stream ends with [DONE]: %v; a message after it: %v", done, afterDone)
			}
			if text.String() != tc.text {
				t.Errorf("the deltas make %q, want %q", text.String(), tc.text)
			}
			if want := len(strings.Fields(tc.text)); deltas != want {
				t.Errorf("%d deltas, want a word each: %d", deltas, want)
			}
			switch {
			case tc.finish == "" && len(finishes) != 0:
				t.Errorf("finish reasons %q in a stream that ends in an error", finishes)
			case tc.finish != "" && (len(finishes) != 1 || finishes[0] != tc.finish):
				t.Errorf("finish reasons %q, want one %q", finishes, tc.finish)
			}
			if errCode != tc.errCode {
				t.Errorf("error event code %q, want %q", errCode, tc.errCode)
			}
			switch {
			case tc.prompt < 0 && usage != nil:
				t.Errorf("a usage chunk %+v, want none", usage)
			case tc.prompt >= 0 && usage == nil:
				t.Error("no usage chunk")
			case tc.prompt >= 0 && (usage.PromptTokens != tc.prompt || usage.CompletionTokens != deltas ||
				usage.TotalTokens != usage.PromptTokens+usage.CompletionTokens):
				t.Errorf("usage %+v, want %d prompt tokens and a completion token a delta (%d)", usage, tc.prompt, deltas)
			}
		})
	}
}

// usageJSON is OpenAI's usage object as a client reads it.
type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	event string
	data  string
}

func parseSSE(t *testing.T, raw string) []sseEvent {
	t.Helper()
	if !strings.HasSuffix(raw, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", raw)
	}
	var out []sseEvent
	for _, block := range strings.Split(strings.TrimSuffix(raw, "\n\n"), "\n\n") {
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			default:
				t.Fatalf("unexpected SSE line %q", line)
			}
		}
		out = append(out, ev)
	}
	return out
}

// TestStreamMatchesCompletion checks that a streamed answer carries exactly the text, finish
// reason, usage and iris object of the same request answered in one piece, in OpenAI's chunk
// order: role chunk, content deltas, finish chunk, usage chunk, [DONE].
func TestStreamMatchesCompletion(t *testing.T) {
	e := newEnv(t)
	bodies := map[string][2]string{
		"image": {chat(bundleVL, okParts, nil), chat(bundleVL, okParts, streamOn)},
		"limited": {chat(bundleVL, okParts, map[string]any{"max_tokens": 3}),
			chat(bundleVL, okParts, map[string]any{"max_tokens": 3, "stream": true, "stream_options": map[string]any{"include_usage": true}})},
		"text": {chat(bundleText, "Say hi", nil), chat(bundleText, "Say hi", streamOn)},
		"logprobs": {chat(bundleVL, okParts, map[string]any{"logprobs": true, "top_logprobs": 2}),
			chat(bundleVL, okParts, map[string]any{"logprobs": true, "top_logprobs": 2, "stream": true, "stream_options": map[string]any{"include_usage": true}})},
	}
	for name, b := range bodies {
		t.Run(name, func(t *testing.T) {
			plain := e.do(t, "POST", chatPath, b[0], nil)
			pb, _ := io.ReadAll(plain.Body)
			want := completionOf(t, pb)

			streamed := e.do(t, "POST", chatPath, b[1], nil)
			sb, _ := io.ReadAll(streamed.Body)
			events := parseSSE(t, string(sb))
			if n := len(events); n < 4 || events[n-1].data != "[DONE]" {
				t.Fatalf("stream %s", sb)
			}
			var chunks []openai.ChatCompletionChunk
			for _, ev := range events[:len(events)-1] {
				var c openai.ChatCompletionChunk
				if err := json.Unmarshal([]byte(ev.data), &c); err != nil || c.Object != "chat.completion.chunk" {
					t.Fatalf("chunk %q: %v", ev.data, err)
				}
				chunks = append(chunks, c)
			}
			first, finish, usage := chunks[0], chunks[len(chunks)-2], chunks[len(chunks)-1]
			if first.Choices[0].Delta.Role != "assistant" || first.Choices[0].FinishReason != nil {
				t.Errorf("first chunk %+v", first)
			}
			var (
				text     strings.Builder
				logprobs []openai.TokenLogprob
			)
			for _, c := range chunks[1 : len(chunks)-2] {
				if len(c.Choices) != 1 || c.Choices[0].Delta.Content == nil || *c.Choices[0].Delta.Content == "" || c.Choices[0].FinishReason != nil {
					t.Fatalf("content chunk %+v", c)
				}
				text.WriteString(*c.Choices[0].Delta.Content)
				if lp := c.Choices[0].Logprobs; lp != nil {
					logprobs = append(logprobs, lp.Content...)
				}
			}
			if text.String() != want.Choices[0].Message.Content {
				t.Errorf("streamed text %q, answer %q", text.String(), want.Choices[0].Message.Content)
			}
			if wl := want.Choices[0].Logprobs; (wl == nil) != (logprobs == nil) || (wl != nil && !reflect.DeepEqual(logprobs, wl.Content)) {
				t.Errorf("streamed logprobs %+v, answer %+v", logprobs, wl)
			}
			if strings.Contains(name, "logprobs") && len(logprobs) != want.Usage.CompletionTokens {
				t.Errorf("%d streamed entries for %d tokens", len(logprobs), want.Usage.CompletionTokens)
			}
			if fr := finish.Choices[0].FinishReason; fr == nil || *fr != want.Choices[0].FinishReason {
				t.Errorf("finish chunk %+v, answer finished %q", finish.Choices[0], want.Choices[0].FinishReason)
			}
			if finish.Iris == nil || !reflect.DeepEqual(finish.Iris.Image, want.Iris.Image) || finish.Iris.Bundle != want.Iris.Bundle {
				t.Errorf("finish chunk iris %+v, answer iris %+v", finish.Iris, want.Iris)
			}
			if len(usage.Choices) != 0 || usage.Usage == nil || *usage.Usage.PromptTokensDetails != *want.Usage.PromptTokensDetails ||
				usage.Usage.PromptTokens != want.Usage.PromptTokens || usage.Usage.CompletionTokens != want.Usage.CompletionTokens {
				t.Errorf("usage chunk %+v, answer usage %+v", usage, want.Usage)
			}
			if !strings.Contains(string(sb), `"choices":[]`) {
				t.Error("the usage chunk does not carry an empty choices array")
			}
		})
	}
}

// TestDisconnectCancelsTask checks that a client that goes away cancels the task's context,
// streaming or not, and that the model's slot is freed.
func TestDisconnectCancelsTask(t *testing.T) {
	e := newEnv(t)
	ts := httptest.NewServer(e.srv.Handler())
	t.Cleanup(ts.Close)
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "plain"}[stream]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			body := chat(bundleSlow, []any{textPart(doBlock), imagePart(pngURL)}, map[string]any{"stream": stream})
			req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+chatPath, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			id := "req-disconnect-" + name
			req.Header.Set("X-Request-ID", id)
			if stream {
				resp, err := ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				// The role chunk arrives before any answer text: the stream has started.
				line, err := bufio.NewReader(resp.Body).ReadString('\n')
				if err != nil || !strings.Contains(line, `"role":"assistant"`) {
					t.Fatalf("first line %q: %v", line, err)
				}
				cancel()
				_ = resp.Body.Close()
			} else {
				go func() {
					// Hang up once this request reached the task.
					for got := range e.rec.blocking {
						if got == id {
							break
						}
					}
					cancel()
				}()
				if resp, err := ts.Client().Do(req); err == nil {
					_ = resp.Body.Close()
					t.Fatalf("the request finished with %d", resp.StatusCode)
				}
			}
			select {
			case got := <-e.rec.canceled:
				if got != id {
					t.Fatalf("canceled %s, want %s", got, id)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the task's context was not canceled after the client went away")
			}
			waitFor(t, "the slot to be freed", func() bool { return e.insideOf(bundleSlow) == 0 })
		})
	}
}

func (e *testEnv) insideOf(model string) int {
	for _, s := range e.rt.Stats() {
		if s.Model == model {
			return s.Inside
		}
	}
	return -1
}

// waitFor polls cond for up to 10 s: a liveness bound, not a speed assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, poll.True(cond))
}
