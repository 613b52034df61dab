package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrStop, returned by Request.OnToken, ends generation normally with FinishStop after that
// token: the caller found a stop string in the text so far.
var ErrStop = errors.New("stop requested")

// FinishReason says why generation stopped, with OpenAI's names.
type FinishReason string

// Finish reasons.
const (
	FinishStop   FinishReason = "stop"   // a stop token was sampled
	FinishLength FinishReason = "length" // MaxNewTokens were generated
)

// Request is one generation: a tokenized prompt whose image placeholder runs match Images.
type Request struct {
	// IDs is the prompt, each image already expanded to Grid.Tokens placeholder ids.
	IDs    []int32
	Images []Image
	// MaxNewTokens caps the generated tokens (a sampled stop token does not count).
	MaxNewTokens int
	Sampling     Sampling
	// StopIDs end generation when sampled; the stop token is not part of the answer.
	StopIDs []int32
	// IgnoreEOS disables StopIDs: exactly MaxNewTokens tokens are generated.
	IgnoreEOS bool
	// Logprobs asks for each answer token's log-probability ([LogSoftmax]) and its step's
	// TopLogprobs most likely tokens (at most [MaxTopLogprobs]). It needs the logits on the
	// host, so a [GreedyModel]'s device argmax is not used.
	Logprobs    bool
	TopLogprobs int
	// OnLogprob, if set with Logprobs, receives each answer token's entry just before OnToken
	// receives the token.
	OnLogprob func(TokenLogprob)
	// OnToken, if set, receives each answer token as soon as it is sampled (streaming); an
	// error it returns ends generation with that error, except [ErrStop], which ends it with
	// FinishStop, the token kept.
	OnToken func(id int32) error
}

// Result is a finished generation.
type Result struct {
	// Tokens is the answer, without the stop token.
	Tokens []int32
	// Logprobs has one entry per token of Tokens when Request.Logprobs was set.
	Logprobs []TokenLogprob
	Finish   FinishReason
	// StopToken is the sampled stop id when a stop token ended the answer (not [ErrStop]).
	StopToken int32
	// PromptTokens counts the prompt (image tokens included); ImageTokens the image tokens.
	PromptTokens int
	ImageTokens  int
	Timings      Timings
}

// Encode runs m's vision tower on img: its rows stay on the device when m keeps them there
// (DeviceEncoder; the caller releases e.Device), else they come back to the host.
func Encode(ctx context.Context, m Model, img Image) (*Embeddings, error) {
	if enc, ok := m.(DeviceEncoder); ok {
		return enc.EncodeVisionDevice(ctx, img)
	}
	return m.EncodeVision(ctx, img)
}

// Generate runs a request on m: Check, the vision tower for each image, prefill, then decode
// steps until a stop token or MaxNewTokens. ctx is checked between steps; on cancellation the
// error wraps ctx.Err().
func Generate(ctx context.Context, m Model, req Request) (*Result, error) {
	cfg := m.Config()
	if err := Check(cfg, m.Limits(), &req); err != nil {
		return nil, err
	}
	res := &Result{PromptTokens: len(req.IDs)}

	start := time.Now()
	grids := make([]Grid, len(req.Images))
	embeds := make([]*Embeddings, len(req.Images))
	for i, img := range req.Images {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		grids[i] = img.Grid
		e := img.Embeddings
		if e == nil {
			var err error
			if e, err = Encode(ctx, m, img); err != nil {
				return nil, fmt.Errorf("encoding image %d: %w", i, err)
			}
			if e.Device != nil {
				defer e.Device.Release()
			}
		}
		embeds[i] = e
		res.ImageTokens += e.Tokens
	}
	res.Timings.Vision = time.Since(start)

	pos, err := PromptPositions(cfg, req.IDs, grids)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	seq, err := m.NewSequence(len(req.IDs) + req.MaxNewTokens)
	if err != nil {
		return nil, fmt.Errorf("allocating sequence: %w", err)
	}
	defer seq.Close()

	// A greedy request on a GreedyModel gets each step's argmax from the device; otherwise the
	// sampler reads the logits.
	greedy, _ := m.(GreedyModel)
	if !req.Sampling.Greedy() || req.Logprobs {
		greedy = nil
	}
	var (
		logits []float32
		tok    int32
	)
	start = time.Now()
	prompt := Prompt{IDs: req.IDs, Positions: pos, Images: embeds}
	if greedy != nil {
		tok, err = greedy.PrefillGreedy(ctx, seq, prompt)
	} else {
		logits, err = m.Prefill(ctx, seq, prompt)
	}
	if err != nil {
		return nil, fmt.Errorf("prefill: %w", err)
	}
	res.Timings.Prefill = time.Since(start)

	stop := map[int32]bool{}
	if !req.IgnoreEOS {
		for _, id := range req.StopIDs {
			stop[id] = true
		}
	}
	sampler := NewSampler(req.Sampling)
	start = time.Now()
	defer func() { res.Timings.Decode = time.Since(start) }()
	for {
		if greedy == nil {
			tok = sampler.Sample(logits)
		}
		if stop[tok] {
			res.Finish, res.StopToken = FinishStop, tok
			return res, nil
		}
		res.Tokens = append(res.Tokens, tok)
		if req.Logprobs {
			lp := LogSoftmax(logits, tok, req.TopLogprobs)
			res.Logprobs = append(res.Logprobs, lp)
			if req.OnLogprob != nil {
				req.OnLogprob(lp)
			}
		}
		if req.OnToken != nil {
			if err := req.OnToken(tok); errors.Is(err, ErrStop) {
				res.Finish = FinishStop
				return res, nil
			} else if err != nil {
				return nil, err
			}
		}
		if len(res.Tokens) == req.MaxNewTokens {
			res.Finish = FinishLength
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		// The token sits at absolute index len(prompt)+len(answer)-1 and rotates at that
		// index plus rope_delta on all three axes.
		at := int32(len(req.IDs) + len(res.Tokens) - 1 + pos.Delta)
		if greedy != nil {
			tok, err = greedy.DecodeStepGreedy(ctx, seq, tok, at)
		} else {
			logits, err = m.DecodeStep(ctx, seq, tok, at)
		}
		if err != nil {
			return nil, fmt.Errorf("decode step %d: %w", len(res.Tokens), err)
		}
	}
}
