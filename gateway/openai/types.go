// Package openai holds the OpenAI Chat Completions wire types Iris speaks and the validation that
// turns a request body into the one shape Iris serves: a single user turn with one question and
// at most one image.
//
// It knows neither HTTP nor the runtime: the server maps its [Request] onto core, and the load
// generator builds its bodies from the same types.
package openai

// Object names of the responses.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectList                = "list"
	ObjectModel               = "model"
)

// ChatCompletionRequest is a request body as a client writes it. The server does not decode into
// it (see [ParseChatRequest]); it exists for clients such as the load generator.
type ChatCompletionRequest struct {
	Model               string         `json:"model"`
	Messages            []Message      `json:"messages"`
	Stream              bool           `json:"stream"`
	MaxTokens           *int           `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int           `json:"max_completion_tokens,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	TopK                *int           `json:"top_k,omitempty"`
	TopP                *float64       `json:"top_p,omitempty"`
	Seed                *int64         `json:"seed,omitempty"`
	IgnoreEOS           bool           `json:"ignore_eos,omitempty"`
	Stop                []string       `json:"stop,omitempty"`
	MinPixels           *int64         `json:"min_pixels,omitempty"`
	MaxPixels           *int64         `json:"max_pixels,omitempty"`
	User                string         `json:"user,omitempty"`
	StreamOptions       *StreamOptions `json:"stream_options,omitempty"`
	Logprobs            bool           `json:"logprobs,omitempty"`
	TopLogprobs         *int           `json:"top_logprobs,omitempty"`
	ReturnTokenIDs      bool           `json:"return_token_ids,omitempty"`
}

// StreamOptions are the streaming settings of a request.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one chat message as a client writes it. Content is either a string or a list of
// [ContentPart].
type Message struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// ContentPart is one part of a multi-part message.
type ContentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL points at an image, usually with a data: URL.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// ChatCompletion is a non-streamed answer.
type ChatCompletion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	// PromptTokenIDs is the prompt, image placeholders included, when the request asked for
	// return_token_ids (vLLM's extension).
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitzero"`
	Usage          *Usage  `json:"usage,omitempty"`
	Iris           *Iris   `json:"iris,omitempty"`
}

// Choice is one answer of a [ChatCompletion]; Iris always returns exactly one.
type Choice struct {
	Index   int             `json:"index"`
	Message ResponseMessage `json:"message"`
	// Logprobs is present when the request asked for logprobs.
	Logprobs *Logprobs `json:"logprobs,omitempty"`
	// TokenIDs are the generated tokens, the stop token that ended the answer included, when
	// the request asked for return_token_ids (vLLM's extension).
	TokenIDs     []int32 `json:"token_ids,omitzero"`
	FinishReason string  `json:"finish_reason"`
}

// Logprobs are the log-probabilities of the answer's tokens, in order.
type Logprobs struct {
	Content []TokenLogprob `json:"content"`
}

// TokenLogprob is one answer token: its text, log-probability, UTF-8 bytes (a token may hold
// part of a character; its Token then shows U+FFFD) and the step's most likely tokens.
type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one of a step's most likely tokens.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// ResponseMessage is the assistant's message in a [Choice].
type ResponseMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatCompletionChunk is one server-sent event of a streamed answer.
type ChatCompletionChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	// PromptTokenIDs is in the first chunk when the request asked for return_token_ids.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitzero"`
	Usage          *Usage  `json:"usage,omitempty"`
	Iris           *Iris   `json:"iris,omitempty"`
}

// ChunkChoice is the one choice of a [ChatCompletionChunk]. FinishReason is null until the
// finish chunk, as OpenAI sends it.
type ChunkChoice struct {
	Index int   `json:"index"`
	Delta Delta `json:"delta"`
	// Logprobs holds the entries of the tokens of this chunk's delta, when asked for.
	Logprobs *Logprobs `json:"logprobs,omitempty"`
	// TokenIDs are the ids of this chunk's tokens when the request asked for return_token_ids:
	// the chunks' ids concatenated are the non-streamed choice's.
	TokenIDs     []int32 `json:"token_ids,omitzero"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is the new part of the answer in a chunk.
type Delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// Usage counts the tokens of a request. PromptTokens includes the image's tokens.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails breaks the prompt tokens down.
type PromptTokensDetails struct {
	ImageTokens int `json:"image_tokens"`
}

// Iris is the response extension that identifies exactly what answered and how long each stage
// took.
type Iris struct {
	// Image is absent for a text-only request.
	Image  *IrisImage `json:"image,omitempty"`
	Bundle IrisBundle `json:"bundle"`
	// TimingsMS maps a pipeline stage (queue, decode_image, plan, pixels, vision, prefill,
	// decode, ...) to its wall time in milliseconds.
	TimingsMS map[string]float64 `json:"timings_ms"`
	// Boxes are the boxes and points a grounding model's answer names, in the image's pixels;
	// absent for a bundle whose model does not ground, [] when the answer names none.
	Boxes []IrisBox `json:"boxes,omitzero"`
}

// IrisBox is one box ([x1, y1, x2, y2]) or point ([x, y]) of an answer, with its label.
type IrisBox struct {
	Label string    `json:"label"`
	Box   []float64 `json:"box,omitempty"`
	Point []float64 `json:"point,omitempty"`
}

// IrisImage identifies the request's image.
type IrisImage struct {
	// SHA256 is the hex digest of the image file's bytes as sent (after base64 decoding).
	SHA256 string `json:"sha256"`
	Format string `json:"format"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// Budget is the pixel budget the image was resized within, for a bundle that declares
	// budgets.
	Budget *IrisBudget `json:"budget,omitempty"`
}

// IrisBudget is the resized-area range an image was planned with.
type IrisBudget struct {
	// Detail is the image_url.detail the budget started from ("auto" when none was sent).
	Detail    string `json:"detail"`
	MinPixels int64  `json:"min_pixels"`
	MaxPixels int64  `json:"max_pixels"`
}

// IrisBundle identifies the bundle that answered.
type IrisBundle struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// ErrorResponse is the body of every error response.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is an error as OpenAI shapes it. Param is null when no single field is at fault.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Model describes one served model (a loaded bundle).
type Model struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	OwnedBy string     `json:"owned_by"`
	Iris    *IrisModel `json:"iris,omitempty"`
}

// IrisModel is the model extension: what the bundle is and what it serves.
type IrisModel struct {
	Family        string   `json:"family"`
	Tasks         []string `json:"tasks"`
	Digest        string   `json:"digest"`
	ContextLength int      `json:"context_length"`
	MaxNewTokens  int      `json:"max_new_tokens"`
}
