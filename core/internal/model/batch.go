package model

import "context"

// Input is one sequence's part of a batch: a prefill chunk (its tokens, their rotary positions and
// the image rows of the placeholders among them) or one decode token.
type Input struct {
	Seq Sequence
	IDs []int32
	// Positions has one (t, h, w) entry per id; Delta is ignored.
	Positions Positions
	// Images replace, in order, the embeddings of the Config.ImageTokenID placeholders in IDs.
	Images []*Embeddings
	// Logits asks for the last token's logits, not only their argmax.
	Logits bool
}

// Output is what a batch gives one sequence: the argmax of its last token's logits and, when
// asked, the logits themselves (the sequence's: valid until its next call).
type Output struct {
	Argmax int32
	Logits []float32
}

// Batcher is a [Model] whose forward pass takes a batch: several sequences, each with its own KV
// cache, positions and images, in one pass over the weights. A single request is a batch of one;
// a sequence gives the same tokens alone or in any batch.
type Batcher interface {
	// Forward appends each input's tokens to its sequence and returns one Output per input, in
	// order. A sequence may appear at most once in a batch.
	Forward(ctx context.Context, batch []Input) ([]Output, error)
}

// PromptHeadCache is a [Model] that keeps the KV rows of prompt heads (the tokens before a
// prompt's first image) for the next prompts that start with them.
type PromptHeadCache interface {
	// PromptHeads reports the heads kept and how many prompts copied one so far.
	PromptHeads() (kept int, hits int64)
}

// Pooled is a [Model] whose sequences draw their KV caches from a pool of blocks.
type Pooled interface {
	// KVUse reports the pool's blocks in use and its total.
	KVUse() (used, total int)
}

// DecodeInput is the Input of one decode step: token at rotary position pos on all three axes.
func DecodeInput(seq Sequence, token, pos int32, logits bool) Input {
	return Input{Seq: seq, IDs: []int32{token}, Positions: Positions{T: []int32{pos}, H: []int32{pos}, W: []int32{pos}}, Logits: logits}
}
