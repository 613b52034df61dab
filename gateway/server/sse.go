package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"net/http"
	"slices"
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
// The chunks are written by hand rather than by encoding an [openai.ChatCompletionChunk]: a
// content delta is written between two decode steps, and reflection cost 20 us of the ~25 us a
// delta took before its write. The bytes are those encoding/json writes (the golden transcripts
// and FuzzAppendJSONString hold them to it).
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

// role writes the first chunk: the assistant's role and empty content.
func (s *sseWriter) role() error {
	s.buf.Reset()
	s.buf.Write(s.head)
	s.buf.WriteString(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	return s.write(s.buf.Bytes())
}

// delta writes a chunk of answer text.
func (s *sseWriter) delta(text string) error {
	s.buf.Reset()
	s.buf.Write(s.head)
	s.buf.WriteString(`{"index":0,"delta":{"content":`)
	s.buf.Write(appendJSONString(s.buf.AvailableBuffer(), text))
	s.buf.WriteString(`},"finish_reason":null}]}` + "\n\n")
	return s.write(s.buf.Bytes())
}

// finish writes the last events in one write: the finish chunk with the iris extension, the
// usage chunk when asked for, and the stream's terminator. The client's latency ends with
// [DONE]; one write spares it two flushes (two loopback round trips of the kernel).
func (s *sseWriter) finish(reason string, iris *openai.Iris, usage *openai.Usage) error {
	s.buf.Reset()
	s.buf.Write(s.head)
	s.buf.WriteString(`{"index":0,"delta":{},"finish_reason":`)
	s.buf.Write(appendJSONString(s.buf.AvailableBuffer(), reason))
	s.buf.WriteString(`}],"iris":`)
	s.buf.Write(appendIris(s.buf.AvailableBuffer(), iris))
	s.buf.WriteString("}\n\n")
	if usage != nil {
		s.buf.Write(s.head)
		s.buf.WriteString(`],"usage":`)
		s.buf.Write(appendUsage(s.buf.AvailableBuffer(), usage))
		s.buf.WriteString("}\n\n")
	}
	s.buf.WriteString("data: [DONE]\n\n")
	return s.write(s.buf.Bytes())
}

// appendIris appends the iris extension as encoding/json writes it: timings in key order.
func appendIris(b []byte, x *openai.Iris) []byte {
	b = append(b, '{')
	if im := x.Image; im != nil {
		b = append(b, `"image":{"sha256":`...)
		b = appendJSONString(b, im.SHA256)
		b = append(b, `,"format":`...)
		b = appendJSONString(b, im.Format)
		b = append(b, `,"width":`...)
		b = strconv.AppendInt(b, int64(im.Width), 10)
		b = append(b, `,"height":`...)
		b = strconv.AppendInt(b, int64(im.Height), 10)
		b = append(b, "},"...)
	}
	b = append(b, `"bundle":{"name":`...)
	b = appendJSONString(b, x.Bundle.Name)
	b = append(b, `,"digest":`...)
	b = appendJSONString(b, x.Bundle.Digest)
	b = append(b, `},"timings_ms":`...)
	if x.TimingsMS == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for i, k := range slices.Sorted(maps.Keys(x.TimingsMS)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONFloat(b, x.TimingsMS[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendUsage(b []byte, u *openai.Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	if d := u.PromptTokensDetails; d != nil {
		b = append(b, `,"prompt_tokens_details":{"image_tokens":`...)
		b = strconv.AppendInt(b, int64(d.ImageTokens), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendJSONFloat appends f as encoding/json does in the range a stage time in milliseconds
// takes; outside it (exponent notation, or no JSON form at all, which is written as 0) it asks
// encoding/json.
func appendJSONFloat(b []byte, f float64) []byte {
	if a := math.Abs(f); a == 0 || a >= 1e-6 && a < 1e21 {
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	}
	out, err := json.Marshal(f)
	if err != nil {
		return append(b, '0')
	}
	return append(b, out...)
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
				return appendJSONStringSlow(dst[:start], s)
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
			return appendJSONStringSlow(dst[:start], s)
		}
		dst = append(dst, s[last:i]...)
		dst = append(dst, esc...)
		i++
		last = i
	}
	dst = append(dst, s[last:]...)
	return append(dst, '"')
}

func appendJSONStringSlow(dst []byte, s string) []byte {
	b := bytes.NewBuffer(dst)
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	out := b.Bytes()
	return out[:len(out)-1]
}
