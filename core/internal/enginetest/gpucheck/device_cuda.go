//go:build cuda

package main

import (
	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cuda"
)

// openCUDA opens the GPU backend with its graph and profile hooks.
func openCUDA(opts cuda.Options) (ml.Backend, *device, error) {
	b, err := cuda.NewBackend(opts)
	if err != nil {
		return nil, nil, err
	}
	return b, &device{
		name:       b.Info().Name,
		graphs:     func() (int, error) { return b.GraphRuns(), b.GraphError() },
		setProfile: b.SetProfile,
		setOps:     b.SetProfileOps,
		stages: func() []stageTime {
			var out []stageTime
			for _, s := range b.Profile() {
				out = append(out, stageTime{Stage: s.Stage, TotalMS: s.TotalMS, Calls: s.Calls})
			}
			return out
		},
	}, nil
}
