package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/iris-vlm/iris/core"
)

// Limits on fields whose values the gateway stores or quotes.
const (
	maxModelNameLen = 256
	maxRemoteURLLen = 4096
	maxUserLen      = 1024
	// maxPixelsParam bounds min_pixels and max_pixels before the bundle's bounds clamp them.
	maxPixelsParam = 1 << 40
)

// Request is a chat request that passed validation, in the one shape Iris serves: a single user
// message with one question and at most one image.
type Request struct {
	Model string
	// Text is the question; never empty, never contains NUL.
	Text string
	// Image is nil for a text-only request.
	Image *Image
	// TextFirst is true when the text part came before the image part.
	TextFirst bool
	// System is the system (or developer) message's text, nil when none was sent.
	System *string
	// MaxTokens is 0 when the client set no limit; MaxTokensParam names the field that set it
	// ("max_tokens" or "max_completion_tokens"), so that errors about it name that field.
	MaxTokens      int
	MaxTokensParam string
	Temperature    *float64
	TopK           *int
	TopP           *float64
	Seed           *int64
	IgnoreEOS      bool
	// Logprobs asks for the answer tokens' log-probabilities, TopLogprobs (0-20) for that many
	// alternatives per token.
	Logprobs    bool
	TopLogprobs int
	// ReturnTokenIDs asks for the prompt's and the answer's token ids (vLLM's extension).
	ReturnTokenIDs bool
	// MinPixels and MaxPixels (Iris extensions; 0: unset) ask for the image's resized area
	// range; the runtime clamps them to the bundle's bounds.
	MinPixels, MaxPixels int64
	// Stop are the stop strings (at most 4, none empty); nil for none.
	Stop   []string
	Stream bool
	// IncludeUsage asks for a usage chunk at the end of a stream.
	IncludeUsage bool
	User         string
}

// Image is the request's image: decoded bytes from a data: URL, or an http(s) URL that the server
// may fetch if its configuration allows it.
type Image struct {
	// Param is the path of the image's url field, e.g. "messages[0].content[1].image_url.url".
	Param string
	// Data holds the bytes of a data: URL, MediaType its declared type (image/png or image/jpeg).
	Data      []byte
	MediaType string
	// URL is set instead of Data for an http or https URL.
	URL *url.URL
	// Detail is image_url.detail: "", "auto", "low" or "high".
	Detail string
}

// DetailParam is the path of the image's detail field.
func (im *Image) DetailParam() string { return strings.TrimSuffix(im.Param, ".url") + ".detail" }

// wireRequest is decoded in one pass. Scalar fields stay raw so that a wrong type is reported
// with the field's name. Messages are decoded generically: that scans the image's long base64
// string the fewest times (typed or raw nesting rescans it at every level) and lets every
// wrong shape be reported with its exact path.
type wireRequest struct {
	Model               json.RawMessage `json:"model"`
	Messages            any             `json:"messages"`
	MaxTokens           json.RawMessage `json:"max_tokens"`
	MaxCompletionTokens json.RawMessage `json:"max_completion_tokens"`
	Temperature         json.RawMessage `json:"temperature"`
	TopK                json.RawMessage `json:"top_k"`
	TopP                json.RawMessage `json:"top_p"`
	Seed                json.RawMessage `json:"seed"`
	Stream              json.RawMessage `json:"stream"`
	StreamOptions       json.RawMessage `json:"stream_options"`
	IgnoreEOS           json.RawMessage `json:"ignore_eos"`
	User                json.RawMessage `json:"user"`
	MinPixels           json.RawMessage `json:"min_pixels"`
	MaxPixels           json.RawMessage `json:"max_pixels"`
	ReturnTokenIDs      json.RawMessage `json:"return_token_ids"`

	// Refused unless absent, null or neutral (see refused).
	N                  json.RawMessage `json:"n"`
	Stop               json.RawMessage `json:"stop"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Functions          json.RawMessage `json:"functions"`
	FunctionCall       json.RawMessage `json:"function_call"`
	ResponseFormat     json.RawMessage `json:"response_format"`
	Logprobs           json.RawMessage `json:"logprobs"`
	TopLogprobs        json.RawMessage `json:"top_logprobs"`
	ReasoningEffort    json.RawMessage `json:"reasoning_effort"`
	Reasoning          json.RawMessage `json:"reasoning"`
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
	EnableThinking     json.RawMessage `json:"enable_thinking"`
	Thinking           json.RawMessage `json:"thinking"`
}

// ParseChatRequest decodes and validates a chat completion request body. It refuses every shape
// Iris does not serve with an [*Error] naming the field at fault; the first problem found is
// reported. The image's data URL is decoded last, once everything else passed.
//
// Unknown keys are ignored. Top-level keys are matched as encoding/json matches struct fields
// (case-insensitively), keys inside messages exactly; of duplicate keys the last wins.
func ParseChatRequest(body []byte) (*Request, error) {
	var w wireRequest
	if err := unmarshalWire(body, &w); err != nil {
		return nil, decodeError(body, err)
	}
	if firstByte(bytes.TrimSpace(body)) != '{' {
		return nil, errorf(CodeInvalidType, "", "the request body must be a JSON object")
	}
	r := &Request{}
	if err := parseModel(w.Model, r); err != nil {
		return nil, err
	}
	img, err := parseMessages(w.Messages, r)
	if err != nil {
		return nil, err
	}
	if err := refused(&w); err != nil {
		return nil, err
	}
	if err := parseParams(&w, r); err != nil {
		return nil, err
	}
	if img != nil {
		if r.Image, err = parseImageURL(img.url, img.param); err != nil {
			return nil, err
		}
		r.Image.Detail = img.detail
	}
	return r, nil
}

func parseModel(raw json.RawMessage, r *Request) error {
	model, _, err := stringField(raw, "model") // absent and null read as ""
	switch {
	case err != nil:
		return err
	case model == "":
		return errorf(CodeMissingParameter, "model", "model is required: name a model listed by GET /v1/models")
	case len(model) > maxModelNameLen:
		return errorf(CodeInvalidValue, "model", "model names are at most %d bytes", maxModelNameLen)
	}
	r.Model = model
	return nil
}

// pendingImage is an image part found in the message; its URL is parsed after everything else.
type pendingImage struct {
	url    string
	param  string
	detail string
}

func parseMessages(v any, r *Request) (*pendingImage, error) {
	if v == nil {
		return nil, errorf(CodeMissingParameter, "messages", "messages is required: send one user message")
	}
	msgs, ok := v.([]any)
	if !ok {
		return nil, errorf(CodeInvalidType, "messages", "messages must be an array of messages")
	}
	// One user message, optionally after one system (or developer) message.
	user := 0
	if len(msgs) == 2 {
		if role, _ := roleOf(msgs[0]); role == "system" || role == "developer" {
			if err := parseSystem(msgs[0].(map[string]any), r); err != nil {
				return nil, err
			}
			user = 1
		}
	}
	if len(msgs)-user != 1 {
		return nil, errorf(CodeUnsupportedMessages, "messages",
			"Iris serves one user message per request (one question about at most one image), optionally after one system message; got %d messages", len(msgs))
	}
	at := fmt.Sprintf("messages[%d]", user)
	m, ok := msgs[user].(map[string]any)
	if !ok {
		return nil, errorf(CodeInvalidType, at, "a message must be an object")
	}
	role, ok, err := stringOf(m, "role", at+".role")
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, errorf(CodeMissingParameter, at+".role", "the message needs a role; \"user\" is served, after at most one \"system\" message")
	case role == "user":
	case role == "system" || role == "developer":
		return nil, errorf(CodeUnsupportedRole, at+".role", "a %s message must be followed by one user message", role)
	case role == "assistant" || role == "tool" || role == "function":
		return nil, errorf(CodeUnsupportedRole, at+".role", "%s messages are not supported: send one user message", role)
	default:
		return nil, errorf(CodeUnsupportedRole, at+".role", "unknown role; only \"user\" and one \"system\" before it are served")
	}
	return parseContent(m["content"], r, at+".content")
}

// roleOf returns a message's role when the message is an object with a string role.
func roleOf(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	role, ok := m["role"].(string)
	return role, ok
}

// parseSystem reads the system (or developer) message: a string, or an array of text parts,
// joined as the Qwen chat templates join them. An empty one is kept: the templates render it.
func parseSystem(m map[string]any, r *Request) error {
	const param = "messages[0].content"
	var text string
	switch c := m["content"].(type) {
	case nil:
		return errorf(CodeMissingParameter, param, "the system message needs content")
	case string:
		text = c
	case []any:
		var b strings.Builder
		for j, pv := range c {
			at := fmt.Sprintf("%s[%d]", param, j)
			p, ok := pv.(map[string]any)
			if !ok {
				return errorf(CodeInvalidType, at, "a content part must be an object")
			}
			typ, _, err := stringOf(p, "type", at+".type")
			if err != nil {
				return err
			}
			if typ != "text" {
				return errorf(CodeUnsupportedContentPart, at+".type", "a system message holds text parts only")
			}
			t, ok, err := stringOf(p, "text", at+".text")
			if err != nil {
				return err
			}
			if !ok {
				return errorf(CodeMissingParameter, at+".text", "a text part needs its text")
			}
			b.WriteString(t)
		}
		text = b.String()
	default:
		return errorf(CodeInvalidType, param, "content must be a string or an array of text parts")
	}
	if strings.IndexByte(text, 0) >= 0 {
		return errorf(CodeInvalidValue, param, "the system message contains a NUL character")
	}
	r.System = &text
	return nil
}

func parseContent(v any, r *Request, param string) (*pendingImage, error) {
	var parts []any
	switch c := v.(type) {
	case nil:
		return nil, errorf(CodeMissingParameter, param, "the message needs content: a text part with the question and at most one image_url part")
	case string:
		if err := checkText(c, param); err != nil {
			return nil, err
		}
		r.Text, r.TextFirst = c, true
		return nil, nil
	case []any:
		parts = c
	default:
		return nil, errorf(CodeInvalidType, param, "content must be a string or an array of content parts")
	}
	textAt, imageAt := -1, -1
	var img *pendingImage
	for j, pv := range parts {
		at := fmt.Sprintf("%s[%d]", param, j)
		p, ok := pv.(map[string]any)
		if !ok {
			return nil, errorf(CodeInvalidType, at, "a content part must be an object")
		}
		typ, ok, err := stringOf(p, "type", at+".type")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errorf(CodeMissingParameter, at+".type", "every content part needs a type: \"text\" or \"image_url\"")
		}
		switch typ {
		case "text":
			text, ok, err := stringOf(p, "text", at+".text")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errorf(CodeMissingParameter, at+".text", "a text part needs its text")
			}
			if textAt >= 0 {
				return nil, errorf(CodeTooManyTextParts, at, "the message may hold one text part; put the whole question in it")
			}
			if err := checkText(text, at+".text"); err != nil {
				return nil, err
			}
			textAt, r.Text = j, text
		case "image_url":
			iu, ok := p["image_url"].(map[string]any)
			if !ok {
				if p["image_url"] == nil {
					return nil, errorf(CodeMissingParameter, at+".image_url", "an image_url part needs an image_url object with a url")
				}
				return nil, errorf(CodeInvalidType, at+".image_url", "image_url must be an object with a url")
			}
			u, ok, err := stringOf(iu, "url", at+".image_url.url")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errorf(CodeMissingParameter, at+".image_url.url", "an image_url part needs a url")
			}
			if imageAt >= 0 {
				return nil, errorf(CodeTooManyImages, at, "Iris answers about one image per request; send one image_url part")
			}
			detail, _, err := stringOf(iu, "detail", at+".image_url.detail")
			if err != nil {
				return nil, err
			}
			switch detail {
			case "", "auto", "low", "high":
			default:
				return nil, errorf(CodeInvalidValue, at+".image_url.detail", "detail must be \"auto\", \"low\" or \"high\"")
			}
			imageAt = j
			img = &pendingImage{url: u, param: at + ".image_url.url", detail: detail}
		case "input_audio", "audio", "audio_url":
			return nil, errorf(CodeUnsupportedContentPart, at+".type", "audio parts are not supported")
		case "video", "video_url", "input_video":
			return nil, errorf(CodeUnsupportedContentPart, at+".type", "video parts are not supported")
		case "file", "input_file":
			return nil, errorf(CodeUnsupportedContentPart, at+".type", "file parts are not supported")
		default:
			if tok, safe := safeToken(typ); safe && tok != "" {
				return nil, errorf(CodeUnsupportedContentPart, at+".type", "unknown content part type %q; use \"text\" and \"image_url\"", tok)
			}
			return nil, errorf(CodeUnsupportedContentPart, at+".type", "unknown content part type; use \"text\" and \"image_url\"")
		}
	}
	if textAt < 0 {
		return nil, errorf(CodeMissingText, param, "the message needs one text part with the question")
	}
	r.TextFirst = imageAt < 0 || textAt < imageAt
	return img, nil
}

// stringOf returns m[key] when it is a string; absent and null are "not set".
func stringOf(m map[string]any, key, param string) (string, bool, error) {
	switch v := m[key].(type) {
	case nil:
		return "", false, nil
	case string:
		return v, true, nil
	}
	return "", false, errorf(CodeInvalidType, param, "%s must be a string", param)
}

func checkText(text, param string) error {
	switch {
	case text == "":
		return errorf(CodeMissingText, param, "the question is empty")
	case strings.IndexByte(text, 0) >= 0:
		return errorf(CodeInvalidValue, param, "the text contains a NUL character")
	}
	return nil
}

func parseImageURL(u, param string) (*Image, error) {
	switch scheme := urlScheme(u); scheme {
	case "data":
		mt, data, err := DecodeDataURL(u)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Param = param
			}
			return nil, err
		}
		return &Image{Param: param, Data: data, MediaType: mt}, nil
	case "http", "https":
		if len(u) > maxRemoteURLLen {
			return nil, errorf(CodeInvalidImageURL, param, "image URLs are at most %d bytes", maxRemoteURLLen)
		}
		parsed, err := url.Parse(u)
		if err != nil || parsed.Host == "" || parsed.User != nil {
			return nil, errorf(CodeInvalidImageURL, param, "the image URL is not a valid http(s) URL with a host and no credentials")
		}
		return &Image{Param: param, URL: parsed}, nil
	case "file":
		return nil, errorf(CodeImageURLNotAllowed, param, "file URLs are never read; send the image inline as a data: URL")
	default:
		return nil, errorf(CodeInvalidImageURL, param, "the image URL must be a data: URL (data:image/png;base64,...)")
	}
}

// urlScheme returns the lowercased scheme of u, or "" when it has none.
func urlScheme(u string) string {
	i := strings.IndexByte(u, ':')
	if i <= 0 || i > 8 {
		return ""
	}
	return strings.ToLower(u[:i])
}

// refused checks the parameters Iris cannot honour: they are refused rather than ignored, since
// ignoring them would return an answer the client did not ask for.
func refused(w *wireRequest) error {
	if n := w.N; !isNull(n) {
		v, err := intField(n, "n")
		if err != nil {
			return err
		}
		if v != 1 {
			return errorf(CodeUnsupportedParameter, "n", "n must be 1: Iris returns one choice")
		}
	}
	empty := func(raw json.RawMessage) bool {
		s := string(bytes.TrimSpace(raw))
		return isNull(raw) || s == `""` || s == "[]" || s == "{}"
	}
	neutral := []struct {
		raw     json.RawMessage
		param   string
		ok      func(json.RawMessage) bool
		message string
	}{
		{w.Tools, "tools", empty, "tools are not supported"},
		{w.ToolChoice, "tool_choice", isNoneString, "tool_choice is not supported"},
		{w.Functions, "functions", empty, "functions are not supported"},
		{w.FunctionCall, "function_call", isNoneString, "function_call is not supported"},
		{w.ResponseFormat, "response_format", isTextFormat, "response_format is not supported; answers are plain text"},
		{w.ReasoningEffort, "reasoning_effort", isNull, "reasoning controls are not supported"},
		{w.Reasoning, "reasoning", isNull, "reasoning controls are not supported"},
		{w.ChatTemplateKwargs, "chat_template_kwargs", isNull, "chat_template_kwargs is not supported: the bundle's plugin frames the prompt"},
		{w.EnableThinking, "enable_thinking", isNull, "thinking controls are not supported"},
		{w.Thinking, "thinking", isNull, "thinking controls are not supported"},
	}
	for _, f := range neutral {
		if !f.ok(f.raw) {
			return errorf(CodeUnsupportedParameter, f.param, "%s", f.message)
		}
	}
	return nil
}

func parseParams(w *wireRequest, r *Request) error {
	mt, hasMT, err := positiveInt(w.MaxTokens, "max_tokens")
	if err != nil {
		return err
	}
	mct, hasMCT, err := positiveInt(w.MaxCompletionTokens, "max_completion_tokens")
	if err != nil {
		return err
	}
	switch {
	case hasMT && hasMCT && mt != mct:
		return errorf(CodeConflictingParameters, "max_completion_tokens", "max_tokens and max_completion_tokens disagree; send one of them")
	case hasMCT:
		r.MaxTokens, r.MaxTokensParam = mct, "max_completion_tokens"
	case hasMT:
		r.MaxTokens, r.MaxTokensParam = mt, "max_tokens"
	}
	if !isNull(w.Temperature) {
		t, err := floatField(w.Temperature, "temperature")
		if err != nil {
			return err
		}
		if t < 0 {
			return errorf(CodeInvalidValue, "temperature", "temperature must be >= 0")
		}
		r.Temperature = &t
	}
	if !isNull(w.TopK) {
		k, err := intField(w.TopK, "top_k")
		if err != nil {
			return err
		}
		if k < 0 {
			return errorf(CodeInvalidValue, "top_k", "top_k must be >= 0 (0 keeps every token)")
		}
		r.TopK = &k
	}
	if !isNull(w.TopP) {
		p, err := floatField(w.TopP, "top_p")
		if err != nil {
			return err
		}
		if !(p > 0 && p <= 1) {
			return errorf(CodeInvalidValue, "top_p", "top_p must be in (0, 1]")
		}
		r.TopP = &p
	}
	if !isNull(w.Seed) {
		s, err := int64Field(w.Seed, "seed")
		if err != nil {
			return err
		}
		r.Seed = &s
	}
	if r.Stop, err = parseStop(w.Stop); err != nil {
		return err
	}
	for _, f := range []struct {
		raw   json.RawMessage
		param string
		dst   *int64
	}{{w.MinPixels, "min_pixels", &r.MinPixels}, {w.MaxPixels, "max_pixels", &r.MaxPixels}} {
		if isNull(f.raw) {
			continue
		}
		v, err := int64Field(f.raw, f.param)
		if err != nil {
			return err
		}
		if v < 1 || v > maxPixelsParam {
			return errorf(CodeInvalidValue, f.param, "%s must be in [1, %d]", f.param, int64(maxPixelsParam))
		}
		*f.dst = v
	}
	if r.MinPixels > 0 && r.MaxPixels > 0 && r.MinPixels > r.MaxPixels {
		return errorf(CodeConflictingParameters, "max_pixels", "min_pixels is over max_pixels")
	}
	if r.Logprobs, _, err = boolField(w.Logprobs, "logprobs"); err != nil {
		return err
	}
	if !isNull(w.TopLogprobs) {
		n, err := intField(w.TopLogprobs, "top_logprobs")
		if err != nil {
			return err
		}
		switch {
		case n < 0 || n > core.MaxTopLogprobs:
			return errorf(CodeInvalidValue, "top_logprobs", "top_logprobs must be in [0, %d]", core.MaxTopLogprobs)
		case n > 0 && !r.Logprobs:
			return errorf(CodeInvalidValue, "top_logprobs", "top_logprobs needs \"logprobs\": true")
		}
		r.TopLogprobs = n
	}
	if r.Stream, _, err = boolField(w.Stream, "stream"); err != nil {
		return err
	}
	if r.IgnoreEOS, _, err = boolField(w.IgnoreEOS, "ignore_eos"); err != nil {
		return err
	}
	if r.ReturnTokenIDs, _, err = boolField(w.ReturnTokenIDs, "return_token_ids"); err != nil {
		return err
	}
	if err := parseStreamOptions(w.StreamOptions, r); err != nil {
		return err
	}
	user, _, err := stringField(w.User, "user")
	if err != nil {
		return err
	}
	if len(user) > maxUserLen {
		return errorf(CodeInvalidValue, "user", "user is at most %d bytes", maxUserLen)
	}
	r.User = user
	return nil
}

// parseStop reads OpenAI's stop: a string or an array of at most core.MaxStopStrings strings.
// "" and [] mean none, as OpenAI takes them; an empty string inside an array is refused, since it
// would end every answer before it starts.
func parseStop(raw json.RawMessage) ([]string, error) {
	const param = "stop"
	if isNull(raw) {
		return nil, nil
	}
	var stops []string
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil { // not an array: it must be one string
		s, _, err := stringField(raw, param)
		if err != nil {
			return nil, errorf(CodeInvalidType, param, "stop must be a string or an array of strings")
		}
		if s == "" {
			return nil, nil
		}
		stops = []string{s}
	}
	if len(items) > core.MaxStopStrings {
		return nil, errorf(CodeInvalidValue, param, "stop takes at most %d strings, got %d", core.MaxStopStrings, len(items))
	}
	for i, it := range items {
		at := fmt.Sprintf("stop[%d]", i)
		s, ok, err := stringField(it, at)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errorf(CodeInvalidType, at, "%s is null; a stop string must be a string", at)
		}
		if s == "" {
			return nil, errorf(CodeInvalidValue, at, "a stop string must not be empty")
		}
		stops = append(stops, s)
	}
	for i, s := range stops {
		if len(s) > core.MaxStopStringBytes {
			return nil, errorf(CodeInvalidValue, fmt.Sprintf("stop[%d]", i), "a stop string is at most %d bytes", core.MaxStopStringBytes)
		}
	}
	return stops, nil
}

func parseStreamOptions(raw json.RawMessage, r *Request) error {
	if isNull(raw) {
		return nil
	}
	var so struct {
		IncludeUsage json.RawMessage `json:"include_usage"`
	}
	// Anything but an object (null is handled above) fails to decode into the struct.
	if err := json.Unmarshal(raw, &so); err != nil {
		return errorf(CodeInvalidType, "stream_options", "stream_options must be an object")
	}
	var err error
	r.IncludeUsage, _, err = boolField(so.IncludeUsage, "stream_options.include_usage")
	return err
}

// decodeError turns an encoding/json error on the whole body into an *Error. Only the body
// itself can have a wrong type: every field below it is decoded raw or generically.
func decodeError(body []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case len(bytes.TrimSpace(body)) == 0:
		return errorf(CodeInvalidJSON, "", "the request body is empty; send a JSON object")
	case errors.As(err, &se):
		return errorf(CodeInvalidJSON, "", "the request body is not valid JSON (error at byte %d)", se.Offset)
	case errors.As(err, &te):
		return errorf(CodeInvalidType, "", "the request body must be a JSON object")
	}
	return errorf(CodeInvalidJSON, "", "the request body could not be decoded")
}

// firstByte returns the first byte of a raw JSON value, or 0 when it is absent. The decoder
// strips surrounding whitespace, so the first byte names the value's type.
func firstByte(raw json.RawMessage) byte {
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func isNoneString(raw json.RawMessage) bool { return isNull(raw) || string(raw) == `"none"` }

func isTextFormat(raw json.RawMessage) bool {
	if isNull(raw) {
		return true
	}
	var f struct {
		Type string `json:"type"`
	}
	return firstByte(raw) == '{' && json.Unmarshal(raw, &f) == nil && f.Type == "text"
}

func stringField(raw json.RawMessage, param string) (string, bool, error) {
	if isNull(raw) {
		return "", false, nil
	}
	var s string
	// Anything but a string (null is handled above) fails to decode into s.
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, errorf(CodeInvalidType, param, "%s must be a string", param)
	}
	return s, true, nil
}

func boolField(raw json.RawMessage, param string) (bool, bool, error) {
	switch string(raw) {
	case "", "null":
		return false, false, nil
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, false, errorf(CodeInvalidType, param, "%s must be a boolean", param)
}

func isNumber(raw json.RawMessage) bool {
	c := firstByte(raw)
	return c == '-' || ('0' <= c && c <= '9')
}

// int64Field reads an integer. raw is a JSON value, so ParseInt's syntax error is the only
// refusal a string, a boolean or a fraction needs.
func int64Field(raw json.RawMessage, param string) (int64, error) {
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, errorf(CodeInvalidValue, param, "%s is out of range", param)
		}
		return 0, errorf(CodeInvalidType, param, "%s must be an integer", param)
	}
	return v, nil
}

// The gateway builds only where int is 64 bits wide (this fails to compile elsewhere), so
// intField's conversion never truncates.
const _ = uint(math.MaxInt - math.MaxInt64)

func intField(raw json.RawMessage, param string) (int, error) {
	v, err := int64Field(raw, param)
	return int(v), err
}

func positiveInt(raw json.RawMessage, param string) (int, bool, error) {
	if isNull(raw) {
		return 0, false, nil
	}
	v, err := intField(raw, param)
	if err != nil {
		return 0, false, err
	}
	if v < 1 {
		return 0, false, errorf(CodeInvalidValue, param, "%s must be at least 1", param)
	}
	return v, true, nil
}

func floatField(raw json.RawMessage, param string) (float64, error) {
	if !isNumber(raw) {
		return 0, errorf(CodeInvalidType, param, "%s must be a number", param)
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, errorf(CodeInvalidValue, param, "%s is out of range", param)
	}
	return v, nil
}
