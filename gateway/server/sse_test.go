package server

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/gateway/openai"
)

// FuzzAppendJSONString: the hand-written chunks quote text exactly as encoding/json does.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "a \"quoted\" \\ path\n\tnext\r", "<b>&amp;</b>", "\x00\x1f\x7f",
		"caf\u00e9 \U0001F600", "\u2028\u2029", "bad \xff utf-8", "\xe2\x80", "\ufffd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		got := appendJSONString([]byte("x"), s)
		if string(got) != "x"+string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Fatalf("appendJSONString(%q) = %s, encoding/json %s", s, got[1:], want.Bytes())
		}
	})
}

// TestAppendIrisAndUsage: the finish and usage chunks' objects are what encoding/json writes.
func TestAppendIrisAndUsage(t *testing.T) {
	irises := []*openai.Iris{
		{Bundle: openai.IrisBundle{Name: "vl", Digest: "abc"}, TimingsMS: map[string]float64{}},
		{Bundle: openai.IrisBundle{Name: "a\"b<\u2028", Digest: ""}},
		{
			Image:  &openai.IrisImage{SHA256: "89ab", Format: "jpeg", Width: 426, Height: -1},
			Bundle: openai.IrisBundle{Name: "qwen", Digest: "d"},
			TimingsMS: map[string]float64{"queue": 0, "decode_image": 2.153, "vision": 6.8, "prefill": 1e-7,
				"decode": 12345678.125, "plan": 1e21, "pixels": 0.001, "x": math.Copysign(0, -1)},
		},
	}
	for _, x := range irises {
		if got, want := appendIris(nil, x), jsonOf(t, x); string(got) != want {
			t.Errorf("appendIris = %s\nencoding/json  %s", got, want)
		}
	}
	for _, u := range []*openai.Usage{
		{PromptTokens: 200, CompletionTokens: 3, TotalTokens: 203, PromptTokensDetails: &openai.PromptTokensDetails{ImageTokens: 165}},
		{PromptTokens: -1},
	} {
		if got, want := appendUsage(nil, u), jsonOf(t, u); string(got) != want {
			t.Errorf("appendUsage = %s\nencoding/json  %s", got, want)
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
