// Package workload turns single_turn input rows and a run's generation settings into the exact
// chat request bodies the profiler sends. The same bytes feed the native parity run, so one
// request shape reaches both the HTTP and the in-process path.
package workload

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/iris-vlm/iris/benchmark/aiperf"
	"github.com/iris-vlm/iris/gateway/openai"
)

// Settings are the generation settings of a run. Nil pointers are left out of the body, so the
// server applies the model's own defaults.
type Settings struct {
	Model  string
	Stream bool
	// MaxTokens overrides every row's output_length when positive; with neither, the body sets
	// no limit and the bundle's default applies.
	MaxTokens   int
	Temperature *float64
	TopK        *int
	TopP        *float64
	Seed        *int64
	IgnoreEOS   bool
}

// Request is one row ready to send.
type Request struct {
	SessionID string
	Question  string
	// Body is the request body, compact JSON in AIPerf's key order.
	Body []byte
	// ImageSHA256 is the digest of the image file's bytes as the data URI carries them.
	ImageSHA256 string
	ImageBytes  int
}

// Build renders one request per row. The body follows AIPerf's chat payload
// (endpoints/openai_chat.py): messages (text part first, then the image), model, stream,
// max_completion_tokens, the run's sampling settings, the row's extra fields (which win), and
// stream_options.include_usage when streaming.
func Build(rows []aiperf.Row, s Settings) ([]Request, error) {
	if s.Model == "" {
		return nil, fmt.Errorf("build requests: no model")
	}
	out := make([]Request, 0, len(rows))
	for _, r := range rows {
		_, img, err := openai.DecodeDataURL(r.Image)
		if err != nil {
			return nil, fmt.Errorf("build requests: line %d (%s): image: %w", r.Line, r.SessionID, err)
		}
		sum := sha256.Sum256(img)
		body, err := render(r, s)
		if err != nil {
			return nil, fmt.Errorf("build requests: line %d (%s): %w", r.Line, r.SessionID, err)
		}
		out = append(out, Request{SessionID: r.SessionID, Question: r.Text, Body: body, ImageSHA256: hex.EncodeToString(sum[:]), ImageBytes: len(img)})
	}
	return out, nil
}

type part struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type message struct {
	Role    string `json:"role"`
	Content []part `json:"content"`
}

func render(r aiperf.Row, s Settings) ([]byte, error) {
	var fields []aiperf.Field
	set := func(key string, v any) error {
		b, err := marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", key, err)
		}
		if i := slices.IndexFunc(fields, func(f aiperf.Field) bool { return f.Key == key }); i >= 0 {
			fields[i].Value = b
			return nil
		}
		fields = append(fields, aiperf.Field{Key: key, Value: b})
		return nil
	}
	msgs := []message{{Role: "user", Content: []part{{Type: "text", Text: r.Text}, {Type: "image_url", ImageURL: &imageURL{URL: r.Image}}}}}
	steps := []struct {
		key  string
		v    any
		keep bool
	}{
		{"messages", msgs, true},
		{"model", s.Model, true},
		{"stream", s.Stream, true},
		{"max_completion_tokens", maxTokens(r, s), maxTokens(r, s) > 0},
		{"temperature", s.Temperature, s.Temperature != nil},
		{"top_k", s.TopK, s.TopK != nil},
		{"top_p", s.TopP, s.TopP != nil},
		{"seed", s.Seed, s.Seed != nil},
		{"ignore_eos", true, s.IgnoreEOS},
	}
	for _, st := range steps {
		if st.keep {
			if err := set(st.key, st.v); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range r.Extra {
		if f.Key == "messages" || f.Key == "model" || f.Key == "stream" {
			return nil, fmt.Errorf("extra field %q would change the request's shape", f.Key)
		}
		if err := set(f.Key, f.Value); err != nil {
			return nil, err
		}
	}
	if s.Stream && !slices.ContainsFunc(fields, func(f aiperf.Field) bool { return f.Key == "stream_options" }) {
		if err := set("stream_options", map[string]bool{"include_usage": true}); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := marshal(f.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(f.Value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func maxTokens(r aiperf.Row, s Settings) int {
	if s.MaxTokens > 0 {
		return s.MaxTokens
	}
	return r.OutputLength
}

// marshal encodes compactly without HTML escaping, as orjson writes.
func marshal(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
