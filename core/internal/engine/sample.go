package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// Sampling selects the next token from logits.
type Sampling struct {
	// Temperature divides the logits; 0 selects the argmax (greedy).
	Temperature float64
	// TopK keeps the K most likely tokens; 0 keeps all, 1 is greedy.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability reaches P; 0 or 1
	// keeps all.
	TopP float64
	// Seed seeds the random draws, so equal requests sample equal tokens.
	Seed int64
}

// Greedy reports whether the settings always pick the argmax.
func (s Sampling) Greedy() bool { return s.Temperature == 0 || s.TopK == 1 }

func checkSampling(s Sampling) error {
	if math.IsNaN(s.Temperature) || math.IsInf(s.Temperature, 0) || s.Temperature < 0 {
		return fmt.Errorf("temperature %v: %w", s.Temperature, ml.ErrInvalidInput)
	}
	if s.TopK < 0 {
		return fmt.Errorf("top_k %d: %w", s.TopK, ml.ErrInvalidInput)
	}
	if math.IsNaN(s.TopP) || s.TopP < 0 || s.TopP > 1 {
		return fmt.Errorf("top_p %v: %w", s.TopP, ml.ErrInvalidInput)
	}
	return nil
}

// Sampler draws tokens for one request. It is not safe for concurrent use.
type Sampler struct {
	s    Sampling
	rng  *rand.Rand
	cand []candidate
}

type candidate struct {
	id    int32
	logit float32
	p     float64
}

// NewSampler returns a sampler whose draws depend only on s (its Seed included).
func NewSampler(s Sampling) *Sampler {
	seed := uint64(s.Seed)
	return &Sampler{s: s, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Sample picks the next token: the argmax when greedy, otherwise a draw after temperature,
// top-k and top-p, in that order (the order of transformers' logits warpers).
func (sm *Sampler) Sample(logits []float32) int32 {
	if sm.s.Greedy() || len(logits) == 0 {
		return ml.Argmax(logits)
	}
	t := float32(sm.s.Temperature)
	maxLogit := logits[ml.Argmax(logits)]
	// Tokens more than 28 temperature units below the best have probability below e^-28
	// relative to it; dropping them first keeps the sort short without changing any draw that
	// matters.
	floor := maxLogit - 28*t
	c := sm.cand[:0]
	for i, v := range logits {
		if v >= floor {
			c = append(c, candidate{id: int32(i), logit: v})
		}
	}
	slices.SortFunc(c, func(a, b candidate) int {
		if r := cmp.Compare(b.logit, a.logit); r != 0 {
			return r
		}
		return cmp.Compare(a.id, b.id)
	})
	if k := sm.s.TopK; k > 0 && k < len(c) {
		c = c[:k]
	}
	sum := 0.0
	top := float64(c[0].logit) / float64(t)
	for i := range c {
		c[i].p = math.Exp(float64(c[i].logit)/float64(t) - top)
		sum += c[i].p
	}
	if p := sm.s.TopP; p > 0 && p < 1 {
		acc := 0.0
		for i := range c {
			acc += c[i].p / sum
			if acc >= p {
				c = c[:i+1]
				break
			}
		}
		sum = 0
		for i := range c {
			sum += c[i].p
		}
	}
	sm.cand = c
	u := sm.rng.Float64() * sum
	for i := range c {
		u -= c[i].p
		if u < 0 {
			return c[i].id
		}
	}
	return c[len(c)-1].id
}

// MaxTopLogprobs is the most alternatives a [TokenLogprob] lists (OpenAI's top_logprobs bound).
const MaxTopLogprobs = 20

// Logprob is a token and its log-probability.
type Logprob struct {
	ID      int32
	Logprob float32
}

// TokenLogprob is the log-probability of one answer token and the most likely tokens of its step.
type TokenLogprob struct {
	ID      int32
	Logprob float32
	// Top are the TopLogprobs most likely tokens of the step, most likely first (ties by id).
	Top []Logprob
}

// LogSoftmax returns the log-probability of token id under logits (log_softmax of the raw fp32
// logits: no temperature, top-k or top-p applied, the model's own distribution, as OpenAI and
// vLLM report it) and the top most likely tokens. The normaliser is summed in float64 over the
// whole vocabulary, so the result is as exact as the logits (transformers' within 1e-6 on the
// fixtures). NaN logits are skipped.
func LogSoftmax(logits []float32, id int32, top int) TokenLogprob {
	if len(logits) == 0 || id < 0 || int(id) >= len(logits) {
		return TokenLogprob{ID: id, Logprob: float32(math.Inf(-1))}
	}
	maxLogit := float64(logits[ml.Argmax(logits)])
	// Terms more than 40 below the largest add under e^-40 x vocabulary (1e-12 for Qwen's 152k)
	// to a sum of at least 1: skipping their exp changes nothing a float32 holds and spares most
	// of the pass on a trained model's peaked logits.
	sum := 0.0
	for _, v := range logits {
		if d := float64(v) - maxLogit; d > -40 { // false for NaN too
			sum += math.Exp(d)
		}
	}
	lse := maxLogit + math.Log(sum)
	out := TokenLogprob{ID: id, Logprob: float32(float64(logits[id]) - lse)}
	top = min(top, MaxTopLogprobs, len(logits))
	if top <= 0 {
		return out
	}
	// A sorted insertion into top slots: one pass over the vocabulary, no allocation per token.
	best := make([]Logprob, 0, top)
	for i, v := range logits {
		if v != v || (len(best) == top && v <= best[top-1].Logprob) {
			continue
		}
		j := len(best)
		if j < top {
			best = append(best, Logprob{})
		} else {
			j = top - 1
		}
		for j > 0 && best[j-1].Logprob < v {
			best[j] = best[j-1]
			j--
		}
		best[j] = Logprob{ID: int32(i), Logprob: v}
	}
	for i := range best {
		best[i].Logprob = float32(float64(best[i].Logprob) - lse)
	}
	out.Top = best
	return out
}
