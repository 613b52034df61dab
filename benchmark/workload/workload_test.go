package workload

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/benchmark/aiperf"
)

// onePixel is a 1x1 PNG.
const onePixel = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

func ptr[T any](v T) *T { return &v }

func TestBodies(t *testing.T) {
	row := aiperf.Row{SessionID: "img-1", Text: "a<b & c?", Image: onePixel, OutputLength: 10}
	tests := []struct {
		name string
		row  aiperf.Row
		s    Settings
		want string
	}{
		{"aiperf key order", row, Settings{Model: "demo", Temperature: ptr(0.0), TopK: ptr(1)},
			`{"messages":[{"role":"user","content":[{"type":"text","text":"a<b & c?"},{"type":"image_url","image_url":{"url":"` + onePixel + `"}}]}],"model":"demo","stream":false,"max_completion_tokens":10,"temperature":0,"top_k":1}`},
		{"stream asks for usage", row, Settings{Model: "demo", Stream: true, MaxTokens: 4},
			`"model":"demo","stream":true,"max_completion_tokens":4,"stream_options":{"include_usage":true}}`},
		{"no limit", aiperf.Row{SessionID: "s", Text: "q", Image: onePixel}, Settings{Model: "m"}, `"model":"m","stream":false}`},
		{"row extra wins", aiperf.Row{SessionID: "s", Text: "q", Image: onePixel, Extra: []aiperf.Field{
			{Key: "temperature", Value: json.RawMessage(`0.5`)}, {Key: "min_tokens", Value: json.RawMessage(` 2 `)}}},
			Settings{Model: "m", Temperature: ptr(0.0), Seed: ptr(int64(9)), IgnoreEOS: true},
			`"model":"m","stream":false,"temperature":0.5,"seed":9,"ignore_eos":true,"min_tokens":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs, err := Build([]aiperf.Row{tt.row}, tt.s)
			if err != nil {
				t.Fatal(err)
			}
			got := string(reqs[0].Body)
			if !strings.HasSuffix(got, tt.want) {
				t.Errorf("body\n got %s\nwant suffix %s", got, tt.want)
			}
			if !json.Valid(reqs[0].Body) {
				t.Error("invalid JSON")
			}
			raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(onePixel, "data:image/png;base64,"))
			if sum := sha256.Sum256(raw); reqs[0].ImageSHA256 != hex.EncodeToString(sum[:]) || reqs[0].ImageBytes != len(raw) {
				t.Errorf("digest %q of %d bytes", reqs[0].ImageSHA256, reqs[0].ImageBytes)
			}
		})
	}
}

func TestBuildRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		row aiperf.Row
		s   Settings
	}{
		"no model":      {aiperf.Row{Text: "q", Image: onePixel}, Settings{}},
		"gif":           {aiperf.Row{Text: "q", Image: "data:image/gif;base64,R0lGODlhAQABAAAAACw="}, Settings{Model: "m"}},
		"bad base64":    {aiperf.Row{Text: "q", Image: "data:image/png;base64,%%%"}, Settings{Model: "m"}},
		"extra reshape": {aiperf.Row{Text: "q", Image: onePixel, Extra: []aiperf.Field{{Key: "messages", Value: json.RawMessage(`[]`)}}}, Settings{Model: "m"}},
	} {
		if _, err := Build([]aiperf.Row{c.row}, c.s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
