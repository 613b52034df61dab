// Package sse reads a text/event-stream body message by message, framed as the HTML living
// standard frames server-sent events: lines end in LF, CRLF or CR+LF alike, and a blank line ends
// a message. It is the one SSE reader of Iris's chat clients: `iris ask`, the profiler's load
// generator (benchmark/loadgen, which keeps each message's fields for AIPerf's records) and
// httpbench.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Reader splits an event stream into messages.
type Reader struct {
	br  *bufio.Reader
	msg bytes.Buffer
}

// NewReader reads the event stream r.
func NewReader(r io.Reader) *Reader { return &Reader{br: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next message: its non-empty lines, each ended by "\n" whatever the wire's
// line ends were. A message the stream ends without a blank line after is returned too; then
// Next returns io.EOF. The bytes are valid until the next call.
func (r *Reader) Next() ([]byte, error) {
	r.msg.Reset()
	for {
		line, err := r.br.ReadBytes('\n')
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trimmed) > 0:
			r.msg.Write(trimmed)
			r.msg.WriteByte('\n')
		case len(line) > 0 && r.msg.Len() > 0: // a blank line ends the message
			return r.msg.Bytes(), nil
		}
		if errors.Is(err, io.EOF) {
			if r.msg.Len() > 0 {
				return r.msg.Bytes(), nil
			}
			return nil, io.EOF
		}
		if err != nil {
			return nil, fmt.Errorf("read event stream: %w", err)
		}
	}
}

// Data returns a message's event type ("" when it names none) and its data: the values of its
// data fields joined with "\n", each value's one leading space dropped. Other fields and
// comments (lines starting with ":") are ignored.
func Data(msg []byte) (event, data string) {
	var parts []string
	for line := range strings.SplitSeq(strings.TrimSuffix(string(msg), "\n"), "\n") {
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			event = value
		case "data":
			parts = append(parts, value)
		}
	}
	return event, strings.Join(parts, "\n")
}
