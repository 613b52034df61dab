package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Retries of a refused (429) request: the server says when to come back (Retry-After), this
// bounds how often.
const (
	maxRetries   = 30
	defaultRetry = time.Second
)

// client asks one model greedy questions about one image each.
type client struct {
	http      *http.Client
	endpoint  string
	model     string
	maxTokens int
	// ignoreEOS asks for maxTokens tokens whatever is generated (a reference run whose EOS never
	// stops, as the GPU runs' parity references are).
	ignoreEOS bool
	// sleep waits d or until ctx ends (tests shorten it).
	sleep func(ctx context.Context, d time.Duration) error
}

func newClient(baseURL, model string, maxTokens int) *client {
	return &client{
		http:      &http.Client{Timeout: 5 * time.Minute},
		endpoint:  strings.TrimSuffix(baseURL, "/") + "/v1/chat/completions",
		model:     model,
		maxTokens: maxTokens,
		sleep:     sleepCtx,
	}
}

// answer is what the server answered.
type answer struct {
	content      string
	tokenIDs     []int32
	finishReason string
}

// ask sends one question with its image (a data URL), retrying while the server is busy.
func (c *client) ask(ctx context.Context, question, imageURL string) (*answer, error) {
	body, err := json.Marshal(chatRequest{
		Model: c.model,
		// image first: the scenes' framing (scripts/demo/scenes.py, what the demo model was
		// trained on and the reference answered) puts the image before the question
		Messages: []message{{Role: "user", Content: []contentPart{
			{Type: "image_url", ImageURL: &imageRef{URL: imageURL}},
			{Type: "text", Text: question},
		}}},
		MaxTokens:      c.maxTokens,
		Temperature:    0,
		ReturnTokenIDs: true,
		IgnoreEOS:      c.ignoreEOS,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		a, retryAfter, err := c.post(ctx, body)
		if retryAfter == 0 || attempt == maxRetries {
			return a, err
		}
		if err := c.sleep(ctx, retryAfter); err != nil {
			return nil, err
		}
	}
}

// post sends one request; a 429 returns how long to wait before the next (and its error).
func (c *client) post(ctx context.Context, body []byte) (*answer, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw[:min(len(raw), 512)]))
		if resp.StatusCode == http.StatusTooManyRequests {
			return nil, retryAfter(resp.Header.Get("Retry-After")), err
		}
		return nil, 0, err
	}
	var cc chatCompletion
	if err := json.Unmarshal(raw, &cc); err != nil {
		return nil, 0, fmt.Errorf("decoding the answer: %w", err)
	}
	if len(cc.Choices) != 1 {
		return nil, 0, fmt.Errorf("the answer has %d choices, want 1", len(cc.Choices))
	}
	ch := cc.Choices[0]
	if ch.TokenIDs == nil {
		return nil, 0, fmt.Errorf("the answer has no token_ids: does the server honour return_token_ids?")
	}
	return &answer{content: ch.Message.Content, tokenIDs: ch.TokenIDs, finishReason: ch.FinishReason}, 0, nil
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; defaultRetry when absent,
// unreadable or past.
func retryAfter(h string) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && time.Until(t) > 0 {
		return time.Until(t)
	}
	return defaultRetry
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
