package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// ErrMalformed marks a message that does not decode as this ABI version says it must.
var ErrMalformed = errors.New("malformed message")

// Wire format
//
// Every message is a kind byte, a minor-version byte ([Minor]) and the fields of its type in
// declaration order, with nothing after them:
//
//	int      zig-zag varint (encoding/binary's AppendVarint)
//	bool     one byte, 0 or 1
//	float64  8 bytes, IEEE 754 little-endian
//	string   uvarint byte length, then UTF-8 bytes
//	pointer  one byte 0 (nil) or 1, then the value
//	slice    uvarint count, then the items
//	[3]T     three items
//	param    a type byte ('i' int64, 'f' float64, 's' string, 'b' bool), then the value
//	params   uvarint count, then (string name, param) pairs, names sorted and unique
//
// A response is the kind byte 'O' and a message, or 'E', the minor byte and an [Error] (kind,
// code and message as strings). The format is hand-written, not reflection-driven: a Go guest
// under wazero spends about 140 µs json-encoding a Description and about 5 µs on this.

// Minor is the minor version of the wire format, which ABI 1 and 2 share. A decoder accepts
// messages of its own minor version or older; fields added in a later minor go at the end of
// their message (or of the plan, for views), and a host writes its requests at the plugin's
// minor ([EncodeAt], [Description.Minor]).
//
//	minor 0  the first v1 format
//	minor 1  FrameRequest.System (a presence byte, then the string)
//	minor 2  ABI 2: Plan.Views (a count, then the views) at the end of every plan, and
//	         Frame.Spans (a count, then the spans) at the end of a frame
//	minor 3  View.Mask and View.FloatResize (each a presence byte, then the value) at the end
//	         of every view, and Plan.SeparatorTokens after the views of a plan that has any (a
//	         plan without views is the same bytes as at minor 2)
//	minor 4  View.PreResize (a presence byte, then the value) at the end of every view (a plan
//	         without views is the same bytes as at minor 2 and 3)
const Minor = 4

// Message kinds.
const (
	kindDescription  = 'D'
	kindPlanRequest  = 'Q'
	kindPlan         = 'P'
	kindFrameRequest = 'R'
	kindFrame        = 'F'
	kindOK           = 'O'
	kindError        = 'E'
)

// Encode encodes a message: a *PlanRequest, *Plan, *FrameRequest, *Frame or *Description.
func Encode(v any) ([]byte, error) { return encode(make([]byte, 0, 256), v, Minor) }

// EncodeAt encodes a message at an older minor version, for a peer that speaks only that one:
// the fields of later minors are left out. A field set that the minor cannot carry is an error,
// never silently dropped.
func EncodeAt(v any, minor int) ([]byte, error) {
	if minor < 0 || minor > Minor {
		return nil, fmt.Errorf("encoding %T: no wire minor %d (this side speaks up to %d)", v, minor, Minor)
	}
	return encode(make([]byte, 0, 256), v, byte(minor))
}

// encode appends the message v to b.
func encode(b []byte, v any, minor byte) ([]byte, error) {
	w := &writer{b: b, minor: minor}
	w.message(v)
	if w.err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, w.err)
	}
	if len(w.b) > MaxMessageBytes {
		return nil, fmt.Errorf("encoding %T: %d bytes is over the %d-byte message limit", v, len(w.b), MaxMessageBytes)
	}
	return w.b, nil
}

// Decode decodes a message into v (a pointer to one of the types Encode takes). Anything that
// is not exactly one well-formed message of that type is an error wrapping [ErrMalformed].
func Decode(b []byte, v any) error {
	if len(b) > MaxMessageBytes {
		return fmt.Errorf("%w: %d bytes is over the %d-byte message limit", ErrMalformed, len(b), MaxMessageBytes)
	}
	r := &reader{b: b}
	r.message(v)
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d bytes after the message", len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("%w: decoding %T: %w", ErrMalformed, v, r.err)
	}
	return nil
}

// EncodeResult wraps a successful result (a Plan, Frame or Description) in a response.
func EncodeResult[T any](v T) ([]byte, error) {
	return encode(append(make([]byte, 0, 256), kindOK), &v, Minor)
}

// EncodeError wraps a typed error in a response.
func EncodeError(e *Error) []byte {
	w := &writer{b: []byte{kindError, Minor}}
	msg := e.Message
	if len(msg) > MaxErrorMessage {
		msg = msg[:MaxErrorMessage]
	}
	w.str(string(e.Kind))
	w.str(e.Code)
	w.str(msg)
	return w.b
}

// MaxErrorMessage bounds Error.Message on the wire.
const MaxErrorMessage = 4096

// DecodeResponse decodes a response. A well-formed error response returns its *[Error]; a
// message that breaks the contract returns an error wrapping [ErrMalformed].
func DecodeResponse[T any](b []byte) (T, error) {
	var v T
	if len(b) == 0 {
		return v, fmt.Errorf("%w: empty response", ErrMalformed)
	}
	switch b[0] {
	case kindOK:
		if err := Decode(b[1:], &v); err != nil {
			return v, err
		}
		return v, nil
	case kindError:
		r := &reader{b: b[1:]}
		r.minor()
		e := &Error{Kind: ErrorKind(r.str()), Code: r.str(), Message: r.str()}
		if r.err == nil && len(r.b) > 0 {
			r.fail("%d bytes after the error", len(r.b))
		}
		if r.err != nil {
			return v, fmt.Errorf("%w: decoding an error response: %w", ErrMalformed, r.err)
		}
		if err := e.validate(); err != nil {
			return v, err
		}
		return v, e
	}
	return v, fmt.Errorf("%w: response kind 0x%02x is neither 'O' nor 'E'", ErrMalformed, b[0])
}

func (e *Error) validate() error {
	if e.Kind != Refusal && e.Kind != Failure {
		return fmt.Errorf("%w: error kind %q is neither %q nor %q", ErrMalformed, e.Kind, Refusal, Failure)
	}
	if !validCode(e.Code) {
		return fmt.Errorf("%w: error code %q is not a snake_case code of at most 64 bytes", ErrMalformed, e.Code)
	}
	if len(e.Message) > MaxErrorMessage {
		return fmt.Errorf("%w: error message of %d bytes is over %d", ErrMalformed, len(e.Message), MaxErrorMessage)
	}
	return nil
}

// writer appends a message; err records the first value it cannot encode.
type writer struct {
	b     []byte
	minor byte
	err   error
}

func (w *writer) int(v int)      { w.b = binary.AppendVarint(w.b, int64(v)) }
func (w *writer) uint(v int)     { w.b = binary.AppendUvarint(w.b, uint64(v)) }
func (w *writer) f64(v float64)  { w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(v)) }
func (w *writer) str(s string)   { w.uint(len(s)); w.b = append(w.b, s...) }
func (w *writer) present(p bool) { w.bool(p) }

func (w *writer) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

func (w *writer) strs(s []string) {
	w.uint(len(s))
	for _, x := range s {
		w.str(x)
	}
}

func (w *writer) f64s(v [3]float64) {
	for _, x := range v {
		w.f64(x)
	}
}

func (w *writer) size(s Size) { w.int(s.Width); w.int(s.Height) }
func (w *writer) grid(g Grid) { w.int(g.T); w.int(g.H); w.int(g.W) }

func (w *writer) param(name string, v any) {
	switch x := v.(type) {
	case int:
		w.b = append(w.b, 'i')
		w.int(x)
	case int64:
		w.b = append(w.b, 'i')
		w.b = binary.AppendVarint(w.b, x)
	case int32:
		w.b = append(w.b, 'i')
		w.int(int(x))
	case float64:
		w.b = append(w.b, 'f')
		w.f64(x)
	case string:
		w.b = append(w.b, 's')
		w.str(x)
	case bool:
		w.b = append(w.b, 'b')
		w.bool(x)
	default:
		if w.err == nil {
			w.err = fmt.Errorf("param %s: %T is not an int, float, string or bool", name, v)
		}
	}
}

func (w *writer) params(m map[string]any) {
	names := sortedKeys(m)
	w.uint(len(names))
	for _, k := range names {
		w.str(k)
		w.param(k, m[k])
	}
}

func (w *writer) plan(p *Plan) {
	w.size(p.Source)
	w.rect(p.Crop)
	w.resize(p.Resize)
	w.pad(p.Pad)
	w.normalize(p.Normalize)
	w.patches(p.Patches)
	w.grid(p.Grid)
	w.grid(p.LLMGrid)
	w.int(p.ImageTokens)
	switch {
	case w.minor >= 2:
		w.uint(len(p.Views))
		for i := range p.Views {
			w.view(&p.Views[i])
		}
	case len(p.Views) > 0:
		w.fail("a plan with views needs wire minor 2, the peer speaks %d", w.minor)
	}
	switch {
	case len(p.Views) == 0 && p.SeparatorTokens != 0:
		w.fail("a plan without views has no separator tokens (it has %d)", p.SeparatorTokens)
	case w.minor >= 3 && len(p.Views) > 0:
		w.int(p.SeparatorTokens)
	case w.minor < 3 && p.needsMinor3():
		w.fail("a plan with patch masks, float resizes or separator tokens needs wire minor 3, the peer speaks %d", w.minor)
	}
	if w.minor < 4 && p.needsMinor4() {
		w.fail("a plan with a view resized twice (pre-resize) needs wire minor 4, the peer speaks %d", w.minor)
	}
}

// needsMinor4 reports whether the plan uses a field of wire minor 4.
func (p *Plan) needsMinor4() bool {
	for i := range p.Views {
		if p.Views[i].PreResize != nil {
			return true
		}
	}
	return false
}

// needsMinor3 reports whether the plan uses a field of wire minor 3.
func (p *Plan) needsMinor3() bool {
	if p.SeparatorTokens != 0 {
		return true
	}
	for i := range p.Views {
		if p.Views[i].Mask != nil || p.Views[i].FloatResize != nil {
			return true
		}
	}
	return false
}

func (w *writer) rect(r *Rect) {
	w.present(r != nil)
	if r != nil {
		w.int(r.X)
		w.int(r.Y)
		w.int(r.Width)
		w.int(r.Height)
	}
}

func (w *writer) resize(r *Resize) {
	w.present(r != nil)
	if r != nil {
		w.int(r.Width)
		w.int(r.Height)
		w.str(r.Filter)
		w.str(r.Flavor)
		w.bool(r.Antialias)
	}
}

func (w *writer) pad(d *Pad) {
	w.present(d != nil)
	if d != nil {
		w.int(d.Top)
		w.int(d.Right)
		w.int(d.Bottom)
		w.int(d.Left)
		w.b = append(w.b, d.Color[:]...)
	}
}

func (w *writer) normalize(n Normalize) {
	w.f64(n.Rescale)
	w.f64s(n.Mean)
	w.f64s(n.Std)
	w.str(n.Flavor)
}

func (w *writer) patches(p Patches) {
	w.int(p.Size)
	w.int(p.Temporal)
	w.int(p.Merge)
	w.str(p.Layout)
}

func (w *writer) view(v *View) {
	w.rect(v.Crop)
	w.resize(v.Resize)
	w.rect(v.Region)
	w.pad(v.Pad)
	w.normalize(v.Normalize)
	w.patches(v.Patches)
	w.grid(v.Grid)
	w.grid(v.LLMGrid)
	w.int(v.ImageTokens)
	if w.minor >= 3 {
		w.rect(v.Mask)
		w.resize(v.FloatResize)
	}
	if w.minor >= 4 {
		w.resize(v.PreResize)
	}
}

func (w *writer) span(s *ImageSpan) {
	w.strs(s.Open)
	w.str(s.Pad)
	w.int(s.Count)
	w.strs(s.Close)
}

func (w *writer) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
	}
}

func (w *writer) message(v any) {
	switch m := v.(type) {
	case *PlanRequest:
		w.b = append(w.b, kindPlanRequest, w.minor)
		w.int(m.Image.Width)
		w.int(m.Image.Height)
		w.str(m.Image.Format)
		w.bool(m.Image.HasAlpha)
		w.params(m.Params)
	case *Plan:
		w.b = append(w.b, kindPlan, w.minor)
		w.plan(m)
	case *FrameRequest:
		w.b = append(w.b, kindFrameRequest, w.minor)
		w.str(m.Question)
		w.bool(m.TextFirst)
		w.plan(&m.Plan)
		w.params(m.Params)
		switch {
		case w.minor >= 1:
			w.present(m.System != nil)
			if m.System != nil {
				w.str(*m.System)
			}
		case m.System != nil:
			w.fail("a system message needs wire minor 1, the peer speaks %d", w.minor)
		}
	case *Frame:
		w.b = append(w.b, kindFrame, w.minor)
		w.str(m.Before)
		w.span(&m.Span)
		w.str(m.After)
		w.uint(len(m.StopTokenIDs))
		for _, id := range m.StopTokenIDs {
			w.int(int(id))
		}
		w.bool(m.Hints.SkipSpecialTokens)
		switch {
		case w.minor >= 2:
			w.uint(len(m.Spans))
			for i := range m.Spans {
				w.span(&m.Spans[i])
			}
		case len(m.Spans) > 0:
			w.fail("a frame with several spans needs wire minor 2, the peer speaks %d", w.minor)
		}
	case *Description:
		w.b = append(w.b, kindDescription, w.minor)
		w.int(m.ABI)
		w.str(m.Family)
		w.strs(m.Tasks)
		w.uint(len(m.Params))
		for _, p := range m.Params {
			w.str(p.Name)
			w.str(p.Type)
			w.param(p.Name, p.Default)
			w.str(p.Doc)
		}
		w.f64(m.Limits.MaxAspectRatio)
		w.int(m.Limits.MinImageTokens)
		w.int(m.Limits.MaxImageTokens)
	default:
		w.fail("%T is not an ABI message", v)
	}
}

// reader consumes a message; after the first error every read returns a zero value.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail("message ends early")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) int() int {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

// uint reads a count or length; it can never exceed the bytes left, so a hostile count cannot
// make the decoder allocate more than the message's size.
func (r *reader) uint() int {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	if v > uint64(len(r.b)) {
		r.fail("count %d is over the %d bytes left", v, len(r.b))
		return 0
	}
	return int(v)
}

// count reads a count of at most limit items.
func (r *reader) count(limit int, what string) int {
	n := r.uint()
	if n > limit {
		r.fail("%d %s, at most %d", n, what, limit)
		return 0
	}
	return n
}

func (r *reader) bool() bool {
	switch c := r.byte(); c {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail("bool byte %d", c)
		return false
	}
}

func (r *reader) f64() float64 {
	if len(r.b) < 8 {
		r.fail("message ends early")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

func (r *reader) str() string {
	n := r.uint()
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	if !utf8.ValidString(s) {
		r.fail("string is not UTF-8")
		return ""
	}
	return s
}

func (r *reader) strs() []string {
	n := r.uint()
	if n == 0 {
		return nil
	}
	s := make([]string, n)
	for i := range s {
		s[i] = r.str()
	}
	return s
}

func (r *reader) f64s() (v [3]float64) {
	for i := range v {
		v[i] = r.f64()
	}
	return v
}

func (r *reader) rgb() (c RGB) {
	for i := range c {
		c[i] = r.byte()
	}
	return c
}

func (r *reader) present() bool { return r.bool() }
func (r *reader) size() Size    { return Size{Width: r.int(), Height: r.int()} }
func (r *reader) grid() Grid    { return Grid{T: r.int(), H: r.int(), W: r.int()} }

func (r *reader) param() any {
	switch t := r.byte(); t {
	case 'i':
		v, n := binary.Varint(r.b)
		if n <= 0 {
			r.fail("bad varint")
			return nil
		}
		r.b = r.b[n:]
		return v
	case 'f':
		return r.f64()
	case 's':
		return r.str()
	case 'b':
		return r.bool()
	default:
		r.fail("param type byte 0x%02x", t)
		return nil
	}
}

func (r *reader) params() map[string]any {
	n := r.uint()
	if n == 0 {
		return nil
	}
	m := make(map[string]any, n)
	last := ""
	for i := range n {
		k := r.str()
		if r.err == nil && i > 0 && k <= last {
			r.fail("param names out of order or repeated at %q", k)
		}
		last = k
		m[k] = r.param()
	}
	return m
}

// minor reads a message's minor version; the fields it reads next depend on it.
func (r *reader) minor() int {
	v := r.byte()
	if r.err == nil && v > Minor {
		r.fail("wire format v%d.%d is newer than this side's v%d.%d", Version, v, Version, Minor)
	}
	return int(v)
}

func (r *reader) rect() *Rect {
	if !r.present() {
		return nil
	}
	return &Rect{X: r.int(), Y: r.int(), Width: r.int(), Height: r.int()}
}

func (r *reader) resize() *Resize {
	if !r.present() {
		return nil
	}
	return &Resize{Width: r.int(), Height: r.int(), Filter: r.str(), Flavor: r.str(), Antialias: r.bool()}
}

func (r *reader) pad() *Pad {
	if !r.present() {
		return nil
	}
	return &Pad{Top: r.int(), Right: r.int(), Bottom: r.int(), Left: r.int(), Color: r.rgb()}
}

func (r *reader) normalize() Normalize {
	return Normalize{Rescale: r.f64(), Mean: r.f64s(), Std: r.f64s(), Flavor: r.str()}
}

func (r *reader) patches() Patches {
	return Patches{Size: r.int(), Temporal: r.int(), Merge: r.int(), Layout: r.str()}
}

func (r *reader) plan(p *Plan, minor int) {
	p.Source = r.size()
	p.Crop = r.rect()
	p.Resize = r.resize()
	p.Pad = r.pad()
	p.Normalize = r.normalize()
	p.Patches = r.patches()
	p.Grid = r.grid()
	p.LLMGrid = r.grid()
	p.ImageTokens = r.int()
	if minor < 2 {
		return
	}
	// A count over the cap is refused before anything is allocated: a view is some 200 bytes
	// in memory and a few dozen on the wire.
	if n := r.count(MaxViews, "views"); n > 0 {
		p.Views = make([]View, n)
		for i := range p.Views {
			v := &p.Views[i]
			v.Crop = r.rect()
			v.Resize = r.resize()
			v.Region = r.rect()
			v.Pad = r.pad()
			v.Normalize = r.normalize()
			v.Patches = r.patches()
			v.Grid = r.grid()
			v.LLMGrid = r.grid()
			v.ImageTokens = r.int()
			if minor >= 3 {
				v.Mask = r.rect()
				v.FloatResize = r.resize()
			}
			if minor >= 4 {
				v.PreResize = r.resize()
			}
		}
		if minor >= 3 {
			p.SeparatorTokens = r.int()
		}
	}
}

func (r *reader) span() ImageSpan {
	return ImageSpan{Open: r.strs(), Pad: r.str(), Count: r.int(), Close: r.strs()}
}

func (r *reader) message(v any) {
	var want byte
	switch v.(type) {
	case *PlanRequest:
		want = kindPlanRequest
	case *Plan:
		want = kindPlan
	case *FrameRequest:
		want = kindFrameRequest
	case *Frame:
		want = kindFrame
	case *Description:
		want = kindDescription
	default:
		r.fail("%T is not an ABI message", v)
		return
	}
	if k := r.byte(); r.err == nil && k != want {
		r.fail("message kind %q, want %q", k, want)
	}
	minor := r.minor()
	switch m := v.(type) {
	case *PlanRequest:
		*m = PlanRequest{Image: ImageHeader{Width: r.int(), Height: r.int(), Format: r.str(), HasAlpha: r.bool()}}
		m.Params = r.params()
	case *Plan:
		*m = Plan{}
		r.plan(m, minor)
	case *FrameRequest:
		*m = FrameRequest{Question: r.str(), TextFirst: r.bool()}
		r.plan(&m.Plan, minor)
		m.Params = r.params()
		if minor >= 1 && r.present() {
			sys := r.str()
			m.System = &sys
		}
	case *Frame:
		*m = Frame{Before: r.str()}
		m.Span = r.span()
		m.After = r.str()
		if n := r.uint(); n > 0 {
			m.StopTokenIDs = make([]int32, n)
			for i := range m.StopTokenIDs {
				id := r.int()
				if id < math.MinInt32 || id > math.MaxInt32 {
					r.fail("token id %d is out of int32 range", id)
				}
				m.StopTokenIDs[i] = int32(id)
			}
		}
		m.Hints.SkipSpecialTokens = r.bool()
		if minor >= 2 {
			if n := r.count(MaxSpans, "image spans"); n > 0 {
				m.Spans = make([]ImageSpan, n)
				for i := range m.Spans {
					m.Spans[i] = r.span()
				}
			}
		}
	case *Description:
		*m = Description{ABI: r.int(), Minor: minor, Family: r.str(), Tasks: r.strs()}
		if n := r.uint(); n > 0 {
			m.Params = make([]ParamSpec, n)
			for i := range m.Params {
				m.Params[i] = ParamSpec{Name: r.str(), Type: r.str(), Default: r.param(), Doc: r.str()}
			}
		}
		m.Limits = Limits{MaxAspectRatio: r.f64(), MinImageTokens: r.int(), MaxImageTokens: r.int()}
	}
}
