package cpu

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
)

func newBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := New(Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func filled(t *testing.T, b *Backend, r *rand.Rand, rows, cols int) (ml.Tensor, []float32) {
	t.Helper()
	x, err := b.Alloc(rows, cols, ml.F32)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	b.Write(x, v)
	return x, v
}

func read(t *testing.T, b *Backend, x ml.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Rows*x.Cols)
	b.Read(out, x)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCachedAttention: one call over a pool holding two sequences (a prefill chunk of 3 rows
// after 2 cached, and a decode row) equals the per-sequence causal attentions.
func TestCachedAttention(t *testing.T) {
	b := newBackend(t)
	r := rand.New(rand.NewPCG(1, 2))
	const heads, kvh, hd = 4, 2, 8
	a := ml.Attn{Heads: heads, KVHeads: kvh, HeadDim: hd, Causal: true, Scale: 0.35}
	q, _ := filled(t, b, r, 4, heads*hd)
	k, _ := filled(t, b, r, 16, kvh*hd)
	v, _ := filled(t, b, r, 16, kvh*hd)
	// sequence A: pool rows 0..4 (2 cached + 3 new); sequence B: rows 8..11 (3 cached + 1 new)
	spans := b.Ints([]int32{0, 3, 0, 4, 0, 5, 8, 4})
	out, _ := b.Alloc(4, heads*hd, ml.F32)
	b.CachedAttention(out, q, k, v, spans, a)
	got := read(t, b, out)

	want, _ := b.Alloc(4, heads*hd, ml.F32)
	a.Past = 2
	b.Attention(want.RowsAt(0, 3), q.RowsAt(0, 3), k.RowsAt(0, 5), v.RowsAt(0, 5), a)
	a.Past = 3
	b.Attention(want.RowsAt(3, 1), q.RowsAt(3, 1), k.RowsAt(8, 4), v.RowsAt(8, 4), a)
	if w := read(t, b, want); !slices.Equal(got, w) {
		t.Errorf("pooled attention differs from per-sequence attention:\n got %v\nwant %v", got[:8], w[:8])
	}

	b.CachedAttention(out, q, k, v, b.Ints([]int32{0, 3}), a) // spans for one row of four
	if err := b.Sync(); !errors.Is(err, ml.ErrInvalidInput) {
		t.Errorf("short spans: %v", err)
	}
}

// TestRMSNormResidual: the residual goes to xOut (x left alone) or back into x.
func TestRMSNormResidual(t *testing.T) {
	b := newBackend(t)
	r := rand.New(rand.NewPCG(3, 4))
	x, xv := filled(t, b, r, 3, 20)
	d, dv := filled(t, b, r, 3, 20)
	w, _ := filled(t, b, r, 1, 20)
	xo, _ := b.Alloc(3, 20, ml.F32)
	y1, _ := b.Alloc(3, 20, ml.F32)
	y2, _ := b.Alloc(3, 20, ml.F32)
	b.RMSNorm(y1, xo, x, d, w, 1e-6)
	if got := read(t, b, x); !slices.Equal(got, xv) {
		t.Error("x changed though the residual went to xOut")
	}
	sum := make([]float32, len(xv))
	for i := range xv {
		sum[i] = xv[i] + dv[i]
	}
	if got := read(t, b, xo); !slices.Equal(got, sum) {
		t.Error("xOut is not x + delta")
	}
	b.RMSNorm(y2, x, x, d, w, 1e-6) // in place
	if got := read(t, b, x); !slices.Equal(got, sum) {
		t.Error("x is not x + delta in place")
	}
	if a, c := read(t, b, y1), read(t, b, y2); !slices.Equal(a, c) {
		t.Error("the norm differs between the two forms")
	}
}

// TestScaleCols: every column of a strided view scaled by its weight, exactly as the product in
// F32, the columns outside the view left alone; a weight of the wrong width is refused.
func TestScaleCols(t *testing.T) {
	b := newBackend(t)
	r := rand.New(rand.NewPCG(5, 6))
	const rows, cols, n = 37, 50, 41 // the view: columns [3, 44) of every row
	x, xv := filled(t, b, r, rows, cols)
	w, wv := filled(t, b, r, 1, n)
	b.ScaleCols(x.ColsAt(3, n), w)
	got := read(t, b, x)
	for i := range rows {
		for j := range cols {
			want := xv[i*cols+j]
			if j >= 3 && j < 3+n {
				want *= wv[j-3]
			}
			if got[i*cols+j] != want {
				t.Fatalf("x[%d, %d] = %g, want %g", i, j, got[i*cols+j], want)
			}
		}
	}
	b.ScaleCols(x, w)
	if err := b.Sync(); !errors.Is(err, ml.ErrInvalidInput) {
		t.Errorf("a weight of %d for %d columns: %v", n, cols, err)
	}
}
