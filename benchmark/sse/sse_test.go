package sse

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// messages reads every message of stream, each as Data returns it.
func messages(t *testing.T, r io.Reader) (raw []string, events, data []string) {
	t.Helper()
	rd := NewReader(r)
	for {
		msg, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return raw, events, data
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		ev, d := Data(msg)
		raw, events, data = append(raw, string(msg)), append(events, ev), append(data, d)
	}
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name          string
		stream        string
		raw, ev, data []string
	}{
		{
			name:   "chat chunks and done",
			stream: "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n",
			raw:    []string{"data: {\"a\":1}\n", "data: {\"a\":2}\n", "data: [DONE]\n"},
			ev:     []string{"", "", ""},
			data:   []string{`{"a":1}`, `{"a":2}`, "[DONE]"},
		},
		{
			name:   "CRLF line ends and extra blank lines",
			stream: "\r\n\r\ndata: x\r\n\r\n\r\ndata: y\r\n\r\n",
			raw:    []string{"data: x\n", "data: y\n"},
			ev:     []string{"", ""},
			data:   []string{"x", "y"},
		},
		{
			name:   "an error event with a multi-line data field",
			stream: "event: error\ndata: {\"error\":\ndata: 1}\n\n",
			raw:    []string{"event: error\ndata: {\"error\":\ndata: 1}\n"},
			ev:     []string{"error"},
			data:   []string{"{\"error\":\n1}"},
		},
		{
			name:   "comments, ids and a value without a space",
			stream: ": keep-alive\nid: 7\ndata:x\n\n",
			raw:    []string{": keep-alive\nid: 7\ndata:x\n"},
			ev:     []string{""},
			data:   []string{"x"},
		},
		{
			name:   "a last message without a blank line after it",
			stream: "data: a\n\ndata: b",
			raw:    []string{"data: a\n", "data: b\n"},
			ev:     []string{"", ""},
			data:   []string{"a", "b"},
		},
		{
			name:   "empty stream",
			stream: "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// one byte a read: message ends must not depend on how the body arrives
			raw, ev, data := messages(t, iotest.OneByteReader(strings.NewReader(tc.stream)))
			if !slices.Equal(raw, tc.raw) || !slices.Equal(ev, tc.ev) || !slices.Equal(data, tc.data) {
				t.Errorf("got raw %q events %q data %q\nwant raw %q events %q data %q", raw, ev, data, tc.raw, tc.ev, tc.data)
			}
		})
	}
}

func TestReaderError(t *testing.T) {
	boom := errors.New("connection reset")
	rd := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)))
	if msg, err := rd.Next(); err != nil || string(msg) != "data: a\n" {
		t.Fatalf("first message = %q, %v", msg, err)
	}
	if _, err := rd.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next after a broken stream: %v, want %v", err, boom)
	}
}
