package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestChatOnce reads streamed answers as a speed run does: text chunks, the usage's completion
// tokens and the server's stage timings; an error event or status fails the request.
func TestChatOnce(t *testing.T) {
	chunk := `data: {"choices":[{"delta":{"content":"x"}}]}` + "\n\n"
	last := `data: {"choices":[{"delta":{}}],"usage":{"completion_tokens":3},"iris":{"timings_ms":{"vision":5.25}}}` + "\n\n"
	for _, tc := range []struct {
		name       string
		status     int
		stream     string
		wantChunks int
		wantTokens int
		wantErr    string
	}{
		{name: "three tokens", status: 200, stream: "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n" + chunk + chunk + chunk + last + "data: [DONE]\n\n", wantChunks: 3, wantTokens: 3},
		{name: "error event", status: 200, stream: chunk + "event: error\ndata: {\"error\":{}}\n\n", wantErr: "stream failed"},
		{name: "refused", status: 429, stream: `{"error":{"code":"queue_full"}}`, wantErr: "HTTP 429"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.stream)
			}))
			defer srv.Close()
			r, err := chatOnce(context.Background(), srv.Client(), srv.URL, []byte(`{}`))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.chunks != tc.wantChunks || r.tokens != tc.wantTokens || r.stages["vision"] != 5.25 || r.ttft <= 0 || r.total < r.ttft {
				t.Errorf("got %d chunks, %d tokens, stages %v, TTFT %v of %v", r.chunks, r.tokens, r.stages, r.ttft, r.total)
			}
		})
	}
}

// TestVariantsOf: every variant decodes to the source's size, and no two share bytes.
func TestVariantsOf(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 7, 5))
	for i := range src.Pix {
		src.Pix[i] = uint8(i * 13)
	}
	for _, format := range []string{"png", "jpeg"} {
		var buf bytes.Buffer
		if format == "png" {
			_ = png.Encode(&buf, src)
		} else {
			_ = jpeg.Encode(&buf, src, nil)
		}
		vs, err := variantsOf(buf.Bytes(), 40) // more than the 35 pixels: positions wrap
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for i, v := range vs {
			img, got, err := image.Decode(bytes.NewReader(v))
			if err != nil || got != format || img.Bounds() != src.Bounds() {
				t.Fatalf("%s variant %d: %v, format %q, bounds %v", format, i, err, got, img.Bounds())
			}
			seen[string(v)] = true
		}
		if len(seen) < 36 {
			t.Errorf("%s: %d distinct variants of 40", format, len(seen))
		}
	}
}

func TestTokenCounts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: "3,10", want: []int{3, 10}},
		{in: "3, 300", want: []int{3, 300}},
		{in: "32", want: []int{32}},
		{in: "1", bad: true}, // no TPOT from one token
		{in: "3,x", bad: true},
		{in: "", bad: true},
	} {
		got, err := tokenCounts(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("tokenCounts(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("tokenCounts(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
