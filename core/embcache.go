package core

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/embcache"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/prep"
)

// DefaultEmbeddingCacheBytes is the image-embedding cache a server gives each model unless its
// config says otherwise (gateway runtime.embedding_cache_bytes): 256 MiB. core's own zero
// value (Config.EmbeddingCacheBytes 0) disables the cache.
const DefaultEmbeddingCacheBytes = 256 << 20

// StageVisionCached replaces StageVision in the timings of a request whose image embeddings came
// from the image-embedding cache (the vision tower did not run); its duration is the lookup's.
const StageVisionCached = "vision_cached"

// embedCache is a vision task's image-embedding cache: the vision tower's outputs of recent
// images, kept where the engine made them (on the device for an model.DeviceEncoder, in host
// memory otherwise), keyed by everything that changes them.
type embedCache struct {
	c *embcache.Cache
	// ident is the bundle's digest (weights, config, plugin: bundle.toml lists every file's)
	// and the plugin's own digest.
	ident []byte
	// devElem is the size of one element of device rows (the bundle's precision).
	devElem int
	lookups *prometheus.CounterVec
}

// newEmbedCache builds the cache of a bundle's vision task and registers its metrics; nil when
// capBytes is 0 (disabled).
func newEmbedCache(b *bundles.Bundle, capBytes int64, reg prometheus.Registerer) (*embedCache, error) {
	c := embcache.New(capBytes)
	if c == nil {
		return nil, nil
	}
	m := b.Manifest
	ec := &embedCache{c: c, ident: []byte(b.Digest + "\x00" + m.Plugin.SHA256), devElem: 4}
	if m.Engine.Precision == "bf16" {
		ec.devElem = 2
	}
	ec.lookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "iris_embedding_cache_lookups_total",
		Help: "Image-embedding cache lookups of image requests: result hit (the vision tower skipped) or miss.",
	}, []string{"result"})
	used := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "iris_embedding_cache_bytes",
		Help: "Bytes of image embeddings the cache holds (tokens x row width x element size).",
	}, func() float64 { _, n := c.Stats(); return float64(n) })
	capacity := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "iris_embedding_cache_capacity_bytes",
		Help: "The image-embedding cache's byte cap (runtime.embedding_cache_bytes).",
	}, func() float64 { return float64(c.Cap()) })
	for _, col := range []prometheus.Collector{ec.lookups, used, capacity} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("register embedding cache metrics: %w", err)
		}
	}
	ec.lookups.WithLabelValues("hit")
	ec.lookups.WithLabelValues("miss")
	return ec, nil
}

// cachedVision is how one request got its image rows.
type cachedVision struct {
	hit  bool          // the rows came from it: no vision tower
	took time.Duration // the lookup, and on a miss the encoding
	done func()        // ends the request's use of the rows
}

// encodeFunc runs a model's vision tower on one image (the scheduler's, or the model's own).
type encodeFunc func(ctx context.Context, img model.Image) (*model.Embeddings, error)

// embed sets img.Embeddings from the cache, or encodes img (and caches the result when there
// is a cache and an image digest). The caller calls done once the engine is finished with the
// rows; img's pixels are not needed after embed.
func (ec *embedCache) embed(ctx context.Context, encode encodeFunc, sha string, pr *prep.Result, img *model.Image) (cachedVision, error) {
	cv := cachedVision{done: func() {}}
	start := time.Now()
	var key embcache.Key
	cacheable := ec != nil && sha != ""
	if cacheable {
		key, cacheable = ec.key(sha, pr)
	}
	if cacheable {
		if l := ec.c.Get(key); l != nil {
			ec.lookups.WithLabelValues("hit").Inc()
			img.Embeddings = l.Embeddings()
			cv.hit, cv.done, cv.took = true, l.Release, time.Since(start)
			return cv, nil
		}
		ec.lookups.WithLabelValues("miss").Inc()
	}
	e, err := encode(ctx, *img)
	if err != nil {
		return cv, fmt.Errorf("encoding image 0: %w", err)
	}
	var l *embcache.Lease
	if cacheable {
		elem := 4 // host rows are float32
		if e.Device != nil {
			elem = ec.devElem
		}
		l = ec.c.Put(key, e, embcache.Size(e, elem))
	}
	if l != nil {
		cv.done = l.Release
	} else if e.Device != nil {
		cv.done = e.Device.Release // not kept (no cache, over the cap, or cached meanwhile): ours to free
	}
	img.Embeddings = e
	cv.took = time.Since(start)
	return cv, nil
}

// key is the identity of an image's embeddings: the image file's sha256, the bundle and plugin
// digests, and the plugin's whole plan (crop, resize, pad, normalisation, patch grid: another
// budget gives another plan). ok is false when the plan does not encode (then nothing is cached).
func (ec *embedCache) key(sha string, pr *prep.Result) (k embcache.Key, ok bool) {
	plan, err := json.Marshal(pr.Plan)
	if err != nil {
		return k, false
	}
	return embcache.NewKey([]byte(sha), ec.ident, plan), true
}

// close drops every cached entry, releasing their device rows (before the model closes).
func (ec *embedCache) close() {
	if ec != nil {
		ec.c.Clear()
	}
}

// engineTimings places the engine's stages from start. A request whose image rows came from the
// cache has no vision stage but StageVisionCached (the lookup); a miss's vision stage includes
// its encoding in the task.
func engineTimings(start time.Time, cv cachedVision, gt model.Timings) Timings {
	vision := cv.took + gt.Vision
	stage := StageVision
	if cv.hit {
		stage = StageVisionCached
	}
	return Timings{
		{Stage: stage, Start: start, Duration: vision},
		{Stage: StagePrefill, Start: start.Add(vision), Duration: gt.Prefill},
		{Stage: StageDecode, Start: start.Add(vision + gt.Prefill), Duration: gt.Decode},
	}
}
