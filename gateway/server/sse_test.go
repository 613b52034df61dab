package server

import (
	"bytes"
	"encoding/json"
	"testing"
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
