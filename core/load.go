package core

import (
	"context"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/model"
)

// DefaultQueueDepth is how many requests of one model may wait for a worker when the
// configuration sets no depth: a load tool at 128 concurrent requests queues rather than gets
// 429. A waiting request holds its image file's bytes (its pixels are decoded only once a
// worker takes it): tens of KiB for a typical photo, at most 3/4 of the gateway's body cap.
const DefaultQueueDepth = 256

// DefaultWorkers is how many requests of one model run at once when the configuration sets no
// number: the engine batches their passes (continuous batching), so this is also the largest
// batch. Each running request holds its decoded pixels and a KV sequence; more wait in the queue.
const DefaultWorkers = 64

// DefaultBatchTokens caps the tokens of one engine pass when the configuration sets no cap: a
// long prompt is prefilled in chunks of at most this many tokens between the running decodes.
const DefaultBatchTokens = 2048

// DefaultDecodeHold is how long a round of a cuda model's decode steps alone may wait for the
// prompts of images in its tower when the configuration sets no hold (Config.DecodeHold).
const DefaultDecodeHold = engine.DefaultDecodeHold

// MaxVisionLanes bounds Config.VisionLanes: each lane holds a tower pass's scratch and staging
// memory on the device (hundreds of MB at the default patch budget).
const MaxVisionLanes = 4

// KVPooled is implemented by a task whose engine keeps its sequences' KV caches in a pool of
// blocks; Stats reports the pool's use. The default vision-language task reports its engine's
// pool. KVUse is called at any time, concurrently with requests.
type KVPooled interface {
	// KVUse reports the pool's blocks in use and its total.
	KVUse() (used, total int)
}

// poolOf returns the KV pool of the first task that has one, or nil.
func poolOf(tasks ...any) KVPooled {
	for _, t := range tasks {
		switch t := t.(type) {
		case *visionTask:
			// the engine itself: Close drops the task's reference, the pool stays readable
			if p, ok := t.model.(model.Pooled); ok {
				return p
			}
		case KVPooled:
			return t
		}
	}
	return nil
}

// acquire waits for one of the model's workers, counted as waiting meanwhile, then as running.
func (m *servedModel) acquire(ctx context.Context) error {
	m.waiting.Add(1)
	defer m.waiting.Add(-1)
	select {
	case m.workers <- struct{}{}:
		m.running.Add(1)
		return nil
	case <-ctx.Done():
		return AsError(ctx.Err())
	}
}

// release gives the worker back.
func (m *servedModel) release() {
	m.running.Add(-1)
	<-m.workers
}

// stats is a snapshot of the model's load.
func (m *servedModel) stats() Stats {
	s := Stats{
		Model: m.info.Name, Inside: int(m.inside.Load()), Capacity: int(m.limit),
		Queued: int(m.waiting.Load()), Running: int(m.running.Load()),
	}
	if m.kv != nil {
		s.KVUsed, s.KVTotal = m.kv.KVUse()
	}
	if h, ok := m.kv.(model.PromptHeadCache); ok {
		s.HeadCache = true
		s.PromptHeads, s.PromptHeadHits = h.PromptHeads()
	}
	return s
}
