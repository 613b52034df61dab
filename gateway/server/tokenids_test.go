package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/coretest"
	"github.com/iris-vlm/iris/gateway/openai"
)

// TestReturnTokenIDs: with return_token_ids the real engine's prompt ids and generated ids come
// back, streamed and not: the prompt is transformers' input_ids, the answer its greedy tokens
// plus the stop token that ended it, and the answer's ids decode to the content.
func TestReturnTokenIDs(t *testing.T) {
	cases := []struct {
		name  string
		model string
		// stopToken: the bundle stops on a token of the greedy answer, so the model ends on a
		// stop token (random weights never sample the real end of turn).
		stopToken bool
		extra     map[string]any
	}{
		{name: "qwen2.5 untied, length", model: "tiny-untied"},
		{name: "qwen2.5 tied, length", model: "tiny-tied"},
		{name: "qwen3, length", model: coretest.Qwen3},
		{name: "internvl, length", model: coretest.InternVL},
		{name: "stop token", model: "tiny-untied", stopToken: true, extra: map[string]any{"ignore_eos": false}},
		{name: "stop token, logprobs", model: "tiny-untied", stopToken: true, extra: map[string]any{"ignore_eos": false, "logprobs": true}},
	}
	servers := map[string]http.Handler{} // by bundle: a server loads its engine once
	parent := t
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := coretest.Cases(t, tc.model)[0]
			answer, stop := c.Tokens, int32(-1)
			key := tc.model
			if tc.stopToken {
				k := firstNew(c.Tokens, 2)
				if k < 0 {
					t.Fatalf("no token of %v to stop on", c.Tokens)
				}
				answer, stop = c.Tokens[:k], c.Tokens[k]
				key += "+stop"
			}
			h, ok := servers[key]
			if !ok {
				// the parent's: the server outlives this subtest
				dir := coretest.Bundle(parent, tc.model, 1024)
				if tc.stopToken {
					setStopIDs(t, dir, []int32{stop})
				}
				h = serveBundle(parent, dir)
				servers[key] = h
			}
			want := answer
			if stop >= 0 {
				want = append(slices.Clone(answer), stop)
			}
			extra := map[string]any{"return_token_ids": true}
			for k, v := range tc.extra {
				extra[k] = v
			}

			resp, raw := postJSON(t, h, e2eBody(tc.model, c, extra))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			var cc openai.ChatCompletion
			if err := json.Unmarshal(raw, &cc); err != nil {
				t.Fatal(err)
			}
			ch := cc.Choices[0]
			if len(cc.PromptTokenIDs) != cc.Usage.PromptTokens || len(cc.PromptTokenIDs) != c.PromptTokens {
				t.Errorf("%d prompt ids, usage %d, transformers %d", len(cc.PromptTokenIDs), cc.Usage.PromptTokens, c.PromptTokens)
			}
			if c.PromptIDs != nil && !slices.Equal(cc.PromptTokenIDs, c.PromptIDs) {
				t.Errorf("prompt ids differ from transformers' input_ids")
			}
			if !slices.Equal(ch.TokenIDs, want) {
				t.Fatalf("token_ids %v, want %v", ch.TokenIDs, want)
			}
			// completion_tokens counts the answer; the stop token is one more id
			if n := cc.Usage.CompletionTokens; n != len(answer) || len(ch.TokenIDs) != n+b2i(stop >= 0) {
				t.Errorf("%d token ids, completion_tokens %d, answer %d tokens", len(ch.TokenIDs), n, len(answer))
			}
			if got := coretest.Decode(t, tc.model, ch.TokenIDs[:cc.Usage.CompletionTokens]); got != ch.Message.Content || got != c.Text && stop < 0 {
				t.Errorf("ids decode to %q, content %q", got, ch.Message.Content)
			}
			if wantFinish := map[bool]string{true: "stop", false: "length"}[stop >= 0]; ch.FinishReason != wantFinish {
				t.Errorf("finish_reason %q, want %q", ch.FinishReason, wantFinish)
			}

			extra["stream"] = true
			resp, raw = postJSON(t, h, e2eBody(tc.model, c, extra))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("stream status %d: %s", resp.StatusCode, raw)
			}
			var (
				text      strings.Builder
				ids, last []int32
			)
			for i, ev := range parseSSE(t, string(raw)) {
				if ev.data == "[DONE]" {
					continue
				}
				var chunk openai.ChatCompletionChunk
				if err := json.Unmarshal([]byte(ev.data), &chunk); err != nil {
					t.Fatalf("chunk %q: %v", ev.data, err)
				}
				if (i == 0) != (chunk.PromptTokenIDs != nil) || i == 0 && !slices.Equal(chunk.PromptTokenIDs, cc.PromptTokenIDs) {
					t.Errorf("chunk %d: prompt_token_ids %v", i, chunk.PromptTokenIDs)
				}
				for _, ch := range chunk.Choices {
					if ch.Delta.Content != nil {
						text.WriteString(*ch.Delta.Content)
					}
					if ch.Delta.Role == "" && ch.TokenIDs == nil {
						t.Errorf("chunk %d has no token_ids: %s", i, ev.data)
					}
					ids = append(ids, ch.TokenIDs...)
					if ch.FinishReason != nil {
						last = ch.TokenIDs
					}
				}
			}
			if !slices.Equal(ids, ch.TokenIDs) || text.String() != ch.Message.Content {
				t.Fatalf("streamed ids %v text %q, not streamed %v %q", ids, text.String(), ch.TokenIDs, ch.Message.Content)
			}
			// the deltas carry the answer's ids as they come; the finish chunk the stop token
			if wantLast := want[len(answer):]; !slices.Equal(last, wantLast) {
				t.Errorf("finish chunk token_ids %v, want %v", last, wantLast)
			}
		})
	}
}

// TestReturnTokenIDsOff: without return_token_ids no ids are sent.
func TestReturnTokenIDsOff(t *testing.T) {
	h := realServer(t, "tiny-untied")
	c := coretest.Cases(t, "tiny-untied")[0]
	for _, extra := range []map[string]any{nil, {"return_token_ids": false}, {"stream": true}} {
		resp, raw := postJSON(t, h, e2eBody("tiny-untied", c, extra))
		if resp.StatusCode != http.StatusOK || bytes.Contains(raw, []byte("token_ids")) {
			t.Errorf("%v: status %d, body %s", extra, resp.StatusCode, raw)
		}
	}
}

// firstNew is the first index from i on whose token is not earlier in ids; -1 if none.
func firstNew(ids []int32, i int) int {
	for ; i < len(ids); i++ {
		if !slices.Contains(ids[:i], ids[i]) {
			return i
		}
	}
	return -1
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// setStopIDs replaces the bundle's stop ids.
func setStopIDs(t testing.TB, dir string, ids []int32) {
	editManifest(t, dir, func(m *bundles.Manifest) { m.Generation.StopIDs = ids })
}
