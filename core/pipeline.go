package core

import (
	"context"
	"errors"

	"github.com/iris-vlm/iris/bundles"
)

func defaultVisionTask(ctx context.Context, b *bundles.Bundle, env *TaskEnv) (VisionTask, error) {
	return nil, errors.New("not wired yet")
}

func defaultTextTask(ctx context.Context, b *bundles.Bundle, env *TaskEnv) (TextTask, error) {
	return nil, errors.New("not wired yet")
}
