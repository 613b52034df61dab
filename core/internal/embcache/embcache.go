// Package embcache keeps vision-tower outputs for later requests with the same image: an LRU of
// [model.Embeddings] under a byte cap, whose device rows are refcounted so that eviction never
// releases rows a request is still reading.
//
// # Notes
//
//   - A Cache is safe for concurrent use; a nil *Cache is a disabled one (Get misses, Put keeps
//     nothing).
//   - Cached embeddings belong to the cache: a request borrows them through a [Lease] and never
//     calls Embeddings.Device.Release itself. Evicted rows are released when the last lease on
//     them ends.
//   - The cap bounds the bytes the cache holds (tokens x row width x element size, as the caller
//     counts them). Rows evicted while borrowed leave the count at once; they live on only as
//     long as the requests reading them, as uncached rows would.
package embcache

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"sync"

	"github.com/iris-vlm/iris/core/internal/model"
)

// Key identifies one image's embeddings: a digest over everything that changes them.
type Key [sha256.Size]byte

// NewKey digests parts, each length-prefixed so that no two different lists give one key.
func NewKey(parts ...[]byte) Key {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	var k Key
	h.Sum(k[:0])
	return k
}

// Cache is an LRU of embeddings under a byte cap.
type Cache struct {
	capBytes int64
	mu       sync.Mutex
	lru      list.List // of *entry, most recently used first
	byKey    map[Key]*list.Element
	bytes    int64
}

type entry struct {
	key  Key
	emb  *model.Embeddings
	size int64
	refs int  // leases outstanding
	gone bool // evicted: the last lease releases the rows
}

// New returns a cache of at most capBytes, or nil (disabled) for a cap <= 0.
func New(capBytes int64) *Cache {
	if capBytes <= 0 {
		return nil
	}
	return &Cache{capBytes: capBytes, byKey: map[Key]*list.Element{}}
}

// Get borrows the embeddings cached under k, marking them most recently used; nil on a miss.
func (c *Cache) Get(k Key) *Lease {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*entry)
	e.refs++
	return &Lease{c: c, e: e}
}

// Put caches e (size bytes) under k and returns the caller's lease on it, evicting the least
// recently used entries until the cap holds. From then on the cache owns e: the caller ends the
// lease instead of releasing e. Put keeps nothing and returns nil when the cache is disabled,
// when e alone is over the cap, or when k is cached already (a concurrent request encoded the
// same image first): the caller still owns e.
func (c *Cache) Put(k Key, e *model.Embeddings, size int64) *Lease {
	if c == nil || size > c.capBytes || size < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok {
		return nil
	}
	en := &entry{key: k, emb: e, size: size, refs: 1}
	c.byKey[k] = c.lru.PushFront(en)
	c.bytes += size
	for c.bytes > c.capBytes {
		c.evict(c.lru.Back())
	}
	return &Lease{c: c, e: en}
}

// evict drops el; its rows are released now, or by the last lease still reading them. The
// caller holds mu.
func (c *Cache) evict(el *list.Element) {
	e := el.Value.(*entry)
	c.lru.Remove(el)
	delete(c.byKey, e.key)
	c.bytes -= e.size
	e.gone = true
	if e.refs == 0 {
		release(e.emb)
	}
}

// Clear evicts every entry (rows still borrowed are released when their leases end).
func (c *Cache) Clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.lru.Len() > 0 {
		c.evict(c.lru.Back())
	}
}

// Stats reports the entries cached and the bytes they count.
func (c *Cache) Stats() (entries int, bytes int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}

// Cap is the cache's byte cap (0 when disabled).
func (c *Cache) Cap() int64 {
	if c == nil {
		return 0
	}
	return c.capBytes
}

// Lease is one request's borrow of cached embeddings.
type Lease struct {
	c    *Cache
	e    *entry
	once sync.Once
}

// Embeddings are the borrowed rows, valid until Release.
func (l *Lease) Embeddings() *model.Embeddings { return l.e.emb }

// Release ends the borrow; it is safe to call more than once.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.c.mu.Lock()
		defer l.c.mu.Unlock()
		l.e.refs--
		if l.e.refs == 0 && l.e.gone {
			release(l.e.emb)
		}
	})
}

func release(e *model.Embeddings) {
	if e.Device != nil {
		e.Device.Release()
	}
}

// Size is what a cache counts for e: tokens x row width x elemSize bytes.
func Size(e *model.Embeddings, elemSize int) int64 {
	return int64(e.Tokens) * int64(e.Dim) * int64(elemSize)
}
