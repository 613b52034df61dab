package openai

import "github.com/iris-vlm/iris/core"

// CoreRequest is the one mapping from a parsed chat request to the runtime's request. The HTTP
// handler and the profiler's native run both use it, so the two paths cannot drift apart (the
// upstream mistake was generation settings read from different places by each path).
// image is the image file's bytes (the data URL's, or the fetched URL's); nil for text only.
func CoreRequest(r *Request, image []byte, requestID, correlationID string) core.Request {
	return core.Request{
		ID:            requestID,
		CorrelationID: correlationID,
		Model:         r.Model,
		Text:          r.Text,
		Image:         image,
		TextFirst:     r.TextFirst,
		Params: core.Params{
			MaxTokens:   r.MaxTokens,
			Temperature: r.Temperature,
			TopK:        r.TopK,
			TopP:        r.TopP,
			Seed:        r.Seed,
			IgnoreEOS:   r.IgnoreEOS,
			Stop:        r.Stop,
			System:      r.System,
		},
	}
}
