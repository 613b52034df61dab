package openai

import (
	"strconv"

	"github.com/iris-vlm/iris/core"
)

// CoreRequest is the one mapping from a parsed chat request to the runtime's request. The HTTP
// handler and the profiler's native run both use it, so the two paths cannot drift apart (the
// upstream mistake was generation settings read from different places by each path).
// image is the image file's bytes (the data URL's, or the fetched URL's); nil for text only.
func CoreRequest(r *Request, image []byte, requestID, correlationID string) core.Request {
	detail := ""
	if r.Image != nil {
		detail = r.Image.Detail
	}
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
			Logprobs:    r.Logprobs,
			TopLogprobs: r.TopLogprobs,
			Detail:      detail,
			MinPixels:   r.MinPixels,
			MaxPixels:   r.MaxPixels,
		},
	}
}

// LogprobsOf converts the runtime's logprobs entries to their wire form; nil for none.
func LogprobsOf(entries []core.TokenLogprob) *Logprobs {
	if entries == nil {
		return nil
	}
	out := &Logprobs{Content: make([]TokenLogprob, len(entries))}
	for i, e := range entries {
		c := TokenLogprob{Token: e.Token, Logprob: shortest(e.Logprob), Bytes: ints(e.Bytes), TopLogprobs: make([]TopLogprob, len(e.Top))}
		for j, a := range e.Top {
			c.TopLogprobs[j] = TopLogprob{Token: a.Token, Logprob: shortest(a.Logprob), Bytes: ints(a.Bytes)}
		}
		out.Content[i] = c
	}
	return out
}

// shortest widens a float32 to the float64 with its shortest decimal spelling (-0.1, not
// -0.10000000149011612): the same float32 when read back, fewer bytes on the wire.
func shortest(f float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil { // ±Inf spelled "+Inf": keep the value
		return float64(f)
	}
	return v
}

// ints spells bytes as OpenAI does: a JSON array of integers, not base64.
func ints(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}
