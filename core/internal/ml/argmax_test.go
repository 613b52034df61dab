package ml_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
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
		if got := ml.Argmax(tt.logits); got != tt.want {
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
		if got := ml.Argmax(l); got != int32(want) {
			t.Fatalf("Argmax(%v) = %d, want %d", l, got, want)
		}
	}
}

// BenchmarkArgmax is one greedy step over Qwen's vocabulary.
func BenchmarkArgmax(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := make([]float32, 151936)
	for i := range l {
		l[i] = rng.Float32()
	}
	for b.Loop() {
		ml.Argmax(l)
	}
}

var nan = float32(math.NaN())

func inf(sign int) float32 { return float32(math.Inf(sign)) }
