package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Kind classifies an error by who must act on it; the gateway maps it to an HTTP status.
type Kind int

// Error kinds.
const (
	KindInternal    Kind = iota // a bug or a broken component: 500
	KindInvalid                 // the request is wrong: 400
	KindNotFound                // no such model: 404
	KindTooLarge                // the payload is over a size cap: 413
	KindBusy                    // the queue is full; retry later: 429
	KindUnavailable             // not ready or shutting down: 503
	KindCanceled                // the caller went away: 499
	KindTimeout                 // a stage ran past its deadline: 504
)

// Error is a classified runtime error with an OpenAI-style code and parameter.
type Error struct {
	Kind Kind
	// Code is a stable machine-readable reason, e.g. "image_too_small".
	Code string
	// Param names the request field at fault, e.g. "messages[0].content[1].image_url".
	Param string
	// Message is safe to show to the client: it never echoes payload bytes.
	Message string
	// RetryAfter is set with KindBusy.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of the given kind, code and param.
func Errorf(kind Kind, code, param, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error, wrapping unclassified errors as KindInternal.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Kind: KindCanceled, Code: "request_canceled", Message: "the request was canceled", Err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: KindTimeout, Code: "timeout", Message: "the request ran past its deadline", Err: err}
	}
	return &Error{Kind: KindInternal, Code: "internal_error", Message: "internal error", Err: err}
}
