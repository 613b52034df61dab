package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/coretest"
	"github.com/iris-vlm/iris/gateway/openai"
)

// TestHTTPLanceReadsImagesAsItsReference: a Lance bundle reads image files as Lance's loader
// does (bundles.ReadPILWhite: transparency composited on white, no EXIF transpose), so an RGBA
// PNG and a JPEG with EXIF orientation 6, which transformers' load_image reads otherwise, get
// the official code's tokens over HTTP (served.json's read_cases, golden_lance.py served), as
// does a palette PNG.
func TestHTTPLanceReadsImagesAsItsReference(t *testing.T) {
	cases := coretest.LanceReadCases(t)
	if len(cases) < 3 {
		t.Fatalf("%d read cases in the Lance served golden", len(cases))
	}
	h := realServer(t, coretest.Lance)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			mime := "image/png"
			if strings.HasSuffix(c.Name, ".jpg") {
				mime = "image/jpeg"
			}
			body, _ := json.Marshal(map[string]any{
				"model": coretest.Lance,
				"messages": []any{map[string]any{"role": "user", "content": []any{
					map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL(mime, c.Image)}},
					map[string]any{"type": "text", "text": c.Question},
				}}},
				"max_tokens": len(c.Tokens), "ignore_eos": true,
			})
			resp, out := postJSON(t, h, string(body))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, out)
			}
			var cc openai.ChatCompletion
			if err := json.Unmarshal(out, &cc); err != nil {
				t.Fatal(err)
			}
			if cc.Choices[0].Message.Content != c.Text {
				t.Errorf("answer %q, Lance's %q", cc.Choices[0].Message.Content, c.Text)
			}
			if cc.Usage.PromptTokens != c.PromptTokens || cc.Usage.CompletionTokens != len(c.Tokens) {
				t.Errorf("usage %+v, want prompt %d completion %d", cc.Usage, c.PromptTokens, len(c.Tokens))
			}
		})
	}
}
