// Package models is the family table of the engine: which family runs a checkpoint's model_type,
// and loading a checkpoint directory onto a backend with it. A family lives in its own folder
// (qwen25vl, ...) and is written once over core/internal/ml; backends never appear here.
package models

import (
	"fmt"
	"slices"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models/deepseekocr2"
	"github.com/iris-vlm/iris/core/internal/models/internal/kit"
	"github.com/iris-vlm/iris/core/internal/models/internvl"
	"github.com/iris-vlm/iris/core/internal/models/lance"
	"github.com/iris-vlm/iris/core/internal/models/locateanything"
	"github.com/iris-vlm/iris/core/internal/models/phi4mm"
	"github.com/iris-vlm/iris/core/internal/models/qwen25vl"
	"github.com/iris-vlm/iris/core/internal/models/qwen3vl"
)

// Options tune a load.
type Options struct {
	// Limits bound requests; nil means model.DefaultLimits of the config.
	Limits *model.Limits
	// KVTokens sizes the KV pool (0: the family's default).
	KVTokens int
	// VisionLane runs the vision tower on a lane of the backend, beside the decoder's passes
	// (kit.Options.VisionLane).
	VisionLane bool
	// VisionLanes is how many lanes the tower gets (kit.Options.VisionLanes).
	VisionLanes int
	// Heads is how many prompt heads keep their KV rows for reuse (kit.Options.Heads).
	Heads int
}

// model is what every family's model takes of o (each family's Options is kit.Options).
func (o Options) model() kit.Options {
	return kit.Options{KVTokens: o.KVTokens, VisionLane: o.VisionLane, VisionLanes: o.VisionLanes, Heads: o.Heads}
}

// Family builds a model of one model_type on a backend.
type Family struct {
	ModelType string
	New       func(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (model.Model, error)
}

var families = map[string]Family{
	deepseekocr2.ModelType: {
		ModelType: deepseekocr2.ModelType,
		New: func(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (model.Model, error) {
			return deepseekocr2.New(b, ck, cfg, lim, opts.model())
		},
	},
	internvl.ModelType: {
		ModelType: internvl.ModelType,
		New: func(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (model.Model, error) {
			return internvl.New(b, ck, cfg, lim, opts.model())
		},
	},
	phi4mm.ModelType: {
		ModelType: phi4mm.ModelType,
		New: func(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (model.Model, error) {
			return phi4mm.New(b, ck, cfg, lim, opts.model())
		},
	},
	locateanything.ModelType: {
		ModelType: locateanything.ModelType,
		New: func(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (model.Model, error) {
			return locateanything.New(b, ck, cfg, lim, opts.model())
		},
	},
	lance.ModelType: {
		ModelType: lance.ModelType,
		New: func(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (model.Model, error) {
			return lance.New(b, ck, cfg, lim, opts.model())
		},
	},
	qwen25vl.ModelType: {
		ModelType: qwen25vl.ModelType,
		New: func(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (model.Model, error) {
			return qwen25vl.New(b, ck, cfg, lim, opts.model())
		},
	},
	qwen3vl.ModelType: {
		ModelType: qwen3vl.ModelType,
		New: func(b ml.Backend, ck *ml.Checkpoint, cfg *model.Config, lim model.Limits, opts Options) (model.Model, error) {
			return qwen3vl.New(b, ck, cfg, lim, opts.model())
		},
	},
}

// ModelTypes lists the model types the engine runs, sorted.
func ModelTypes() []string {
	out := make([]string, 0, len(families))
	for k := range families {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Load reads dir's config.json, maps its safetensors and binds them on b with the family of the
// config's model_type. The model owns b from here on (its Close closes b), also on failure.
func Load(dir string, b ml.Backend, opts Options) (model.Model, error) {
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		b.Close()
		return nil, err
	}
	fam, ok := families[cfg.ModelType]
	if !ok {
		b.Close()
		return nil, fmt.Errorf("model_type %q (the engine runs %v): %w", cfg.ModelType, ModelTypes(), model.ErrUnsupported)
	}
	lim := model.DefaultLimits(cfg)
	if opts.Limits != nil {
		lim = *opts.Limits
	}
	ck, err := ml.OpenCheckpoint(dir)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("opening the checkpoint: %w", err)
	}
	m, err := fam.New(b, ck, cfg, lim, opts)
	if err != nil {
		return nil, fmt.Errorf("loading %s on %s: %w", cfg.ModelType, b.Name(), err)
	}
	return m, nil
}
