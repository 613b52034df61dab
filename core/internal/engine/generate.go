// Package engine runs a model: the generate loop (vision -> prefill -> decode, streaming each
// token), the sampler, the request checks made before any kernel runs, and the [Scheduler] that
// batches the requests of one model (continuous batching, the vision tower on lanes of its own).
// It drives what a family implements (core/internal/model) and knows no family, no backend and no
// cgo.
//
// # Notes
//
//   - [Check] runs before any kernel: the runtime calls it to refuse a request as a client error,
//     and [Generate] calls it again first.
//   - A [Scheduler] is safe for concurrent use; [Generate] on a model alone is as safe as the
//     model is (one request at a time a sequence).
package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
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
	// IDs is the prompt, each image already expanded to its placeholder ids (model.ImageTokens).
	IDs    []int32
	Images []model.Image
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
	Timings      model.Timings
}

// Encode runs m's vision tower on img: its rows stay on the device when m keeps them there
// (DeviceEncoder; the caller releases e.Device), else they come back to the host.
func Encode(ctx context.Context, m model.Model, img model.Image) (*model.Embeddings, error) {
	if enc, ok := m.(model.DeviceEncoder); ok {
		return enc.EncodeVisionDevice(ctx, img)
	}
	return m.EncodeVision(ctx, img)
}

// Generate runs a request on m alone: Check, the vision tower for each image, prefill, then
// decode steps until a stop token or MaxNewTokens. ctx is checked between steps; on cancellation
// the error wraps ctx.Err(). A [Scheduler] runs requests the same way, several in each pass.
func Generate(ctx context.Context, m model.Model, req Request) (*Result, error) {
	return generate(ctx, m, req, alone(m))
}

// driver is how generate reaches the model: alone, or through a Scheduler's shared passes.
type driver struct {
	// chunk caps the tokens of one prefill input (0: the whole prompt at once); a run of
	// image placeholders is never split.
	chunk int
	// encode runs the vision tower on one image.
	encode func(ctx context.Context, img model.Image) (*model.Embeddings, error)
	// alloc makes the request's sequence; release follows its Close (with its chain, if any).
	alloc   func(ctx context.Context, capacity int) (model.Sequence, error)
	release func(c *chain)
	// step runs one input: a prefill chunk or, with decode, one token. c, when set, continues
	// the sequence after it (a Scheduler's chain; the last prefill chunk of a greedy request).
	step func(ctx context.Context, in model.Input, decode bool, c *chain) (model.Output, error)
	// next, when set, takes a chain's next decode step (queued by the driver itself) and stop
	// ends the chain; without them, every step goes through step.
	next func(ctx context.Context, c *chain) (model.Output, error)
	stop func(c *chain)
}

// alone drives m one request at a time: a Batcher's batch of one, else the Model's own calls.
func alone(m model.Model) driver {
	d := driver{
		encode:  func(ctx context.Context, img model.Image) (*model.Embeddings, error) { return Encode(ctx, m, img) },
		alloc:   func(_ context.Context, n int) (model.Sequence, error) { return m.NewSequence(n) },
		release: func(*chain) {},
	}
	if b, ok := m.(model.Batcher); ok {
		d.step = func(ctx context.Context, in model.Input, _ bool, _ *chain) (model.Output, error) {
			out, err := b.Forward(ctx, []model.Input{in})
			if err != nil {
				return model.Output{}, err
			}
			return out[0], nil
		}
		return d
	}
	greedy, _ := m.(model.GreedyModel)
	d.step = func(ctx context.Context, in model.Input, decode bool, _ *chain) (out model.Output, err error) {
		switch {
		case decode && !in.Logits && greedy != nil:
			out.Argmax, err = greedy.DecodeStepGreedy(ctx, in.Seq, in.IDs[0], in.Positions.T[0])
		case decode:
			out.Logits, err = m.DecodeStep(ctx, in.Seq, in.IDs[0], in.Positions.T[0])
		case !in.Logits && greedy != nil:
			out.Argmax, err = greedy.PrefillGreedy(ctx, in.Seq, model.Prompt{IDs: in.IDs, Positions: in.Positions, Images: in.Images})
		default:
			out.Logits, err = m.Prefill(ctx, in.Seq, model.Prompt{IDs: in.IDs, Positions: in.Positions, Images: in.Images})
		}
		if err == nil && out.Logits != nil {
			out.Argmax = ml.Argmax(out.Logits) // a Model without GreedyModel: the host's choice
		}
		return out, err
	}
	return d
}

func generate(ctx context.Context, m model.Model, req Request, d driver) (*Result, error) {
	cfg := m.Config()
	if err := Check(cfg, m.Limits(), &req); err != nil {
		return nil, err
	}
	res := &Result{PromptTokens: len(req.IDs)}

	start := time.Now()
	embeds := make([]*model.Embeddings, len(req.Images))
	for i, img := range req.Images {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		e := img.Embeddings
		if e == nil {
			var err error
			if e, err = d.encode(ctx, img); err != nil {
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

	pos, err := model.PromptPositionsOf(cfg, req.IDs, req.Images)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	seq, err := d.alloc(ctx, len(req.IDs)+req.MaxNewTokens)
	if err != nil {
		return nil, fmt.Errorf("allocating sequence: %w", err)
	}
	var ch *chain
	defer func() {
		seq.Close()
		d.release(ch)
	}()

	// A greedy request takes each step's argmax from the model (on its device where it can);
	// otherwise the sampler reads the logits.
	logits := !req.Sampling.Greedy() || req.Logprobs
	stop := map[int32]bool{}
	if !req.IgnoreEOS {
		for _, id := range req.StopIDs {
			stop[id] = true
		}
	}
	if d.next != nil && !logits {
		// the driver queues the decode steps: the one after the prompt feeds its token at the
		// prompt's length (plus rope_delta), and at most MaxNewTokens-1 follow the prefill's
		ch = &chain{stop: stop, left: req.MaxNewTokens - 1, pos: int32(len(req.IDs) + pos.Delta)}
		defer d.stop(ch) // before the sequence is freed: a step in a pass writes its cache
	}
	var out model.Output
	start = time.Now()
	image := 0
	tokens := make([]int, len(embeds))
	for i, e := range embeds {
		tokens[i] = e.Tokens
	}
	margin := 0
	if cfg.Text.BidirectionalImage {
		margin = 1 // <|vision_start|> and <|vision_end|> belong to the image's block
	}
	for _, c := range prefillChunks(req.IDs, cfg.ImageTokenID, d.chunk, margin, tokens) {
		in := model.Input{Seq: seq, IDs: req.IDs[c.from:c.to], Positions: pos.Slice(c.from, c.to), Logits: logits && c.to == len(req.IDs)}
		in.Images = embeds[image : image+c.images]
		image += c.images
		var follow *chain
		if c.to == len(req.IDs) {
			follow = ch
		}
		if out, err = d.step(ctx, in, false, follow); err != nil {
			return nil, fmt.Errorf("prefill: %w", err)
		}
	}
	res.Timings.Prefill = time.Since(start)

	sampler := NewSampler(req.Sampling)
	start = time.Now()
	defer func() { res.Timings.Decode = time.Since(start) }()
	for {
		tok := out.Argmax
		if logits {
			tok = sampler.Sample(out.Logits)
		}
		if stop[tok] {
			res.Finish, res.StopToken = FinishStop, tok
			return res, nil
		}
		res.Tokens = append(res.Tokens, tok)
		if req.Logprobs {
			lp := LogSoftmax(out.Logits, tok, req.TopLogprobs)
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
		if ch != nil {
			out, err = d.next(ctx, ch)
		} else {
			// The token sits at absolute index len(prompt)+len(answer)-1 and rotates at that
			// index plus rope_delta on all three axes.
			at := int32(len(req.IDs) + len(res.Tokens) - 1 + pos.Delta)
			out, err = d.step(ctx, model.DecodeInput(seq, tok, at, logits), true, nil)
		}
		if err != nil {
			return nil, fmt.Errorf("decode step %d: %w", len(res.Tokens), err)
		}
	}
}

// chunk is a piece of a prompt's prefill: tokens [from, to) holding images whole images.
type chunk struct{ from, to, images int }

// prefillChunks cuts a prompt into pieces of at most limit tokens (all of it when limit <= 0),
// never inside an image: from margin tokens before its first placeholder to margin tokens after
// its last (an image's placeholders may lie in several runs, tokens[i] of them in all for image
// i; margin 1 keeps a bidirectional block, <|vision_start|> ... <|vision_end|>, whole), a unit
// that a piece holds whole, alone when it is longer than limit.
func prefillChunks(ids []int32, imageID int32, limit, margin int, tokens []int) []chunk {
	if limit <= 0 {
		limit = len(ids)
	}
	var out []chunk
	c := chunk{}
	image := 0
	for i := 0; i < len(ids); {
		// the next unit: one text token, or a whole image with its margin
		j, isImage := i+1, ids[i] == imageID
		if !isImage && margin > 0 && image < len(tokens) && i+margin < len(ids) && ids[i+margin] == imageID {
			isImage = true // the image's block begins here
		}
		if isImage {
			for left := tokens[image]; ; j++ {
				if ids[j-1] == imageID {
					left--
				}
				if left == 0 || j == len(ids) {
					break
				}
			}
			j = min(j+margin, len(ids))
		}
		if j-c.from > limit && i > c.from {
			c.to = i
			out = append(out, c)
			c = chunk{from: i}
		}
		if isImage {
			c.images++
			image++
		}
		if i = j; i-c.from >= limit {
			c.to = i
			out = append(out, c)
			c = chunk{from: i}
		}
	}
	if c.from < len(ids) {
		c.to = len(ids)
		out = append(out, c)
	}
	return out
}
