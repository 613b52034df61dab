package abi

import "fmt"

// ErrorKind says who is at fault for an [Error].
type ErrorKind string

// Error kinds.
const (
	// Refusal: the plugin declines this image or question (a client error, HTTP 400).
	Refusal ErrorKind = "refusal"
	// Failure: the plugin or its configuration is broken (a server error, HTTP 500).
	Failure ErrorKind = "failure"
)

// Refusal codes: the reference processor would refuse the same input for the same reason.
const (
	CodeImageTooSmall         = "image_too_small"
	CodeImageTooLarge         = "image_too_large"
	CodeAspectRatioTooExtreme = "aspect_ratio_too_extreme"
	CodeUnsupportedImage      = "unsupported_image"
	CodeQuestionTooLong       = "question_too_long"
	// CodeSystemNotSupported: the plugin cannot frame the request's system message (its SDK
	// predates FrameRequest.System, or its family's template has no system turn).
	CodeSystemNotSupported = "system_message_not_supported"
)

// Failure codes.
const (
	// CodeInvalidParams: the bundle's [plugin.params] has an unknown key or a value of the wrong type.
	CodeInvalidParams = "invalid_params"
	// CodeBadRequest: the guest could not decode what the host sent (a host/guest mismatch).
	CodeBadRequest = "bad_request"
	// CodePluginError: the plugin returned an untyped error.
	CodePluginError = "plugin_error"
	// CodePluginPanic: the plugin panicked; the SDK recovered and reported it.
	CodePluginPanic = "plugin_panic"
)

// Error is a typed error a plugin returns instead of a result.
type Error struct {
	Kind ErrorKind `json:"kind"`
	// Code is a stable snake_case reason, e.g. "aspect_ratio_too_extreme".
	Code string `json:"code"`
	// Message is for people; it must not echo request payloads.
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is matches another *Error with the same kind and code, so errors.Is works on codes.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind && t.Code == e.Code
}

// Refusef returns a refusal with the given code.
func Refusef(code, format string, args ...any) *Error {
	return &Error{Kind: Refusal, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Failf returns a failure with the given code.
func Failf(code, format string, args ...any) *Error {
	return &Error{Kind: Failure, Code: code, Message: fmt.Sprintf(format, args...)}
}

// validCode reports whether s is a snake_case code of at most 64 bytes.
func validCode(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
