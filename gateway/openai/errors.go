package openai

import "fmt"

// Error codes of request validation. Each is a stable machine-readable reason; every one is a
// client error (HTTP 400).
const (
	CodeInvalidJSON            = "invalid_json"
	CodeInvalidType            = "invalid_type"
	CodeMissingParameter       = "missing_parameter"
	CodeInvalidValue           = "invalid_value"
	CodeConflictingParameters  = "conflicting_parameters"
	CodeUnsupportedParameter   = "unsupported_parameter"
	CodeUnsupportedMessages    = "unsupported_message_count"
	CodeUnsupportedRole        = "unsupported_role"
	CodeUnsupportedContentPart = "unsupported_content_part"
	CodeTooManyImages          = "too_many_images"
	CodeTooManyTextParts       = "too_many_text_parts"
	CodeMissingText            = "missing_text"
	CodeInvalidImageURL        = "invalid_image_url"
	CodeUnsupportedImageFormat = "unsupported_image_format"
	CodeImageEmpty             = "image_empty"
	CodeImageURLNotAllowed     = "image_url_not_allowed"
)

// Error is a request the gateway refuses before anything runs. Message never quotes the
// request's payload (its text or image bytes).
type Error struct {
	Code string
	// Param names the field at fault, e.g. "messages[0].content[1].image_url.url"; empty when
	// the body as a whole is at fault.
	Param   string
	Message string
}

func (e *Error) Error() string {
	if e.Param == "" {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("%s (%s): %s", e.Code, e.Param, e.Message)
}

func errorf(code, param, format string, args ...any) *Error {
	return &Error{Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}
