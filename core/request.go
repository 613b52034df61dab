package core

import (
	"fmt"
	"strconv"
	"time"
)

// Task names a capability a bundle declares. The bundle's declared tasks, not the model's
// architecture, decide which requests it serves.
type Task string

// Tasks a bundle may declare.
const (
	TaskVisionLanguage Task = "vision-language-generation"
	TaskText           Task = "text-generation"
)

// Request is one chat request as every caller (HTTP gateway, profiler, tests) hands it to the
// runtime. A request with an Image reaches only a vision-language task.
type Request struct {
	// ID is the request id (X-Request-ID); CorrelationID is the client's correlation id.
	ID            string
	CorrelationID string
	// Model names a loaded bundle.
	Model string
	// Text is the user's question.
	Text string
	// Image holds the image file's bytes as sent (PNG or JPEG), or nil for a text-only request.
	Image []byte
	// TextFirst is true when the text part came before the image part in the message.
	TextFirst bool
	Params    Params
}

// Params are the generation settings of one request. Nil pointers and zero MaxTokens take the
// bundle's defaults.
type Params struct {
	MaxTokens   int
	Temperature *float64
	TopK        *int
	TopP        *float64
	Seed        *int64
	IgnoreEOS   bool
	// Stop are strings that end the answer (OpenAI's stop): the answer is the text before the
	// first one generated. At most MaxStopStrings, none empty.
	Stop []string
	// System is the client's system message, framed by the family plugin as its chat template
	// frames a system turn; nil when it sent none (the bundle's default applies).
	System *string
	// Logprobs asks for each answer token's log-probability, and TopLogprobs (0 to
	// MaxTopLogprobs) for that many most likely tokens of its step. They change no token.
	Logprobs    bool
	TopLogprobs int
	// Detail is OpenAI's image_url.detail ("", "auto", "low" or "high"); MinPixels and
	// MaxPixels (0: unset) narrow or widen the resized image area. They choose the image's
	// resolution among the budgets the bundle declares, clamped to its bounds.
	Detail               string
	MinPixels, MaxPixels int64
}

// Image details a request may name.
const (
	DetailAuto = "auto"
	DetailLow  = "low"
	DetailHigh = "high"
)

// PixelBudget is the resized-image area range a request's image is planned with: the family
// plugin's min_pixels and max_pixels for this request.
type PixelBudget struct {
	// Detail is the detail the budget started from ("auto" when the request named none).
	Detail    string `json:"detail"`
	MinPixels int64  `json:"min_pixels"`
	MaxPixels int64  `json:"max_pixels"`
	// Default is true when the budget is the bundle's own [plugin.params] range.
	Default bool `json:"-"`
}

// MaxTopLogprobs is OpenAI's bound on top_logprobs.
const MaxTopLogprobs = 20

// MaxStopStrings is OpenAI's bound on the stop strings of a request.
const MaxStopStrings = 4

// MaxStopStringBytes bounds one stop string: the streamed text held back is never longer.
const MaxStopStringBytes = 256

// Resolved is a request's generation settings after the bundle's defaults were applied.
type Resolved struct {
	MaxTokens   int
	Temperature float64
	TopK        int
	TopP        float64
	Seed        int64
	IgnoreEOS   bool
	Stop        []string
	System      *string
	Logprobs    bool
	TopLogprobs int
	// Budget is the image's pixel budget; nil for a bundle that declares no budgets.
	Budget *PixelBudget
}

// Greedy reports whether the settings select the argmax token at every step.
func (r Resolved) Greedy() bool { return r.Temperature == 0 || r.TopK == 1 }

// Key is the identity of a request's answer: two requests with equal keys must get equal answers
// from a deterministic engine. It covers everything that changes the answer (logprobs do not:
// they report on the same tokens).
func (r Resolved) Key(question, imageSHA256 string) string {
	key := fmt.Sprintf("q=%s|img=%s|max=%d|t=%s|k=%d|p=%s|seed=%d|ieos=%t",
		strconv.Quote(question), imageSHA256, r.MaxTokens,
		strconv.FormatFloat(r.Temperature, 'g', -1, 64), r.TopK,
		strconv.FormatFloat(r.TopP, 'g', -1, 64), r.Seed, r.IgnoreEOS)
	// Settings added later are appended only when set, so the keys of earlier answers hold.
	for _, s := range r.Stop {
		key += "|stop=" + strconv.Quote(s)
	}
	if r.System != nil {
		key += "|sys=" + strconv.Quote(*r.System)
	}
	if b := r.Budget; b != nil && !b.Default {
		key += fmt.Sprintf("|px=%d-%d", b.MinPixels, b.MaxPixels)
	}
	return key
}

// ImageInfo identifies the request's original image.
type ImageInfo struct {
	// SHA256 is the hex digest of the image file's bytes as sent, before any decoding.
	SHA256 string `json:"sha256"`
	Format string `json:"format"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// BundleInfo identifies the bundle that answered.
type BundleInfo struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// Usage counts tokens the way the engine saw them.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	ImageTokens      int `json:"image_tokens"`
}

// Stage names, in pipeline order.
const (
	StageQueue       = "queue"
	StageDecodeImage = "decode_image"
	StagePlan        = "plan"
	StagePixels      = "pixels"
	StageFrame       = "frame"
	StageTokenize    = "tokenize"
	StageVision      = "vision"
	StagePrefill     = "prefill"
	StageDecode      = "decode"
)

// StageTiming is the wall time one pipeline stage took.
type StageTiming struct {
	Stage    string
	Start    time.Time
	Duration time.Duration
}

// Timings lists stage durations in pipeline order.
type Timings []StageTiming

// Get returns the duration recorded for stage, or zero.
func (t Timings) Get(stage string) time.Duration {
	for _, s := range t {
		if s.Stage == stage {
			return s.Duration
		}
	}
	return 0
}

// FinishReason says why generation stopped.
type FinishReason string

// Finish reasons, as OpenAI names them.
const (
	FinishStop   FinishReason = "stop"
	FinishLength FinishReason = "length"
)

// TokenLogprob is one answer token's log-probability: log_softmax of the model's fp32 logits at
// its step (no temperature, top-k or top-p), OpenAI's logprobs.content entry.
type TokenLogprob struct {
	// Token is the token's text: Bytes as UTF-8, a byte sequence that is only part of a
	// character replaced by U+FFFD.
	Token   string
	Bytes   []byte
	Logprob float32
	// Top are the step's most likely tokens, most likely first (Params.TopLogprobs of them).
	Top []TopLogprob
}

// TopLogprob is one of the most likely tokens of a step.
type TopLogprob struct {
	Token   string
	Bytes   []byte
	Logprob float32
}

// Result is a finished request.
type Result struct {
	Text string
	// TokenIDs are the answer's tokens, without the stop token that ended it (Usage counts
	// these).
	TokenIDs []int32
	// StopToken is the stop token the model generated to end the answer; nil when none did (a
	// token limit, a stop string).
	StopToken *int32
	// PromptIDs is the prompt the engine ran, the image's placeholder ids included
	// (Usage.PromptTokens of them); nil from a task that does not report it.
	PromptIDs []int32
	// Logprobs has one entry per token of TokenIDs when Params.Logprobs was set.
	Logprobs []TokenLogprob
	// Boxes are the boxes and points the answer names, for a bundle whose model grounds
	// (generation.grounding); nil otherwise.
	Boxes        []Box
	FinishReason FinishReason
	Usage        Usage
	Image        *ImageInfo
	Bundle       BundleInfo
	Params       Resolved
	Timings      Timings
}

// EventKind tells the events of a running request apart.
type EventKind int

// Event kinds. A request emits one EventStart, then zero or more EventDelta.
const (
	// EventStart: the request was admitted and its prompt built; nothing can be refused as a
	// client error after it.
	EventStart EventKind = iota + 1
	// EventDelta: new answer text.
	EventDelta
)

// Event is what a running request reports before its Result.
type Event struct {
	Kind EventKind
	// Start fields. PromptIDs is Result.PromptIDs, known at the start.
	Usage     Usage
	Image     *ImageInfo
	Bundle    BundleInfo
	PromptIDs []int32
	// Delta fields. TokenIDs are the ids of the Tokens tokens this delta covers (nil from a task
	// that does not report them); the deltas' ids concatenated are Result.TokenIDs.
	Text     string
	Tokens   int
	TokenIDs []int32
	// Logprobs are the entries of the tokens this delta covers, when Params.Logprobs is set; a
	// delta may carry entries and no text (a special token, text held back).
	Logprobs []TokenLogprob
}

// ModelInfo describes a loaded bundle.
type ModelInfo struct {
	Name    string
	Family  string
	Tasks   []Task
	Digest  string
	Created time.Time
	// ContextLength is the bundle's context budget in tokens; MaxNewTokens its default limit.
	ContextLength int
	MaxNewTokens  int
}
