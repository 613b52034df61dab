package kit

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// Prompt heads: the tokens of a prompt before its first image (the chat template's system turn
// and the user turn's opening, the same for every request of a deployment: 15 of the 200
// tokens of a 426x320 photo's prompt for Qwen2.5-VL). Their keys and values depend on nothing
// after them, so a head seen before is copied from the pool rows it was kept in instead of
// computed again: the copy (two ops for every layer) replaces the head's rows in the pass.
// Rows are computed the same whatever else is in the batch, so a copied head is the head the
// pass would have computed, to the bit (fp32 scheduled = alone holds with it).

const (
	// DefaultHeads is how many heads a model keeps when Options.Heads is 0.
	DefaultHeads = 8
	// minHead is the shortest head worth keeping.
	minHead = 4
	// maxSeen bounds the heads seen once (a head is kept at its second sighting, so that a
	// prompt whose question comes before the image does not take a block for nothing).
	maxSeen = 256
)

// heads is a model's cache of prompt heads in its KV pool, least recently used first.
type heads struct {
	mu      sync.Mutex
	kv      *ml.KVPool
	max     int
	entries []*head
	seen    map[string]struct{}
	hits    int64 // prompts that copied a kept head
}

// head is one kept head: n tokens at kv's rows. A head is filled by the pass that keeps it
// (ready after it), and read by passes that hold a ref; an evicted head in use is freed by its
// last reader.
type head struct {
	key     string
	n       int
	kv      *ml.KVCache
	ready   bool
	refs    int
	evicted bool
}

func newHeads(kv *ml.KVPool, n int) *heads {
	if n == 0 {
		n = DefaultHeads
	}
	if n < 0 {
		return nil
	}
	return &heads{kv: kv, max: n, seen: map[string]struct{}{}}
}

// headLen is the length of an input's head: the tokens before its first image placeholder (less
// margin: the tokens before it that belong to the image's bidirectional block), when they are
// at least minHead, leave some token to compute, and sit at positions 0, 1, ...
// on every axis (the rotary angles a kept head was computed at).
func headLen(flat *model.PrefillInput, n, margin int) int {
	if len(flat.Slots) == 0 {
		return 0
	}
	h := int(flat.Slots[0]) - margin
	if h < minHead || h >= n {
		return 0
	}
	for axis := range len(flat.Pos) / n {
		for j := range h {
			if flat.Pos[axis*n+j] != int32(j) {
				return 0
			}
		}
	}
	return h
}

// take looks ids up for a new sequence's prompt: use is a ready head to copy from (a ref taken:
// give it back with release), keep a head the caller's pass fills from its rows (release with
// filled once the pass ran). At most one is set; neither when the head is new, or being filled.
func (c *heads) take(ids []int32) (use, keep *head) {
	if c == nil {
		return nil, nil
	}
	key := string(unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), 4*len(ids)))
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, h := range c.entries {
		if h.key != key {
			continue
		}
		if !h.ready {
			return nil, nil
		}
		h.refs++
		c.hits++
		c.entries = append(slices.Delete(c.entries, i, i+1), h) // most recently used last
		return h, nil
	}
	if _, ok := c.seen[key]; !ok {
		if len(c.seen) >= maxSeen {
			clear(c.seen)
		}
		c.seen[key] = struct{}{}
		return nil, nil
	}
	if len(c.entries) >= c.max && !c.evict() {
		return nil, nil
	}
	kv, err := c.kv.Alloc(len(ids))
	if err != nil { // the pool is short: the sequences come first
		return nil, nil
	}
	delete(c.seen, key)
	h := &head{key: key, n: len(ids), kv: kv, refs: 1}
	c.entries = append(c.entries, h)
	return nil, h
}

// evict drops the least recently used ready head, freeing its rows now or, while a pass reads
// them, after it; false when every head is being filled.
func (c *heads) evict() bool {
	for i, h := range c.entries {
		if !h.ready {
			continue
		}
		c.entries = slices.Delete(c.entries, i, i+1)
		h.evicted = true
		if h.refs == 0 {
			h.kv.Free()
		}
		return true
	}
	return false
}

// release gives back a ref taken by take; filled says whether the pass that held it ran (a
// head it was to fill is ready from now on, or dropped).
func (c *heads) release(h *head, filled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.refs--
	if !h.ready && !filled {
		c.entries = slices.DeleteFunc(c.entries, func(e *head) bool { return e == h })
		h.evicted = true
	}
	h.ready = h.ready || filled
	if h.evicted && h.refs == 0 {
		h.kv.Free()
	}
}

// stats reports the heads kept and the prompts that copied one so far.
func (c *heads) stats() (kept int, hits int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.hits
}

// blocks is the pool blocks the kept heads hold.
func (c *heads) blocks() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, h := range c.entries {
		n += h.kv.Blocks()
	}
	return n
}

// drop frees every head (the model is closing: no pass runs).
func (c *heads) drop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.entries {
		h.kv.Free()
	}
	c.entries = nil
}
