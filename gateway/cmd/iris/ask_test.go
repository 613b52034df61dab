package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAskStream runs `iris ask --stream` against servers that stream the answer in different
// ways: the text and the usage reach the output, a mid-stream error event fails the command.
func TestAskStream(t *testing.T) {
	const finish = `data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14},` +
		`"iris":{"bundle":{"name":"demo","digest":"sha256:0123456789abcdef"},"timings_ms":{"decode":1.5}}}` + "\n\n"
	chunk := func(text string) string {
		return `data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n"
	}
	for _, tc := range []struct {
		name    string
		stream  string
		want    []string // in the output
		wantErr string
	}{
		{
			name:   "answer, usage and stages",
			stream: chunk("a ") + chunk("cat") + finish + "data: [DONE]\n\n",
			want:   []string{"a cat\n", "finish:  stop", "completion 2", "decode 1.50 ms"},
		},
		{
			name:   "CRLF line ends and a keep-alive comment",
			stream: strings.ReplaceAll(": ping\n\n"+chunk("cat")+finish+"data: [DONE]\n\n", "\n", "\r\n"),
			want:   []string{"cat\n", "completion 2"},
		},
		{
			name:    "an error event after the first chunk",
			stream:  chunk("a ") + "event: error\ndata: {\"error\":{\"code\":\"internal_error\"}}\n\n",
			wantErr: `stream failed: {"error":{"code":"internal_error"}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tc.stream)
			}))
			defer srv.Close()
			img := filepath.Join(t.TempDir(), "x.png")
			if err := os.WriteFile(img, []byte("not decoded by the client"), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := ask(context.Background(), []string{"--url", srv.URL, "--model", "demo", "--image", img, "--stream", "what is it?"}, &out, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestAskMaxTokens checks the generation limit `iris ask` sends: 64 by default, the flag's value
// when given, and none (the bundle's) with --max-tokens 0.
func TestAskMaxTokens(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `"max_tokens":64`},
		{[]string{"--max-tokens", "10"}, `"max_tokens":10`},
		{[]string{"--max-tokens", "0"}, ""},
	} {
		var body []byte
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ = io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"a cat"},"finish_reason":"stop"}]}`)
		}))
		img := filepath.Join(t.TempDir(), "x.png")
		if err := os.WriteFile(img, []byte("not decoded by the client"), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"--url", srv.URL, "--model", "demo", "--image", img}, tc.args...)
		var out bytes.Buffer
		err := ask(context.Background(), append(args, "what is it?"), &out, io.Discard)
		srv.Close()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if tc.want == "" {
			if strings.Contains(string(body), "max_tokens") {
				t.Errorf("%v: body %s sets max_tokens", tc.args, body)
			}
		} else if !strings.Contains(string(body), tc.want) {
			t.Errorf("%v: body %s lacks %s", tc.args, body, tc.want)
		}
	}
}
