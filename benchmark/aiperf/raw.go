package aiperf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// RawRecord is one line of profile_export_raw.jsonl (aiperf RawRecordInfo): the exact request
// body and every response message with its monotonic timestamp.
type RawRecord struct {
	Metadata       Metadata          `json:"metadata"`
	StartPerfNS    int64             `json:"start_perf_ns"`
	RequestHeaders map[string]string `json:"request_headers,omitempty"`
	Status         int               `json:"status,omitempty"`
	Responses      []Response        `json:"responses"`
	// Payload is the request body as sent, byte for byte.
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *ErrorDetails   `json:"error,omitempty"`
}

// SSEField is one field of a server-sent event ("data", "event", "id", "retry", "comment").
type SSEField struct {
	Name  string  `json:"name"`
	Value *string `json:"value"`
}

// Response is one response unit: a server-sent event (Packets) or a whole text body (Text).
type Response struct {
	PerfNS      int64
	Packets     []SSEField
	Text        *string
	ContentType string
}

// IsSSE reports whether r is a server-sent event rather than a text body.
func (r Response) IsSSE() bool { return r.Text == nil }

// MarshalJSON writes exactly the fields of AIPerf's SSEMessage or TextResponse, whose models
// forbid extra keys.
func (r Response) MarshalJSON() ([]byte, error) {
	if r.IsSSE() {
		p := r.Packets
		if p == nil {
			p = []SSEField{}
		}
		return json.Marshal(struct {
			PerfNS  int64      `json:"perf_ns"`
			Packets []SSEField `json:"packets"`
		}{r.PerfNS, p})
	}
	return json.Marshal(struct {
		PerfNS      int64  `json:"perf_ns"`
		Text        string `json:"text"`
		ContentType string `json:"content_type,omitempty"`
	}{r.PerfNS, *r.Text, r.ContentType})
}

// UnmarshalJSON reads either shape.
func (r *Response) UnmarshalJSON(b []byte) error {
	var w struct {
		PerfNS      int64      `json:"perf_ns"`
		Packets     []SSEField `json:"packets"`
		Text        *string    `json:"text"`
		ContentType string     `json:"content_type"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Response{PerfNS: w.PerfNS, Packets: w.Packets, Text: w.Text, ContentType: w.ContentType}
	return nil
}

// ParseSSE splits one SSE message (the text between blank lines) into fields, per the HTML
// living standard: "name: value", a leading space of the value dropped, ":" lines as comments.
func ParseSSE(msg []byte, perfNS int64) Response {
	r := Response{PerfNS: perfNS, Packets: []SSEField{}}
	for line := range strings.SplitSeq(strings.ReplaceAll(string(msg), "\r\n", "\n"), "\n") {
		if line == "" {
			continue
		}
		name, value, found := strings.Cut(line, ":")
		if name == "" {
			name = "comment"
		}
		f := SSEField{Name: name}
		if found {
			v := strings.TrimPrefix(value, " ")
			f.Value = &v
		}
		r.Packets = append(r.Packets, f)
	}
	return r
}

// Usage is the token usage a server reported.
type Usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		ImageTokens *int `json:"image_tokens"`
	} `json:"prompt_tokens_details"`
}

// IrisExtension is the "iris" object of an Iris response.
type IrisExtension struct {
	Image *struct {
		SHA256 string `json:"sha256"`
		Format string `json:"format"`
		Width  int    `json:"width"`
		Height int    `json:"height"`
	} `json:"image"`
	Bundle struct {
		Name   string `json:"name"`
		Digest string `json:"digest"`
	} `json:"bundle"`
	TimingsMS map[string]float64 `json:"timings_ms"`
}

// Content is one response that carried answer text, with its timestamp.
type Content struct {
	PerfNS int64
	Text   string
}

// Answer is what a chat response said, read the way AIPerf reads it
// (endpoints/openai_chat.py): only objects named chat.completion(.chunk) count, only non-empty
// content moves timestamps, and the usage is the last non-empty one.
type Answer struct {
	Contents     []Content
	Usage        *Usage
	Iris         *IrisExtension
	FinishReason string
	// SSEError is set when the stream carried an "event: error" message.
	SSEError string
}

// Text returns the whole answer.
func (a *Answer) Text() string {
	var b strings.Builder
	for _, c := range a.Contents {
		b.WriteString(c.Text)
	}
	return b.String()
}

type wireChoice struct {
	Delta *struct {
		Content *string `json:"content"`
	} `json:"delta"`
	Message *struct {
		Content *string `json:"content"`
	} `json:"message"`
	FinishReason *string `json:"finish_reason"`
}

type wireResponse struct {
	Object  string          `json:"object"`
	Choices []wireChoice    `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
	Iris    *IrisExtension  `json:"iris"`
}

// ParseAnswer reads the responses of one exchange. Objects that are not JSON are skipped, as
// AIPerf skips them.
func ParseAnswer(rs []Response) Answer {
	var a Answer
	for _, r := range rs {
		if r.IsSSE() {
			event := ""
			var data []string
			for _, p := range r.Packets {
				switch {
				case p.Name == "event" && p.Value != nil:
					event = *p.Value
				case p.Name == "data" && p.Value != nil:
					data = append(data, *p.Value)
				}
			}
			if event == "error" {
				a.SSEError = strings.Join(data, "\n")
				continue
			}
			d := strings.Join(data, "\n")
			if d == "" || d == "[DONE]" {
				continue
			}
			a.absorb([]byte(d), r.PerfNS, "chat.completion.chunk")
			continue
		}
		a.absorb([]byte(*r.Text), r.PerfNS, "chat.completion")
	}
	return a
}

func (a *Answer) absorb(b []byte, perfNS int64, object string) {
	var w wireResponse
	if err := json.Unmarshal(b, &w); err != nil {
		return
	}
	if u := bytes.TrimSpace(w.Usage); len(u) > 0 && !bytes.Equal(u, []byte("null")) && !bytes.Equal(u, []byte("{}")) {
		var us Usage
		if json.Unmarshal(u, &us) == nil {
			a.Usage = &us
		}
	}
	if w.Iris != nil {
		a.Iris = w.Iris
	}
	if w.Object != object || len(w.Choices) == 0 {
		return
	}
	c := w.Choices[0]
	if c.FinishReason != nil {
		a.FinishReason = *c.FinishReason
	}
	var text *string
	if c.Delta != nil {
		text = c.Delta.Content
	}
	if c.Message != nil && object == "chat.completion" {
		text = c.Message.Content
	}
	if text != nil && *text != "" {
		a.Contents = append(a.Contents, Content{PerfNS: perfNS, Text: *text})
	}
}

// CountImages counts the image parts of a chat request body.
func CountImages(payload []byte) (int, error) {
	var body struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(payload, &body); err != nil {
		return 0, fmt.Errorf("read request body: %w", err)
	}
	n := 0
	for _, m := range body.Messages {
		var parts []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			continue // a plain string
		}
		for _, p := range parts {
			if p.Type == "image_url" {
				n++
			}
		}
	}
	return n, nil
}
