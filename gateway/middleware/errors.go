// Package middleware holds the gateway's cross-cutting HTTP concerns, each a constructor that
// returns a gin.HandlerFunc: request ids, the access log, metrics, tracing, panic recovery and
// the body size limit. It also renders every error response, so that errors have one shape.
package middleware

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/iris-vlm/iris/gateway/openai"
)

// Keys under which the middleware keep per-request values in the gin context.
const (
	keyRequestID     = "iris.request_id"
	keyCorrelationID = "iris.correlation_id"
	keyBundle        = "iris.bundle"
	keyError         = "iris.error"
)

// StatusClientClosed is logged (and counted) for a request whose client went away before an
// answer could be sent; nothing reaches the client.
const StatusClientClosed = 499

// HTTPError is an error response: status, OpenAI-shaped body and optional Retry-After.
type HTTPError struct {
	Status  int
	Code    string
	Param   string
	Message string
	// RetryAfter, when positive, is sent as Retry-After in whole seconds, rounded up.
	RetryAfter time.Duration
	// Err is the underlying cause: logged, never sent.
	Err error
}

func (e *HTTPError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

func (e *HTTPError) Unwrap() error { return e.Err }

// ErrorType is the OpenAI error type of a status.
func ErrorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusServiceUnavailable:
		return "service_unavailable_error"
	case status == http.StatusGatewayTimeout:
		return "timeout_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// Body returns the error as the OpenAI error object.
func (e *HTTPError) Body() openai.ErrorResponse {
	b := openai.ErrorResponse{Error: openai.ErrorBody{Message: e.Message, Type: ErrorType(e.Status), Code: e.Code}}
	if e.Param != "" {
		p := e.Param
		b.Error.Param = &p
	}
	return b
}

// Render records e for the access log, metrics and trace, then sends it as JSON and aborts the
// chain. When the response has already started it sends nothing more (a streaming handler
// reports its own errors in-stream). A client-closed error is recorded and not sent.
func Render(c *gin.Context, e *HTTPError) {
	Record(c, e)
	c.Abort()
	if c.Writer.Written() {
		return
	}
	if e.Status == StatusClientClosed {
		c.Status(StatusClientClosed)
		return
	}
	if e.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	}
	c.JSON(e.Status, e.Body())
}

// Record notes e as the request's outcome without sending anything.
func Record(c *gin.Context, e *HTTPError) { c.Set(keyError, e) }

// ErrorOf returns the error recorded for the request, or nil.
func ErrorOf(c *gin.Context) *HTTPError {
	if v, ok := c.Get(keyError); ok {
		if e, ok := v.(*HTTPError); ok {
			return e
		}
	}
	return nil
}

// ErrorCode returns the code of the error recorded for the request, or "".
func ErrorCode(c *gin.Context) string {
	if e := ErrorOf(c); e != nil {
		return e.Code
	}
	return ""
}

// SetBundle names the bundle (model) a request was for, for the access log and metrics.
func SetBundle(c *gin.Context, name string) { c.Set(keyBundle, name) }

// Bundle returns the name set by SetBundle, or "".
func Bundle(c *gin.Context) string { return c.GetString(keyBundle) }

// WriteSSEError writes e as a server-sent error event followed by the stream's terminator, the
// way a stream that already started reports a failure.
func WriteSSEError(w io.Writer, e *HTTPError) error {
	body, err := json.Marshal(e.Body())
	if err != nil {
		return fmt.Errorf("encode error event: %w", err)
	}
	_, err = fmt.Fprintf(w, "event: error\ndata: %s\n\ndata: [DONE]\n\n", body)
	return err
}

// TooLarge is the 413 for a body over limit bytes.
func TooLarge(limit int64) *HTTPError {
	return &HTTPError{Status: http.StatusRequestEntityTooLarge, Code: "request_too_large",
		Message: fmt.Sprintf("the request body is over the %d-byte limit", limit)}
}

// IsTooLarge reports whether err came from reading past the body limit.
func IsTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// BodyLimit caps request bodies at limit bytes: a declared Content-Length over it gets 413 at
// once, a longer body fails the handler's read (see IsTooLarge).
func BodyLimit(limit int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > limit {
			Render(c, TooLarge(limit))
			return
		}
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
		c.Next()
	}
}
