package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/iris-vlm/iris/gateway/middleware"
	"github.com/iris-vlm/iris/gateway/openai"
)

// sseWriter writes the chunks of one streamed answer as server-sent events, each flushed at once
// and bounded by a write deadline.
//
// The chunks' frames and the deltas are written by hand rather than by encoding an
// [openai.ChatCompletionChunk]: a content delta is written between two decode steps, and
// reflection cost 20 us of the ~25 us a delta took before its write. The bytes are those
// encoding/json writes (the golden transcripts and FuzzAppendJSONString hold them to it). The
// last chunk's iris extension and usage, once a request, go through encoding/json itself.
type sseWriter struct {
	w       gin.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
	// head starts every chunk of the answer: `data: {"id":...,"model":...,"choices":[`.
	head    []byte
	started bool
	// err is the first write error: the client is gone or stopped reading.
	err error
}

func newSSEWriter(w gin.ResponseWriter, timeout time.Duration, a *answer) *sseWriter {
	s := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
	h := make([]byte, 0, 128+len(a.id)+len(a.model))
	h = append(h, `data: {"id":`...)
	h = appendJSONString(h, a.id)
	h = append(h, `,"object":"`+openai.ObjectChatCompletionChunk+`","created":`...)
	h = strconv.AppendInt(h, a.created, 10)
	h = append(h, `,"model":`...)
	h = appendJSONString(h, a.model)
	h = append(h, `,"choices":[`...)
	s.head = h
	return s
}

// role writes the first chunk: the assistant's role and empty content, and the prompt's token
// ids when they are not nil (asked for).
func (s *sseWriter) role(promptIDs []int32) error {
	s.buf.Reset()
	s.buf.Write(s.head)
	s.buf.WriteString(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]`)
	if promptIDs != nil {
		s.buf.WriteString(`,"prompt_token_ids":`)
		s.buf.Write(appendIDs(s.buf.AvailableBuffer(), promptIDs))
	}
	s.buf.WriteString("}\n\n")
	return s.write(s.buf.Bytes())
}

// delta writes a chunk of answer text, the logprobs entries of its tokens when asked for
// (those go through encoding/json: they are asked for rarely, and are not on the hot path), and
// its token ids when they are not nil (asked for).
func (s *sseWriter) delta(text string, lp *openai.Logprobs, ids []int32) error {
	s.buf.Reset()
	s.buf.Write(s.head)
	s.buf.WriteString(`{"index":0,"delta":{"content":`)
	s.buf.Write(appendJSONString(s.buf.AvailableBuffer(), text))
	s.buf.WriteString(`}`)
	if lp != nil {
		s.buf.WriteString(`,"logprobs":`)
		s.buf.Write(appendJSON(s.buf.AvailableBuffer(), lp))
	}
	if ids != nil {
		s.buf.WriteString(`,"token_ids":`)
		s.buf.Write(appendIDs(s.buf.AvailableBuffer(), ids))
	}
	s.buf.WriteString(`,"finish_reason":null}]}` + "\n\n")
	return s.write(s.buf.Bytes())
}

// finish writes the last events in one write: the finish chunk with the token ids no delta
// carried (when not nil: asked for) and the iris extension, the usage chunk when asked for, and
// the stream's terminator. The client's latency ends with [DONE]; one write spares it two
// flushes (two loopback round trips of the kernel).
func (s *sseWriter) finish(reason string, ids []int32, iris *openai.Iris, usage *openai.Usage) error {
	s.buf.Reset()
	s.buf.Write(s.head)
	s.buf.WriteString(`{"index":0,"delta":{},`)
	if ids != nil {
		s.buf.WriteString(`"token_ids":`)
		s.buf.Write(appendIDs(s.buf.AvailableBuffer(), ids))
		s.buf.WriteString(`,`)
	}
	s.buf.WriteString(`"finish_reason":`)
	s.buf.Write(appendJSONString(s.buf.AvailableBuffer(), reason))
	s.buf.WriteString(`}],"iris":`)
	s.buf.Write(appendJSON(s.buf.AvailableBuffer(), iris))
	s.buf.WriteString("}\n\n")
	if usage != nil {
		s.buf.Write(s.head)
		s.buf.WriteString(`],"usage":`)
		s.buf.Write(appendJSON(s.buf.AvailableBuffer(), usage))
		s.buf.WriteString("}\n\n")
	}
	s.buf.WriteString("data: [DONE]\n\n")
	return s.write(s.buf.Bytes())
}

func (s *sseWriter) failed(e *middleware.HTTPError) {
	s.buf.Reset()
	if middleware.WriteSSEError(&s.buf, e) == nil {
		_ = s.write(s.buf.Bytes())
	}
}

func (s *sseWriter) write(b []byte) error {
	if s.err != nil {
		return s.err
	}
	s.started = true
	if s.timeout > 0 {
		// Not every writer supports deadlines (a test recorder does not); that is fine.
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
		return err
	}
	return nil
}

// appendJSONString appends s as a JSON string, byte for byte as an encoding/json Encoder with
// SetEscapeHTML(false) writes it. Printable ASCII, valid UTF-8 and the usual escapes are written
// here; a string with anything rarer (other control characters, invalid UTF-8, U+2028, U+2029)
// is handed to encoding/json whole.
func appendJSONString(dst []byte, s string) []byte {
	start := len(dst)
	dst = append(dst, '"')
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 || r == '\u2028' || r == '\u2029' {
				return appendJSON(dst[:start], s)
			}
			i += n
			continue
		}
		var esc string
		switch {
		case c >= 0x20 && c != '"' && c != '\\':
			i++
			continue
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '\n':
			esc = `\n`
		case c == '\r':
			esc = `\r`
		case c == '\t':
			esc = `\t`
		default:
			return appendJSON(dst[:start], s)
		}
		dst = append(dst, s[last:i]...)
		dst = append(dst, esc...)
		i++
		last = i
	}
	dst = append(dst, s[last:]...)
	return append(dst, '"')
}

// appendIDs appends ids as a JSON array of integers.
func appendIDs(dst []byte, ids []int32) []byte {
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	return append(dst, ']')
}

// appendJSON appends v as an encoding/json Encoder with SetEscapeHTML(false) writes it, without
// the newline; a value that does not encode (none of the API's types) appends null.
func appendJSON(dst []byte, v any) []byte {
	b := bytes.NewBuffer(dst)
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return append(dst, "null"...)
	}
	out := b.Bytes()
	return out[:len(out)-1]
}
