package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/core/coretest"
	"github.com/iris-vlm/iris/gateway/openai"
	"github.com/iris-vlm/iris/gateway/servertest"
)

// realServer serves a fixture bundle through the real runtime: plugin, tokenizer, C engine.
func realServer(t testing.TB, model string) http.Handler {
	t.Helper()
	return serveBundle(t, coretest.Bundle(t, model, 1024))
}

// serveBundle serves the bundle in dir through the real runtime.
func serveBundle(t testing.TB, dir string) http.Handler {
	t.Helper()
	return servertest.New(t, core.Config{Bundles: []string{dir}}).Handler
}

func e2eBody(model string, c coretest.Case, extra map[string]any) string {
	body := map[string]any{
		"model": model,
		"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL("image/png", c.Image)}},
			map[string]any{"type": "text", "text": c.Question},
		}}},
		"max_tokens": len(c.Tokens),
		"ignore_eos": true,
	}
	for k, v := range extra {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	return string(b)
}

func postJSON(t *testing.T, h http.Handler, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", chatPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp := serve(h, req)
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// TestHTTPMatchesReference: the HTTP answer's token ids, text and usage equal the reference's
// greedy tokens for every fixture case, streamed and not; a grounding model's iris.boxes equal
// what the reference's parser reads in its answer, and come with the stream's finish chunk. The
// LocateAnything models constructed to ground (locateanything-box, -point: random weights never
// emit grounding tokens) answer with a labelled box or point on images of several sizes, so the
// boxes are compared in each image's own pixels; swapped sides or the processor's resized size
// give other numbers (core's TestDecodeBoxesGroundedGoldens shows it on the same goldens).
func TestHTTPMatchesReference(t *testing.T) {
	for _, model := range coretest.Models {
		t.Run(model, func(t *testing.T) {
			h := realServer(t, model)
			for _, c := range coretest.Cases(t, model) {
				t.Run(c.Name, func(t *testing.T) {
					ids := map[string]any{"return_token_ids": true}
					resp, raw := postJSON(t, h, e2eBody(model, c, ids))
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("status %d: %s", resp.StatusCode, raw)
					}
					var cc openai.ChatCompletion
					if err := json.Unmarshal(raw, &cc); err != nil {
						t.Fatal(err)
					}
					if got := cc.Choices[0].Message.Content; got != c.Text {
						t.Fatalf("answer %q, transformers %q", got, c.Text)
					}
					if cc.Usage.CompletionTokens != len(c.Tokens) || cc.Usage.PromptTokens != c.PromptTokens {
						t.Fatalf("usage %+v, want prompt %d completion %d", cc.Usage, c.PromptTokens, len(c.Tokens))
					}
					if !slices.Equal(cc.Choices[0].TokenIDs, c.Tokens) {
						t.Fatalf("token_ids %v, the reference's %v", cc.Choices[0].TokenIDs, c.Tokens)
					}
					if err := sameBoxes(cc.Iris, c.Boxes); err != nil {
						t.Fatal(err)
					}
					resp, raw = postJSON(t, h, e2eBody(model, c, map[string]any{"stream": true, "return_token_ids": true}))
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("stream status %d: %s", resp.StatusCode, raw)
					}
					var (
						streamed    strings.Builder
						streamedIDs []int32
						finished    bool
					)
					for _, ev := range parseSSE(t, string(raw)) {
						if ev.data == "[DONE]" {
							continue
						}
						var chunk openai.ChatCompletionChunk
						if err := json.Unmarshal([]byte(ev.data), &chunk); err != nil {
							t.Fatalf("chunk %q: %v", ev.data, err)
						}
						fin := slices.ContainsFunc(chunk.Choices, func(ch openai.ChunkChoice) bool { return ch.FinishReason != nil })
						if chunk.Iris != nil != fin {
							t.Fatalf("chunk with finish %v has iris %v: the iris object comes with the finish chunk", fin, chunk.Iris)
						}
						if fin { // the finish chunk
							finished = true
							if err := sameBoxes(chunk.Iris, c.Boxes); err != nil {
								t.Fatalf("stream: %v", err)
							}
						}
						for _, ch := range chunk.Choices {
							if ch.Delta.Content != nil {
								streamed.WriteString(*ch.Delta.Content)
							}
							streamedIDs = append(streamedIDs, ch.TokenIDs...)
						}
					}
					if !finished || streamed.String() != c.Text || !slices.Equal(streamedIDs, c.Tokens) {
						t.Fatalf("streamed %q %v (finish chunk %v), the reference's %q %v", streamed.String(), streamedIDs, finished, c.Text, c.Tokens)
					}
				})
			}
		})
	}
}

// sameBoxes compares an answer's iris.boxes with the reference's (nil: a model that does not
// ground, whose answers carry no boxes key).
func sameBoxes(iris *openai.Iris, want []coretest.Box) error {
	if iris == nil {
		return fmt.Errorf("no iris object")
	}
	if (iris.Boxes == nil) != (want == nil) || len(iris.Boxes) != len(want) {
		return fmt.Errorf("iris.boxes %+v, the reference's parser reads %+v", iris.Boxes, want)
	}
	for i, b := range iris.Boxes {
		w := want[i]
		if b.Label != w.Label || !slices.Equal(b.Box, w.Box) || !slices.Equal(b.Point, w.Point) {
			return fmt.Errorf("iris.boxes[%d] %+v, the reference's parser reads %+v", i, b, w)
		}
	}
	return nil
}

// TestHTTPBoundsBeforeKernels: an over-long request is a 400 before any kernel runs; the next
// valid request works.
func TestHTTPBoundsBeforeKernels(t *testing.T) {
	h := realServer(t, "tiny-untied")
	c := coretest.Cases(t, "tiny-untied")[0]
	resp, raw := postJSON(t, h, e2eBody("tiny-untied", c, map[string]any{"max_tokens": 1000}))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "context_length_exceeded") {
		t.Fatalf("over-long request: %d %s", resp.StatusCode, raw)
	}
	resp, raw = postJSON(t, h, e2eBody("tiny-untied", c, nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("next request: %d %s", resp.StatusCode, raw)
	}
}
