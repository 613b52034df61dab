package ml

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrKVFull reports a KV pool without a free run of blocks long enough for a sequence. The
// engine's scheduler waits for blocks on it.
var ErrKVFull = errors.New("KV cache pool full")

// KVPool is the KV-cache memory of a model: per layer one key and one value matrix of
// Blocks*BlockTokens rows, handed out in blocks of BlockTokens tokens. A sequence gets one
// contiguous run of blocks (its attention reads its keys as one matrix, so the backends'
// attention needs no page table); freed runs coalesce. Use reports the blocks in use, the
// figure an inference gateway routes on. A KVPool is safe for concurrent use.
type KVPool struct {
	blockTokens, blocks int
	all                 Tensor // every layer's keys, then every layer's values, in one matrix
	k, v                []Tensor

	mu   sync.Mutex
	free []run // sorted by first, never adjacent
	used int
}

type run struct{ first, n int }

// NewKVPool allocates the pool's memory on b: layers x (keys, values) of blocks*blockTokens
// rows of kvDim values of type dt.
func NewKVPool(b Backend, layers, kvDim, blockTokens, blocks int, dt DType) (*KVPool, error) {
	if layers <= 0 || kvDim <= 0 || blockTokens <= 0 || blocks <= 0 {
		return nil, fmt.Errorf("KV pool of %d layers, width %d, %d blocks of %d tokens: sizes must be positive", layers, kvDim, blocks, blockTokens)
	}
	p := &KVPool{blockTokens: blockTokens, blocks: blocks, free: []run{{0, blocks}}}
	rows := blocks * blockTokens
	// one matrix, so that Copy moves rows of every layer in two ops
	all, err := b.Alloc(2*layers*rows, kvDim, dt)
	if err != nil {
		return nil, fmt.Errorf("allocating the KV pool (%d tokens): %w", rows, err)
	}
	p.all = all
	for l := range layers {
		p.k = append(p.k, all.RowsAt(l*rows, rows))
		p.v = append(p.v, all.RowsAt((layers+l)*rows, rows))
	}
	return p, nil
}

// RowCopy is n rows of the pool, from row From to row To, in every layer's keys and values.
type RowCopy struct{ From, To, N int }

// Copy enqueues the copies on b: every row of every layer gathered into scratch, then
// scattered to its place (two ops whatever the number of layers and copies). The rows copied
// from must not be among those copied to.
func (p *KVPool) Copy(b Backend, copies []RowCopy) {
	n := 0
	for _, c := range copies {
		n += c.N
	}
	if n == 0 {
		return
	}
	rows := p.blocks * p.blockTokens
	from, to := make([]int32, 0, 2*len(p.k)*n), make([]int32, 0, 2*len(p.k)*n)
	for m := range 2 * len(p.k) { // the keys of each layer, then the values
		for _, c := range copies {
			for j := range c.N {
				from = append(from, int32(m*rows+c.From+j))
				to = append(to, int32(m*rows+c.To+j))
			}
		}
	}
	tmp := b.Scratch("kv.copy", len(from), p.all.Cols)
	b.Gather(tmp, p.all, b.Ints(from))
	b.Scatter(p.all, tmp, b.Ints(to))
}

// BlockTokens is the tokens a block holds.
func (p *KVPool) BlockTokens() int { return p.blockTokens }

// Use reports the blocks in use and the pool's total.
func (p *KVPool) Use() (used, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used, p.blocks
}

// Alloc takes a run of blocks for up to tokens tokens: the first free run that fits.
func (p *KVPool) Alloc(tokens int) (*KVCache, error) {
	if tokens <= 0 {
		return nil, fmt.Errorf("KV cache of %d tokens", tokens)
	}
	n := (tokens + p.blockTokens - 1) / p.blockTokens
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range p.free {
		if r.n < n {
			continue
		}
		if r.n == n {
			p.free = append(p.free[:i], p.free[i+1:]...)
		} else {
			p.free[i] = run{r.first + n, r.n - n}
		}
		p.used += n
		return &KVCache{pool: p, first: r.first, blocks: n}, nil
	}
	return nil, fmt.Errorf("%d blocks of %d tokens wanted, %d of %d in use: %w", n, p.blockTokens, p.used, p.blocks, ErrKVFull)
}

func (p *KVPool) release(first, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.free), func(i int) bool { return p.free[i].first > first })
	p.free = append(p.free, run{})
	copy(p.free[i+1:], p.free[i:])
	p.free[i] = run{first, n}
	// coalesce with the neighbours
	if i+1 < len(p.free) && p.free[i].first+p.free[i].n == p.free[i+1].first {
		p.free[i].n += p.free[i+1].n
		p.free = append(p.free[:i+1], p.free[i+2:]...)
	}
	if i > 0 && p.free[i-1].first+p.free[i-1].n == p.free[i].first {
		p.free[i-1].n += p.free[i].n
		p.free = append(p.free[:i], p.free[i+1:]...)
	}
	p.used -= n
}

// KVCache is one sequence's run of blocks. Len is the tokens it holds; the model that runs the
// sequence advances it. A KVCache is used by one request at a time.
type KVCache struct {
	pool          *KVPool
	first, blocks int
	Len           int
}

// Blocks is the pool blocks the cache holds (0 once freed).
func (c *KVCache) Blocks() int { return c.blocks }

// Cap is the tokens the cache can hold.
func (c *KVCache) Cap() int { return c.blocks * c.pool.blockTokens }

// K and V are the layer's keys and values: Cap rows, the first Len of them filled.
func (c *KVCache) K(layer int) Tensor {
	return c.pool.k[layer].RowsAt(c.first*c.pool.blockTokens, c.Cap())
}

// V is the layer's values; see K.
func (c *KVCache) V(layer int) Tensor {
	return c.pool.v[layer].RowsAt(c.first*c.pool.blockTokens, c.Cap())
}

// Free returns the blocks to the pool; it is safe to call more than once.
func (c *KVCache) Free() {
	if c.pool != nil && c.blocks > 0 {
		c.pool.release(c.first, c.blocks)
		c.blocks = 0
	}
}

// K is layer l's whole key matrix (every block); V its values.
func (p *KVPool) K(l int) Tensor { return p.k[l] }

// V is layer l's whole value matrix.
func (p *KVPool) V(l int) Tensor { return p.v[l] }

// Start is the cache's first row in the pool's matrices.
func (c *KVCache) Start() int { return c.first * c.pool.blockTokens }
