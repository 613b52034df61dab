package engine_test

import (
	"math"
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
	}
	for _, tt := range tests {
		if got := engine.Argmax(tt.logits); got != tt.want {
			t.Errorf("Argmax(%v) = %d, want %d", tt.logits, got, tt.want)
		}
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
