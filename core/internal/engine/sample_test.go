package engine_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
)

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

// TestLogSoftmax checks LogSoftmax against the definition in float64, and its top list: order,
// ties (lower id first), NaNs skipped, bounds.
func TestLogSoftmax(t *testing.T) {
	ref := func(l []float32, id int) float64 { // log(e^x_id / sum e^x), shifted by the max
		m := math.Inf(-1)
		for _, v := range l {
			if v == v {
				m = math.Max(m, float64(v))
			}
		}
		s := 0.0
		for _, v := range l {
			if v == v {
				s += math.Exp(float64(v) - m)
			}
		}
		return float64(l[id]) - m - math.Log(s)
	}
	tests := []struct {
		name    string
		logits  []float32
		id      int32
		top     int
		wantTop []int32
	}{
		{"plain", []float32{1, 3, 2}, 1, 3, []int32{1, 2, 0}},
		{"not the argmax", []float32{1, 3, 2}, 0, 1, []int32{1}},
		{"ties by id", []float32{2, 5, 5, 1, 5}, 4, 2, []int32{1, 2}},
		{"nan skipped", []float32{nan, 1, nan, 2}, 1, 4, []int32{3, 1}},
		{"no top", []float32{0, 0}, 1, 0, nil},
		{"top over the vocabulary", []float32{0, 1}, 0, 5, []int32{1, 0}},
		{"top over 20", make([]float32, 40), 3, 25, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
		{"large logits", []float32{1000, 1001, 999}, 2, 1, []int32{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := engine.LogSoftmax(tt.logits, tt.id, tt.top)
			if got.ID != tt.id || math.Abs(float64(got.Logprob)-ref(tt.logits, int(tt.id))) > 1e-6 {
				t.Errorf("logprob %+v, want %v", got.Logprob, ref(tt.logits, int(tt.id)))
			}
			if len(got.Top) != len(tt.wantTop) {
				t.Fatalf("top %+v, want ids %v", got.Top, tt.wantTop)
			}
			for i, e := range got.Top {
				if e.ID != tt.wantTop[i] || math.Abs(float64(e.Logprob)-ref(tt.logits, int(e.ID))) > 1e-6 {
					t.Errorf("top[%d] = %+v, want id %d", i, e, tt.wantTop[i])
				}
			}
		})
	}
	if lp := engine.LogSoftmax(nil, 0, 3); !math.IsInf(float64(lp.Logprob), -1) || lp.Top != nil {
		t.Errorf("empty logits: %+v", lp)
	}
}

func BenchmarkLogSoftmax(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := make([]float32, 151936)
	for i := range l {
		l[i] = float32(rng.NormFloat64())
	}
	for b.Loop() {
		engine.LogSoftmax(l, 7, 20)
	}
}

var nan = float32(math.NaN())
