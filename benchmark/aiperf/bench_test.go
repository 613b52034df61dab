package aiperf

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func BenchmarkSummarize(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		xs := make([]float64, n)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range xs {
			xs[i] = 5e7 + r.NormFloat64()*1e7
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				_, _ = Summarize(xs)
			}
		})
	}
}

// BenchmarkParseAnswer reads a 64-chunk stream, the per-record cost of the profiler's parsing.
func BenchmarkParseAnswer(b *testing.B) {
	var rs []Response
	for i := range 64 {
		rs = append(rs, ParseSSE([]byte(`data: {"id":"r","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"}}]}`), int64(i)))
	}
	rs = append(rs, ParseSSE([]byte(`data: {"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":300,"completion_tokens":64,"total_tokens":364}}`), 65))
	b.ReportAllocs()
	for b.Loop() {
		a := ParseAnswer(rs)
		if len(a.Contents) != 64 {
			b.Fatal(len(a.Contents))
		}
	}
}
