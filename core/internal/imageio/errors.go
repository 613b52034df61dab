package imageio

import "errors"

// Code is a stable machine-readable reason an image is refused.
type Code string

// Refusal codes.
const (
	// CodeEmpty: no bytes, or an image with no pixels.
	CodeEmpty Code = "image_empty"
	// CodeTooLarge: over the byte or pixel cap.
	CodeTooLarge Code = "image_too_large"
	// CodeTooSmall: a side below the minimum.
	CodeTooSmall Code = "image_too_small"
	// CodeAspect: the long side over MaxAspect times the short side.
	CodeAspect Code = "aspect_ratio_too_extreme"
	// CodeFormat: not PNG or JPEG, or a JPEG coding process the reference cannot decode the same way.
	CodeFormat Code = "unsupported_image_format"
	// CodeColorModel: 16-bit PNG, CMYK/YCCK JPEG, or another colour model without an exact RGB.
	CodeColorModel Code = "unsupported_color_model"
	// CodeCorrupt: a truncated or malformed file.
	CodeCorrupt Code = "image_corrupt"
)

// TooLarge reports whether the code means the payload is over a cap (HTTP 413) rather than
// invalid (HTTP 400).
func (c Code) TooLarge() bool { return c == CodeTooLarge }

// Error is a refused image. Message is safe to show to a client: it never quotes the payload.
type Error struct {
	Code    Code
	Message string
	// Err is the underlying cause, if any; its text is safe too.
	Err error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &Error{Code: c}) match any refusal with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func refuse(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// CodeOf returns the refusal code of err, or "" when err is not a refusal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
