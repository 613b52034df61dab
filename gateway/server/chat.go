package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/iris-vlm/iris/core"
	"github.com/iris-vlm/iris/gateway/middleware"
	"github.com/iris-vlm/iris/gateway/openai"
)

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(c *gin.Context) {
	start := time.Now()
	defer s.idle.start()()
	body, herr := s.readBody(c)
	if herr != nil {
		middleware.Render(c, herr)
		return
	}
	req, err := openai.ParseChatRequest(body)
	if err != nil {
		middleware.Render(c, fromParse(err))
		return
	}
	middleware.SetBundle(c, req.Model)

	ctx := c.Request.Context()
	if s.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
	}
	image, herr := s.image(ctx, req)
	if herr != nil {
		middleware.Render(c, herr)
		return
	}
	creq := openai.CoreRequest(req, image, middleware.RequestIDOf(c), middleware.CorrelationIDOf(c))
	a := &answer{id: "chatcmpl-" + creq.ID, model: req.Model, created: s.now().Unix(), start: start}
	if req.Stream {
		s.stream(ctx, c, creq, req, a)
		return
	}
	s.complete(ctx, c, creq, req, a)
}

// answer is what every response of one request shares.
type answer struct {
	id         string
	model      string
	created    int64
	start      time.Time
	firstToken time.Time
}

func (a *answer) delta(ev core.Event) {
	if ev.Kind == core.EventDelta && a.firstToken.IsZero() {
		a.firstToken = time.Now()
	}
}

// complete answers with one chat.completion object.
func (s *Server) complete(ctx context.Context, c *gin.Context, creq core.Request, req *openai.Request, a *answer) {
	res, err := s.backend.Generate(ctx, creq, func(ev core.Event) error {
		a.delta(ev)
		return nil
	})
	if err != nil {
		middleware.Render(c, fromCore(err, req))
		return
	}
	s.metrics.observe(res, a)
	out := openai.ChatCompletion{
		ID:      a.id,
		Object:  openai.ObjectChatCompletion,
		Created: a.created,
		Model:   a.model,
		Choices: []openai.Choice{{
			Message:      openai.ResponseMessage{Role: "assistant", Content: res.Text},
			Logprobs:     logprobsOf(req, res.Logprobs),
			FinishReason: string(res.FinishReason),
		}},
		Usage: usage(res.Usage),
		Iris:  irisOf(res),
	}
	if req.ReturnTokenIDs {
		out.PromptTokenIDs = nonNil(res.PromptIDs)
		out.Choices[0].TokenIDs = generatedIDs(res)
	}
	writeJSON(c, http.StatusOK, out)
}

// generatedIDs are the answer's token ids as vLLM returns them: the stop token that ended the
// answer included (so one more than usage.completion_tokens, which counts the answer alone).
func generatedIDs(res *core.Result) []int32 {
	ids := make([]int32, 0, len(res.TokenIDs)+1)
	ids = append(ids, res.TokenIDs...)
	if res.StopToken != nil {
		ids = append(ids, *res.StopToken)
	}
	return ids
}

// nonNil is ids, an empty list rather than none: asked-for ids are always sent.
func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// stream answers with server-sent events. Nothing is written before the runtime's EventStart,
// so every refusal before it is an ordinary HTTP error; a failure after it is an SSE error event.
func (s *Server) stream(ctx context.Context, c *gin.Context, creq core.Request, req *openai.Request, a *answer) {
	w := newSSEWriter(c.Writer, s.cfg.StreamWriteTimeout, a)
	// The connection may serve another request after this one: leave it without our deadline.
	defer func() { _ = w.rc.SetWriteDeadline(time.Time{}) }()
	begin := func(promptIDs []int32) error {
		h := c.Writer.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		c.Status(http.StatusOK)
		return w.role(promptIDs)
	}
	streamed := 0 // token ids sent in deltas; the finish chunk has the rest
	res, err := s.backend.Generate(ctx, creq, func(ev core.Event) error {
		a.delta(ev)
		if !w.started && (ev.Kind == core.EventStart || ev.Kind == core.EventDelta) {
			// A delta implies the start, even from a task that skipped the start event.
			var promptIDs []int32
			if req.ReturnTokenIDs && ev.Kind == core.EventStart {
				promptIDs = nonNil(ev.PromptIDs)
			}
			if err := begin(promptIDs); err != nil {
				return err
			}
		}
		if ev.Kind != core.EventDelta {
			return nil
		}
		var ids []int32
		if req.ReturnTokenIDs {
			ids = nonNil(ev.TokenIDs)
			streamed += len(ids)
		}
		// With logprobs or token ids, a delta without text still carries its tokens'.
		if ev.Text != "" || len(ev.Logprobs) > 0 || len(ids) > 0 {
			return w.delta(ev.Text, logprobsOf(req, ev.Logprobs), ids)
		}
		return nil
	})
	if err != nil {
		herr := fromCore(err, req)
		if w.err != nil {
			herr = clientClosed(w.err)
		}
		if !w.started {
			middleware.Render(c, herr)
			return
		}
		middleware.Record(c, herr)
		if herr.Status != middleware.StatusClientClosed {
			w.failed(herr)
		}
		return
	}
	// The metrics wait until the client has its answer.
	defer s.metrics.observe(res, a)
	if !w.started {
		// A task that emits no start event still gets a well-formed stream.
		var promptIDs []int32
		if req.ReturnTokenIDs {
			promptIDs = nonNil(res.PromptIDs)
		}
		if err := begin(promptIDs); err != nil {
			middleware.Record(c, clientClosed(err))
			return
		}
	}
	var u *openai.Usage
	if req.IncludeUsage {
		u = usage(res.Usage)
	}
	var ids []int32
	if req.ReturnTokenIDs {
		// The stop token, and every id a task did not report in its deltas.
		all := generatedIDs(res)
		ids = all[min(streamed, len(all)):]
	}
	if err := w.finish(string(res.FinishReason), ids, irisOf(res), u); err != nil {
		middleware.Record(c, clientClosed(err))
	}
}

// logprobsOf is the choice's logprobs: present (content possibly empty) exactly when asked for.
func logprobsOf(req *openai.Request, entries []core.TokenLogprob) *openai.Logprobs {
	if !req.Logprobs {
		return nil
	}
	if entries == nil {
		entries = []core.TokenLogprob{}
	}
	return openai.LogprobsOf(entries)
}

func clientClosed(err error) *middleware.HTTPError {
	return &middleware.HTTPError{Status: middleware.StatusClientClosed, Code: "client_closed",
		Message: "the client went away", Err: err}
}

// readBody reads the request body under the body limit.
func (s *Server) readBody(c *gin.Context) ([]byte, *middleware.HTTPError) {
	var body []byte
	var err error
	if n := c.Request.ContentLength; n > 0 && n <= s.cfg.MaxBodyBytes {
		body = make([]byte, n)
		_, err = io.ReadFull(c.Request.Body, body)
	} else {
		body, err = io.ReadAll(c.Request.Body)
	}
	switch {
	case err == nil:
		return body, nil
	case middleware.IsTooLarge(err):
		return nil, middleware.TooLarge(s.cfg.MaxBodyBytes)
	case c.Request.Context().Err() != nil:
		return nil, clientClosed(err)
	}
	return nil, &middleware.HTTPError{Status: http.StatusBadRequest, Code: "invalid_body",
		Message: "the request body could not be read", Err: err}
}

// image returns the request's image bytes: decoded from its data URL, or fetched when the URL
// is remote and allowed.
func (s *Server) image(ctx context.Context, req *openai.Request) ([]byte, *middleware.HTTPError) {
	img := req.Image
	switch {
	case img == nil:
		return nil, nil
	case img.URL == nil:
		return img.Data, nil
	case s.fetcher == nil:
		return nil, badRequest(openai.CodeImageURLNotAllowed, img.Param,
			"remote image URLs are disabled on this server; send the image inline as a data: URL")
	}
	// Do not fetch for a model that cannot answer.
	if _, ok := s.backend.Model(req.Model); !ok {
		return nil, fromCore(core.Errorf(core.KindNotFound, "model_not_found", "model", "the model %q does not exist", req.Model), req)
	}
	return s.fetcher.fetch(ctx, img.URL, img.Param)
}

func writeJSON(c *gin.Context, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		middleware.Render(c, &middleware.HTTPError{Status: http.StatusInternalServerError, Code: "internal_error", Message: "internal error", Err: err})
		return
	}
	c.Data(status, "application/json", buf.Bytes())
}

func usage(u core.Usage) *openai.Usage {
	return &openai.Usage{
		PromptTokens:        u.PromptTokens,
		CompletionTokens:    u.CompletionTokens,
		TotalTokens:         u.PromptTokens + u.CompletionTokens,
		PromptTokensDetails: &openai.PromptTokensDetails{ImageTokens: u.ImageTokens},
	}
}

func irisOf(res *core.Result) *openai.Iris {
	out := &openai.Iris{
		Bundle:    openai.IrisBundle{Name: res.Bundle.Name, Digest: res.Bundle.Digest},
		TimingsMS: make(map[string]float64, len(res.Timings)),
	}
	if im := res.Image; im != nil {
		out.Image = &openai.IrisImage{SHA256: im.SHA256, Format: im.Format, Width: im.Width, Height: im.Height}
		if b := res.Params.Budget; b != nil {
			out.Image.Budget = &openai.IrisBudget{Detail: b.Detail, MinPixels: b.MinPixels, MaxPixels: b.MaxPixels}
		}
	}
	for _, t := range res.Timings {
		out.TimingsMS[t.Stage] += t.Duration.Seconds() * 1e3
	}
	if res.Boxes != nil {
		out.Boxes = make([]openai.IrisBox, len(res.Boxes))
		for i, b := range res.Boxes {
			out.Boxes[i] = openai.IrisBox{Label: b.Label, Box: b.Box, Point: b.Point}
		}
	}
	for k, v := range out.TimingsMS {
		out.TimingsMS[k] = math.Round(v*1e3) / 1e3 // microsecond resolution
	}
	return out
}

// fromParse maps a validation error to its 400.
func fromParse(err error) *middleware.HTTPError {
	var e *openai.Error
	if errors.As(err, &e) {
		return badRequest(e.Code, e.Param, e.Message)
	}
	return badRequest(openai.CodeInvalidJSON, "", "the request could not be read")
}

func badRequest(code, param, msg string) *middleware.HTTPError {
	return &middleware.HTTPError{Status: http.StatusBadRequest, Code: code, Param: param, Message: msg}
}

// fromCore maps a runtime error to its response. Runtime params are renamed to the request's
// own fields: the image to its url part, max_tokens to the field the client used.
func fromCore(err error, req *openai.Request) *middleware.HTTPError {
	e := core.AsError(err)
	out := &middleware.HTTPError{Code: e.Code, Param: e.Param, Message: e.Message, Err: err}
	switch e.Kind {
	case core.KindInvalid:
		out.Status = http.StatusBadRequest
	case core.KindNotFound:
		out.Status = http.StatusNotFound
	case core.KindTooLarge:
		out.Status = http.StatusRequestEntityTooLarge
	case core.KindBusy:
		out.Status = http.StatusTooManyRequests
		out.RetryAfter = max(e.RetryAfter, time.Second)
	case core.KindUnavailable:
		out.Status = http.StatusServiceUnavailable
	case core.KindCanceled:
		out.Status = middleware.StatusClientClosed
	case core.KindTimeout:
		out.Status = http.StatusGatewayTimeout
	default:
		// Internal details go to the log (Err), never to the client.
		out.Status, out.Param, out.Message = http.StatusInternalServerError, "", "internal error"
	}
	if out.Code == "" {
		out.Code = "internal_error"
	}
	if req.Image != nil && (out.Param == "image" || strings.HasPrefix(out.Param, "image.")) {
		out.Param = req.Image.Param
	}
	if out.Param == "system" {
		out.Param = "messages[0].content"
	}
	if out.Param == "detail" && req.Image != nil {
		out.Param = req.Image.DetailParam()
	}
	if (out.Param == "max_tokens" || out.Param == "max_completion_tokens") && req.MaxTokensParam != "" {
		out.Param = req.MaxTokensParam
	}
	return out
}
