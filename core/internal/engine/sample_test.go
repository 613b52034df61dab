package engine_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
)

func TestArgmax(t *testing.T) {
	tests := []struct {
		logits []float32
		want   int32
	}{
		{[]float32{0, 3, 1}, 1},
		{[]float32{2, 5, 5}, 1}, // first of equal maxima, as torch.argmax
		{[]float32{-3, -2, -9}, 1},
		{[]float32{7}, 0},
		{[]float32{nan, 1, nan, 2, 0}, 3}, // NaNs are never picked
		{[]float32{nan, nan}, 0},
		{[]float32{inf(-1), inf(-1)}, 0},
		{[]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}, 18}, // in the tail
		{[]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 11, 12, 13, 14, 15, 20, 17, 18}, 10},
	}
	for _, tt := range tests {
		if got := engine.Argmax(tt.logits); got != tt.want {
			t.Errorf("Argmax(%v) = %d, want %d", tt.logits, got, tt.want)
		}
	}
	// against the plain loop, on vocabularies of small integers (many ties) of every length mod 8
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 1; n < 300; n++ {
		l := make([]float32, n)
		for i := range l {
			l[i] = float32(rng.IntN(7))
		}
		want := 0
		for i, v := range l {
			if v > l[want] {
				want = i
			}
		}
		if got := engine.Argmax(l); got != int32(want) {
			t.Fatalf("Argmax(%v) = %d, want %d", l, got, want)
		}
	}
}

var nan = float32(math.NaN())

func inf(sign int) float32 { return float32(math.Inf(sign)) }

// BenchmarkArgmax is one greedy step over Qwen's vocabulary.
func BenchmarkArgmax(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := make([]float32, 151936)
	for i := range l {
		l[i] = rng.Float32()
	}
	for b.Loop() {
		engine.Argmax(l)
	}
}

func TestSampleGreedySettings(t *testing.T) {
	logits := []float32{0.1, 2, 1.9, -1}
	for _, s := range []engine.Sampling{
		{},                            // temperature 0
		{Temperature: 1.5, TopK: 1},   // top_k 1
		{Temperature: 1, TopP: 1e-9},  // top_p keeps only the best
		{Temperature: 1e-6, Seed: 42}, // a tiny temperature keeps only the best
	} {
		sm := engine.NewSampler(s)
		for range 50 {
			if got := sm.Sample(logits); got != 1 {
				t.Fatalf("%+v: sampled %d, want the argmax 1", s, got)
			}
		}
	}
}

func TestSampleSeeded(t *testing.T) {
	logits := make([]float32, 100)
	for i := range logits {
		logits[i] = float32(i%7) * 0.3
	}
	draw := func(seed int64) []int32 {
		sm := engine.NewSampler(engine.Sampling{Temperature: 1, Seed: seed})
		out := make([]int32, 64)
		for i := range out {
			out[i] = sm.Sample(logits)
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	same := func(x, y []int32) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("equal seeds drew different tokens")
	}
	if same(a, c) {
		t.Error("different seeds drew the same 64 tokens")
	}
}

// TestSampleDistribution checks the draw frequencies against softmax(logits / T), and that
// top-k and top-p cut where they should.
func TestSampleDistribution(t *testing.T) {
	logits := []float32{1, 2, 3, -50}
	const n = 200000
	tests := []struct {
		name string
		s    engine.Sampling
		want []float64
	}{
		{"temperature 1", engine.Sampling{Temperature: 1, Seed: 1}, softmax([]float64{1, 2, 3}, 1)},
		{"temperature 2", engine.Sampling{Temperature: 2, Seed: 2}, softmax([]float64{1, 2, 3}, 2)},
		{"top_k 2", engine.Sampling{Temperature: 1, TopK: 2, Seed: 3}, append([]float64{0}, softmax([]float64{2, 3}, 1)...)},
		// probabilities 0.090, 0.245, 0.665: top_p 0.8 keeps the two best
		{"top_p 0.8", engine.Sampling{Temperature: 1, TopP: 0.8, Seed: 4}, append([]float64{0}, softmax([]float64{2, 3}, 1)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sm := engine.NewSampler(tt.s)
			counts := make([]float64, len(logits))
			for range n {
				counts[sm.Sample(logits)]++
			}
			for i, p := range tt.want {
				if got := counts[i] / n; math.Abs(got-p) > 0.005 {
					t.Errorf("token %d drawn %.4f of the time, want %.4f", i, got, p)
				}
			}
			if counts[3] != 0 {
				t.Errorf("token 3 (probability e^-51) drawn %v times", counts[3])
			}
		})
	}
}

func softmax(x []float64, t float64) []float64 {
	out := make([]float64, len(x))
	sum := 0.0
	for i, v := range x {
		out[i] = math.Exp(v / t)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}
