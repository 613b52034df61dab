package embcache

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/iris-vlm/iris/core/internal/model"
)

// rows are fake device rows that count their releases.
type rows struct{ released atomic.Int32 }

func (r *rows) Release() { r.released.Add(1) }

// emb is tokens rows of width 4 on a fake device: 16 bytes a token at 4 bytes an element.
func emb(tokens int) (*model.Embeddings, *rows) {
	r := &rows{}
	return &model.Embeddings{Tokens: tokens, Dim: 4, Device: r}, r
}

func key(i int) Key { return NewKey([]byte(fmt.Sprint(i))) }

func TestNewKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b [][]byte
		same bool
	}{
		{"equal parts", [][]byte{[]byte("img"), []byte("bundle"), []byte("plan")}, [][]byte{[]byte("img"), []byte("bundle"), []byte("plan")}, true},
		{"another plan", [][]byte{[]byte("img"), []byte("bundle"), []byte("plan1")}, [][]byte{[]byte("img"), []byte("bundle"), []byte("plan2")}, false},
		{"another bundle", [][]byte{[]byte("img"), []byte("b1"), []byte("plan")}, [][]byte{[]byte("img"), []byte("b2"), []byte("plan")}, false},
		{"parts shifted", [][]byte{[]byte("ab"), []byte("c")}, [][]byte{[]byte("a"), []byte("bc")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewKey(tc.a...) == NewKey(tc.b...); got != tc.same {
				t.Fatalf("equal keys: %v, want %v", got, tc.same)
			}
		})
	}
}

func TestDisabled(t *testing.T) {
	for _, capBytes := range []int64{0, -1} {
		c := New(capBytes)
		if c != nil {
			t.Fatalf("New(%d) = %v, want nil (disabled)", capBytes, c)
		}
		e, r := emb(1)
		if l := c.Put(key(1), e, 16); l != nil {
			t.Fatal("a disabled cache kept an entry")
		}
		if l := c.Get(key(1)); l != nil {
			t.Fatal("a disabled cache hit")
		}
		if n, b := c.Stats(); n != 0 || b != 0 || c.Cap() != 0 {
			t.Fatalf("stats %d %d cap %d", n, b, c.Cap())
		}
		c.Clear()
		if r.released.Load() != 0 {
			t.Fatal("a disabled cache released rows it never owned")
		}
	}
}

// TestLRU: a stream of puts and gets keeps the most recently used entries under the cap and
// releases each evicted entry's rows exactly once.
func TestLRU(t *testing.T) {
	type op struct {
		get  bool
		key  int
		toks int // put: entry size in tokens (16 bytes each)
	}
	for _, tc := range []struct {
		name    string
		cap     int64
		ops     []op
		cached  []int // keys cached at the end
		evicted []int // keys whose rows were released
	}{
		{"fits", 64, []op{{key: 1, toks: 2}, {key: 2, toks: 2}}, []int{1, 2}, nil},
		{"oldest goes", 64, []op{{key: 1, toks: 2}, {key: 2, toks: 2}, {key: 3, toks: 2}}, []int{2, 3}, []int{1}},
		{"a hit refreshes", 64, []op{{key: 1, toks: 2}, {key: 2, toks: 2}, {get: true, key: 1}, {key: 3, toks: 2}}, []int{1, 3}, []int{2}},
		{"a big entry evicts several", 64, []op{{key: 1, toks: 1}, {key: 2, toks: 1}, {key: 3, toks: 1}, {key: 4, toks: 3}}, []int{3, 4}, []int{1, 2}},
		{"exactly the cap", 64, []op{{key: 1, toks: 4}}, []int{1}, nil},
		{"over the cap alone", 64, []op{{key: 1, toks: 1}, {key: 2, toks: 5}}, []int{1}, nil},
		{"a miss changes nothing", 64, []op{{key: 1, toks: 2}, {get: true, key: 9}, {key: 2, toks: 2}}, []int{1, 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.cap)
			released := map[int]*rows{}
			for _, o := range tc.ops {
				if o.get {
					if l := c.Get(key(o.key)); l != nil {
						l.Release()
					}
					continue
				}
				e, r := emb(o.toks)
				l := c.Put(key(o.key), e, Size(e, 4))
				if l == nil {
					continue // not kept: the caller still owns the rows
				}
				released[o.key] = r
				l.Release()
			}
			for _, k := range tc.cached {
				l := c.Get(key(k))
				if l == nil {
					t.Errorf("key %d: not cached", k)
					continue
				}
				l.Release()
			}
			if n, _ := c.Stats(); n != len(tc.cached) {
				t.Errorf("%d entries cached, want %d", n, len(tc.cached))
			}
			if _, b := c.Stats(); b > tc.cap {
				t.Errorf("%d bytes cached, over the cap %d", b, tc.cap)
			}
			want := map[int]bool{}
			for _, k := range tc.evicted {
				want[k] = true
			}
			for k, r := range released {
				if n := r.released.Load(); n != map[bool]int32{true: 1}[want[k]] {
					t.Errorf("key %d: released %d times, evicted %v", k, n, want[k])
				}
			}
		})
	}
}

// TestCapHolds: a long stream of distinct images never holds more than the cap, and every
// entry but the cached ones has been released once.
func TestCapHolds(t *testing.T) {
	const capBytes = 1000
	c := New(capBytes)
	var all []*rows
	for i := range 500 {
		e, r := emb(1 + i%7)
		l := c.Put(key(i), e, Size(e, 4))
		if l == nil {
			t.Fatalf("put %d: not kept", i)
		}
		all = append(all, r)
		l.Release()
		if _, b := c.Stats(); b > capBytes {
			t.Fatalf("after %d puts: %d bytes, cap %d", i+1, b, capBytes)
		}
	}
	n, _ := c.Stats()
	live := 0
	for _, r := range all {
		switch r.released.Load() {
		case 0:
			live++
		case 1:
		default:
			t.Fatal("rows released twice")
		}
	}
	if live != n {
		t.Fatalf("%d rows unreleased, %d cached", live, n)
	}
	c.Clear()
	for _, r := range all {
		if r.released.Load() != 1 {
			t.Fatal("Clear left rows unreleased")
		}
	}
	if n, b := c.Stats(); n != 0 || b != 0 {
		t.Fatalf("after Clear: %d entries, %d bytes", n, b)
	}
}

// TestBorrowedEviction: rows evicted while a request borrows them are released only when its
// lease ends, and a second Release does nothing.
func TestBorrowedEviction(t *testing.T) {
	c := New(32)
	e1, r1 := emb(2)
	put := c.Put(key(1), e1, 32)
	hit := c.Get(key(1))
	if hit == nil || hit.Embeddings() != e1 {
		t.Fatal("no hit")
	}
	e2, r2 := emb(2)
	l2 := c.Put(key(2), e2, 32) // evicts key 1 while two leases read it
	if l2 == nil {
		t.Fatal("not kept")
	}
	if c.Get(key(1)) != nil {
		t.Fatal("key 1 still cached after its eviction")
	}
	if _, b := c.Stats(); b != 32 {
		t.Fatalf("%d bytes counted, want 32 (a borrowed evicted entry leaves the count)", b)
	}
	put.Release()
	put.Release()
	if r1.released.Load() != 0 {
		t.Fatal("rows released while a lease still reads them")
	}
	hit.Release()
	if r1.released.Load() != 1 {
		t.Fatalf("rows released %d times after the last lease, want 1", r1.released.Load())
	}
	l2.Release()
	if r2.released.Load() != 0 {
		t.Fatal("cached rows released by the end of a lease")
	}
	c.Clear()
	if r2.released.Load() != 1 {
		t.Fatal("Clear did not release cached rows")
	}
}

// TestDuplicatePut: the second encoder of one image keeps its own rows.
func TestDuplicatePut(t *testing.T) {
	c := New(1 << 10)
	e1, _ := emb(1)
	e2, r2 := emb(1)
	l1 := c.Put(key(1), e1, 16)
	if l2 := c.Put(key(1), e2, 16); l1 == nil || l2 != nil {
		t.Fatalf("puts: %v %v, want a lease then nil", l1, l2)
	}
	l1.Release()
	if r2.released.Load() != 0 {
		t.Fatal("the cache released rows it did not keep")
	}
	if l := c.Get(key(1)); l == nil || l.Embeddings() != e1 {
		t.Fatal("the first put's rows are not the cached ones")
	}
}

// TestConcurrent races gets, puts and releases of a few keys under a small cap; every rows
// object ends released at most once, and exactly once after Clear.
func TestConcurrent(t *testing.T) {
	c := New(64)
	var (
		mu  sync.Mutex
		all []*rows
		wg  sync.WaitGroup
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k := key((g + i) % 6)
				if l := c.Get(k); l != nil {
					if l.Embeddings().Tokens == 0 {
						t.Error("empty embeddings")
					}
					l.Release()
					continue
				}
				e, r := emb(1 + i%3)
				l := c.Put(k, e, Size(e, 4))
				if l == nil {
					r.Release() // the caller owns rows the cache did not keep
				} else {
					l.Release()
				}
				mu.Lock()
				all = append(all, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if _, b := c.Stats(); b > 64 {
		t.Fatalf("%d bytes over the cap", b)
	}
	c.Clear()
	for _, r := range all {
		if n := r.released.Load(); n != 1 {
			t.Fatalf("rows released %d times", n)
		}
	}
}
