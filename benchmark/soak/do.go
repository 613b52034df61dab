package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/iris-vlm/iris/benchmark/sse"
)

// ChatPath is where the requests go, below the base URL.
const ChatPath = "/v1/chat/completions"

// The answer shapes the client reads: its own rather than gateway/openai's, which would bring
// the runtime (cgo included) into benchmark/cmd/soak, a binary carried to the GPU machine. The
// tests run against the real gateway, so the two cannot drift apart unnoticed.
type completion struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

type chunk struct {
	Choices []struct {
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
}

// do sends r and returns the status and the answer: the message content of a 200, the
// concatenated deltas of a 200 stream (an error event, or an end without [DONE], is an error),
// the body otherwise. onEvent, if set, runs after the first streamed event.
func do(ctx context.Context, client *http.Client, url string, r *Request, onEvent func()) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+ChatPath, bytes.NewReader(r.Body))
	if err != nil {
		return 0, "", fmt.Errorf("build the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("send: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, "", fmt.Errorf("read the %d body: %w", resp.StatusCode, err)
		}
		return resp.StatusCode, string(raw), nil
	}
	if !r.Stream {
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, "", fmt.Errorf("read the answer: %w", err)
		}
		var cc completion
		if err := json.Unmarshal(raw, &cc); err != nil {
			return 0, "", fmt.Errorf("decode %q: %w", clip(string(raw)), err)
		}
		if len(cc.Choices) != 1 {
			return 0, "", fmt.Errorf("want one choice in %s", clip(string(raw)))
		}
		return resp.StatusCode, cc.Choices[0].Message.Content, nil
	}
	var text strings.Builder
	rd := sse.NewReader(resp.Body)
	for {
		msg, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return 0, "", fmt.Errorf("stream ended without [DONE] after %q", clip(text.String()))
		}
		if err != nil {
			return 0, "", err
		}
		if onEvent != nil {
			onEvent()
			onEvent = nil
		}
		event, data := sse.Data(msg)
		if event == "error" {
			return 0, "", fmt.Errorf("error event in the stream: %s", clip(data))
		}
		if data == "[DONE]" {
			_, _ = io.Copy(io.Discard, resp.Body) // to EOF, so the connection is reused
			return resp.StatusCode, text.String(), nil
		}
		if data == "" {
			continue // a comment or keep-alive
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return 0, "", fmt.Errorf("decode chunk %q: %w", clip(data), err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
		}
	}
}
