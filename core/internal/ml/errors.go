package ml

import "errors"

// Errors of the op set, shared by every layer above it so that a refusal keeps its identity
// from a backend up to the runtime.
var (
	// ErrInvalidInput: an op's operands, or a request built from them, are malformed (no tokens,
	// ids outside the vocabulary, a grid that disagrees with its pixels or its placeholder
	// tokens, tensors of the wrong shape or type). It is the client's to fix.
	ErrInvalidInput = errors.New("invalid engine input")
	// ErrClosed is returned by a backend, model or sequence used after Close.
	ErrClosed = errors.New("engine closed")
)
