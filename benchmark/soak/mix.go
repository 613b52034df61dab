package soak

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// Image is one encoded image file of the mix.
type Image struct {
	Name      string
	MediaType string // image/jpeg, image/png
	Data      []byte
}

// DataURL is the image as an image_url's data URL.
func (im Image) DataURL() string {
	return "data:" + im.MediaType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
}

// CancelTokens is the answer length a cancellation asks for: long enough that its client gives
// up while it is still being generated.
const CancelTokens = 64

// Mix builds the distinct requests of a soak of model: for each image, good requests plain and
// streamed at maxTokens and at 2 tokens (greedy, EOS ignored, so an answer is the same alone and
// batched) and cancellations plain and streamed; then BadRequests on the first image.
func Mix(model string, images []Image, question string, maxTokens int) []*Request {
	var out []*Request
	for _, im := range images {
		for _, stream := range []bool{false, true} {
			mode := "plain"
			if stream {
				mode = "stream"
			}
			name := fmt.Sprintf("%s/%s/%s", model, im.Name, mode)
			out = append(out,
				&Request{Name: name, Kind: Good, Stream: stream, Image: im.Name, Body: Body(model, []Image{im}, question, Opts{MaxTokens: maxTokens, Stream: stream})},
				&Request{Name: name + "/short", Kind: Good, Stream: stream, Image: im.Name, Body: Body(model, []Image{im}, question, Opts{MaxTokens: 2, Stream: stream})},
				&Request{Name: name + "/cancel", Kind: Cancel, Stream: stream, Image: im.Name, Body: Body(model, []Image{im}, question, Opts{MaxTokens: max(CancelTokens, maxTokens), Stream: stream})},
			)
		}
	}
	if len(images) > 0 {
		out = append(out, BadRequests(model, images[0], question, 20000)...)
	}
	return out
}

// Opts are a body's top-level fields beside the messages.
type Opts struct {
	MaxTokens int
	Stream    bool
	// Extra fields, set last (they override the others).
	Extra map[string]any
}

// Body is a chat request for model with one user message: images then question, greedy with
// EOS ignored.
func Body(model string, images []Image, question string, o Opts) []byte {
	var parts []any
	for _, im := range images {
		parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": im.DataURL()}})
	}
	parts = append(parts, map[string]any{"type": "text", "text": question})
	m := map[string]any{
		"model":       model,
		"messages":    []any{map[string]any{"role": "user", "content": parts}},
		"max_tokens":  o.MaxTokens,
		"temperature": 0,
		"ignore_eos":  true,
	}
	if o.Stream {
		m["stream"] = true
		m["stream_options"] = map[string]bool{"include_usage": true}
	}
	for k, v := range o.Extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("marshal a chat body: %v", err)) // maps of strings, numbers and bools always marshal
	}
	return b
}

// BadRequests are inputs a server refuses with a 4xx on their own, built on im: a corrupt
// image (plain and streamed), bytes that are no image, two images, a prompt of longRepeats
// sentences (~7 tokens each: past the context), an answer longer than any context, malformed
// JSON, an unknown model and a negative temperature.
func BadRequests(model string, im Image, question string, longRepeats int) []*Request {
	corrupt := Image{Name: im.Name + "-corrupt", MediaType: im.MediaType, Data: im.Data[:len(im.Data)/2]}
	notImage := Image{Name: "not-an-image", MediaType: "image/png", Data: []byte("definitely not a PNG")}
	one := []Image{im}
	bads := []struct {
		name   string
		stream bool
		body   []byte
	}{
		{"corrupt image", false, Body(model, []Image{corrupt}, question, Opts{MaxTokens: 2})},
		{"streamed corrupt image", true, Body(model, []Image{corrupt}, question, Opts{MaxTokens: 2, Stream: true})},
		{"not an image", false, Body(model, []Image{notImage}, question, Opts{MaxTokens: 2})},
		{"two images", false, Body(model, []Image{im, im}, question, Opts{MaxTokens: 2})},
		{"over-long prompt", false, Body(model, one, strings.Repeat("Describe every pixel of the image. ", longRepeats), Opts{MaxTokens: 2})},
		{"over-long answer", false, Body(model, one, question, Opts{MaxTokens: 1 << 20})},
		{"bad json", false, []byte(`{"model":"` + model + `","messages":[`)},
		{"unknown model", false, Body(model+"-nope", one, question, Opts{MaxTokens: 2})},
		{"bad temperature", false, Body(model, one, question, Opts{MaxTokens: 2, Extra: map[string]any{"temperature": -1}})},
	}
	out := make([]*Request, len(bads))
	for i, b := range bads {
		out[i] = &Request{Name: model + "/bad/" + b.name, Kind: Bad, Stream: b.stream, Body: b.body}
	}
	return out
}
