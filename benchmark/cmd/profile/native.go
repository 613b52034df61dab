package profile

import (
	"context"
	"fmt"

	"github.com/iris-vlm/iris/benchmark/parity"
	"github.com/iris-vlm/iris/core"
)

// openNative opens the runtime that answers requests in-process; tests substitute one built
// with a scripted task.
type openNative func(ctx context.Context, bundle string) (parity.Runtime, func() error, error)

// defaultNative opens the bundle with the Iris runtime exactly as `iris serve` does, one worker.
func defaultNative(ctx context.Context, bundle string) (parity.Runtime, func() error, error) {
	rt, err := core.Open(ctx, core.Config{Bundles: []string{bundle}, Workers: 1})
	if err != nil {
		return nil, nil, fmt.Errorf("open native runtime: %w", err)
	}
	return rt, rt.Close, nil
}
