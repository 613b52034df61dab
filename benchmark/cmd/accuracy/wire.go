package main

// The request and answer shapes the client writes and reads. Its own rather than
// gateway/openai's: that package brings the runtime (cgo included) into the binary, and this
// command travels to the GPU machine, where every megabyte of the carry counts (6.8 MB
// compressed with them, about 1.5 without). The tests decode with gateway/openai's types, so
// the two cannot drift apart unnoticed.
type chatRequest struct {
	Model          string    `json:"model"`
	Messages       []message `json:"messages"`
	MaxTokens      int       `json:"max_tokens"`
	Temperature    float64   `json:"temperature"`
	ReturnTokenIDs bool      `json:"return_token_ids"`
	IgnoreEOS      bool      `json:"ignore_eos,omitempty"`
}

type message struct {
	Role    string        `json:"role"`
	Content []contentPart `json:"content"`
}

type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageRef `json:"image_url,omitempty"`
}

type imageRef struct {
	URL string `json:"url"`
}

type chatCompletion struct {
	Choices []choice `json:"choices"`
}

type choice struct {
	Message struct {
		Content string `json:"content"`
	} `json:"message"`
	TokenIDs     []int32 `json:"token_ids"`
	FinishReason string  `json:"finish_reason"`
}
