package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iris-vlm/iris/gateway/openai"
)

// fakeAnswers are the fake server's answers by question: content and token ids.
var fakeAnswers = map[string]struct {
	content string
	ids     []int32
}{
	"What colour is the triangle?": {"green", []int32{13250, 151645}},
	"What colour is the square?":   {"red", []int32{1151, 151645}},
	"How many shapes are there?":   {"3 ", []int32{18, 220}}, // wrong: exact match, no trimming
	"Is there a circle?":           {"no", []int32{2152, 151645}},
}

// fakeServer answers greedy requests from fakeAnswers; the first request is refused with a 429
// (Retry-After: 1), a question it does not know is a 500. It checks the request's shape.
type fakeServer struct {
	t       *testing.T
	refused atomic.Int32
	// ignoreEOS counts the requests that sent ignore_eos true
	ignoreEOS atomic.Int32
	mu        sync.Mutex
	asked     map[string]int
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.refused.Add(1) == 1 {
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"code":"server_busy"}}`, http.StatusTooManyRequests)
		return
	}
	var req struct {
		Model          string  `json:"model"`
		MaxTokens      int     `json:"max_tokens"`
		Temperature    float64 `json:"temperature"`
		ReturnTokenIDs bool    `json:"return_token_ids"`
		IgnoreEOS      bool    `json:"ignore_eos"`
		Messages       []struct {
			Role    string               `json:"role"`
			Content []openai.ContentPart `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	m := req.Messages
	if req.Model != "m" || req.MaxTokens != 8 || req.Temperature != 0 || !req.ReturnTokenIDs || len(m) != 1 || m[0].Role != "user" ||
		len(m[0].Content) != 2 || m[0].Content[0].ImageURL == nil || !strings.HasPrefix(m[0].Content[0].ImageURL.URL, "data:image/png;base64,") ||
		m[0].Content[1].Type != "text" {
		f.t.Errorf("unexpected request %+v", req)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if req.IgnoreEOS {
		f.ignoreEOS.Add(1)
	}
	q := m[0].Content[1].Text
	f.mu.Lock()
	f.asked[q]++
	f.mu.Unlock()
	a, ok := fakeAnswers[q]
	if !ok {
		http.Error(w, `{"error":{"code":"internal_error"}}`, http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(openai.ChatCompletion{Choices: []openai.Choice{{
		Message: openai.ResponseMessage{Role: "assistant", Content: a.content}, TokenIDs: a.ids, FinishReason: "stop"}}})
}

// writeSet writes a scene set and a reference run into a temporary directory.
func writeSet(t *testing.T) (dir, ref string) {
	t.Helper()
	dir = t.TempDir()
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"00000.png", "00001.png"} {
		if err := os.WriteFile(filepath.Join(dir, name), img.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	scenes := `{"image": "00000.png", "question": "What colour is the triangle?", "answer": "green", "type": "colour", "index": 0, "extra": [1, 2]}
{"image": "00000.png", "question": "How many shapes are there?", "answer": "3", "type": "count", "index": 0}

{"image": "00001.png", "question": "What colour is the square?", "answer": "red", "type": "colour", "index": 1}
{"image": "00001.png", "question": "Is there a circle?", "answer": "no", "type": "exist", "index": 1}
{"image": "00001.png", "question": "Unknown to the server?", "answer": "x", "type": "exist", "index": 1}
`
	if err := os.WriteFile(filepath.Join(dir, "scenes.jsonl"), []byte(scenes), 0o644); err != nil {
		t.Fatal(err)
	}
	// the reference answers the square wrongly and differs on the count's tokens
	refs := `{"index": 0, "question": "What colour is the triangle?", "got": "green", "tokens": [13250, 151645]}
{"index": 0, "question": "How many shapes are there?", "got": "3 ", "tokens": [18, 151645]}
{"index": 1, "question": "What colour is the square?", "got": "blue", "tokens": [12203, 151645]}
{"index": 1, "question": "Is there a circle?", "got": "no", "tokens": [2152, 151645]}
{"index": 1, "question": "Unknown to the server?", "got": "x", "tokens": [87, 151645]}
`
	ref = filepath.Join(dir, "ref.jsonl")
	if err := os.WriteFile(ref, []byte(refs), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, ref
}

// TestRun runs the command against a fake server: the first request is refused once with a 429
// and retried; a 500 is that item's error; the report, the JSON and the gates' exit status.
func TestRun(t *testing.T) {
	f := &fakeServer{t: t, asked: map[string]int{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	dir, ref := writeSet(t)
	out := filepath.Join(t.TempDir(), "out.json")
	base := []string{"-url", srv.URL, "-model", "m", "-scenes", dir, "-concurrency", "2"}

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append(base, "-reference", ref, "-json", out), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if n := f.refused.Load(); n != 6 { // 5 items, one of them twice
		t.Errorf("%d requests, want 6 (one retried after a 429)", n)
	}
	if n := f.ignoreEOS.Load(); n != 0 {
		t.Errorf("%d requests sent ignore_eos without -ignore-eos", n)
	}
	for q, n := range f.asked {
		if n != 1 {
			t.Errorf("%q answered %d times", q, n)
		}
	}
	// items, correct, accuracy, errors; same answers, their fraction, token agreement, same ids
	if !strings.Contains(oneSpaced(stdout.String()), "overall 5 3 0.6000 1 3 0.6000 0.5000 2") {
		t.Errorf("report's overall line:\n%s", stdout.String())
	}
	for _, want := range []string{`"3 "`, `"blue"`, "error: HTTP 500"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
	var rep report
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	o := rep.Summary.Overall
	if len(rep.Items) != 5 || o.Correct != 3 || o.SameAnswer != 3 || o.PrefixTokens != 5 || o.ReferenceTokens != 10 || rep.Failed != "" {
		t.Errorf("JSON report: overall %+v, %d items, failed %q", o, len(rep.Items), rep.Failed)
	}

	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"accuracy gate", []string{"-min-accuracy", "0.7"}, exitGate, "gate failed: accuracy 0.6000 (3/5) < 0.7"},
		{"accuracy gate passes", []string{"-min-accuracy", "0.6"}, exitOK, ""},
		{"reference gate", []string{"-reference", ref, "-require-reference"}, exitGate, "2 of 5 answers differ from the reference"},
		{"token gate", []string{"-reference", ref, "-min-token-agreement", "0.5"}, exitOK, ""},
		{"token gate fails", []string{"-reference", ref, "-min-token-agreement", "0.6"}, exitGate, "token agreement 0.5000 (5/10) < 0.6"},
		{"gate without reference", []string{"-min-answer-agreement", "0.5"}, exitUsage, "need -reference"},
		{"no model", []string{"-model", ""}, exitUsage, "-model is required"},
		{"missing scenes", []string{"-scenes", t.TempDir()}, exitUsage, "scenes.jsonl: no such file"},
		{"bad flag", []string{"-nope"}, exitUsage, "not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(base[:len(base):len(base)], tc.args...), &stdout, &stderr)
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tc.wantCode, tc.wantErr)
			}
			if code == exitGate && strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("the reason is not one line: %q", stderr.String())
			}
		})
	}
}

// TestRetryAfter: a 429's Retry-After (seconds or a date) sets the wait before the retry; the
// retries are bounded.
// oneSpaced is s with every run of spaces one space.
func oneSpaced(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		b.WriteString(strings.Join(strings.Fields(line), " ") + "\n")
	}
	return b.String()
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header string
		want   time.Duration
	}{
		{"seconds", "3", 3 * time.Second},
		{"absent", "", defaultRetry},
		{"garbage", "soon", defaultRetry},
		{"date", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), 59 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					if tc.header != "" {
						w.Header().Set("Retry-After", tc.header)
					}
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"ok"},"token_ids":[1],"finish_reason":"stop"}]}`))
			}))
			defer srv.Close()
			c := newClient(srv.URL, "m", 8)
			var waited []time.Duration
			c.sleep = func(_ context.Context, d time.Duration) error { waited = append(waited, d); return nil }
			a, err := c.ask(context.Background(), "q", "data:image/png;base64,AA==")
			if err != nil || a.content != "ok" || len(waited) != 1 || waited[0] < tc.want || waited[0] > tc.want+time.Minute {
				t.Errorf("answer %+v, err %v, waited %v; want a wait of %v", a, err, waited, tc.want)
			}
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	c := newClient(srv.URL, "m", 8)
	waits := 0
	c.sleep = func(context.Context, time.Duration) error { waits++; return nil }
	if _, err := c.ask(context.Background(), "q", "data:image/png;base64,AA=="); err == nil || !strings.Contains(err.Error(), "HTTP 429") || waits != maxRetries {
		t.Errorf("always busy: err %v after %d waits", err, waits)
	}
}

// TestIgnoreEOS: -ignore-eos sends ignore_eos with every request (a reference whose EOS never
// stops, the GPU runs' parity), and the answers are compared as without it.
func TestIgnoreEOS(t *testing.T) {
	f := &fakeServer{t: t, asked: map[string]int{}}
	f.refused.Store(1) // no 429 first
	srv := httptest.NewServer(f)
	defer srv.Close()
	dir, ref := writeSet(t)
	var stdout, stderr bytes.Buffer
	args := []string{"-url", srv.URL, "-model", "m", "-scenes", dir, "-reference", ref, "-ignore-eos", "-min-token-agreement", "0.5"}
	if code := run(context.Background(), args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if n := f.ignoreEOS.Load(); n != 5 {
		t.Errorf("%d of 5 requests sent ignore_eos", n)
	}
}
