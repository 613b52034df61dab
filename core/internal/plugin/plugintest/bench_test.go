package plugintest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/iris-vlm/iris/core/internal/plugin"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// BenchmarkPlanFrame measures one request's plugin work (plan, then frame) for a 640x480 image
// on the Qwen2.5-VL plugin: on pooled (warm) instances, and on a fresh instance per call
// (MaxCalls 1: every call pays the Go runtime's start-up). Besides the mean it reports the
// median and 99th percentile per request (p50-ns, p99-ns), the figures the budget is about.
//
//	go test -run '^$' -bench PlanFrame -benchtime 3000x ./core/internal/plugin/plugintest
func BenchmarkPlanFrame(b *testing.B) {
	wasm := BuildFamily(b, "qwen2_5_vl")
	h := NewHost(b, plugin.Options{})
	for _, bc := range []struct {
		name string
		lim  plugin.Limits
	}{
		{"pooled", plugin.Limits{Instances: 1}},
		{"fresh", plugin.Limits{Instances: 1, MaxCalls: 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := Load(b, h, "qwen2_5_vl", wasm, bc.lim)
			ctx := context.Background()
			img := abi.ImageHeader{Width: 640, Height: 480, Format: "jpeg"}
			var took, plans []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				pl, err := p.Plan(ctx, img, nil)
				if err != nil {
					b.Fatal(err)
				}
				plans = append(plans, time.Since(start))
				if _, err := p.Frame(ctx, abi.FrameRequest{Question: "What is in this image?", Plan: pl}); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			slices.Sort(plans)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(plans[len(plans)/2].Nanoseconds()), "plan-p50-ns")
		})
	}
}
