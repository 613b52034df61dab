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
	a := ml.Attn{Heads: heads, KVHeads: kvh, HeadDim: hd, Mask: ml.Mask{Causal: true}, Scale: 0.35}
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

// TestAttentionKeyFlags: with key flags (ml.Mask.Keys) each query attends exactly as it would to
// the flagged keys alone (a padded crop's patches are never seen), in SegmentAttention and
// Attention alike; a segment with every key flagged out averages its values; CachedAttention
// refuses flags; a flag count other than the keys' is refused.
func TestAttentionKeyFlags(t *testing.T) {
	b := newBackend(t)
	r := rand.New(rand.NewPCG(9, 10))
	const heads, kvh, hd, n = 4, 2, 8, 12
	a := ml.Attn{Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: 0.35}
	q, _ := filled(t, b, r, n, heads*hd)
	k, _ := filled(t, b, r, n, kvh*hd)
	v, vv := filled(t, b, r, n, kvh*hd)
	// segments [0, 7) with keys 5 and 6 padding, [7, 10) whole, [10, 12) all padding
	flags := []int32{1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}
	out, _ := b.Alloc(n, heads*hd, ml.F32)
	a.Keys = b.Ints(flags)
	b.SegmentAttention(out, q, k, v, []int32{0, 7, 10, 12}, a)
	got := read(t, b, out)

	// the same queries over the seen keys alone
	want, _ := b.Alloc(n, heads*hd, ml.F32)
	a.Keys = ml.Ints{}
	b.Attention(want.RowsAt(0, 7), q.RowsAt(0, 7), k.RowsAt(0, 5), v.RowsAt(0, 5), a)
	b.Attention(want.RowsAt(7, 3), q.RowsAt(7, 3), k.RowsAt(7, 3), v.RowsAt(7, 3), a)
	w := read(t, b, want)
	if !slices.Equal(got[:10*heads*hd], w[:10*heads*hd]) {
		t.Errorf("flagged keys are seen:\n got %v\nwant %v", got[:8], w[:8])
	}
	for i := 10; i < n; i++ { // every key of [10, 12) padding: the mean of its two values
		for h := range heads {
			for d := range hd {
				g := h / (heads / kvh)
				mean := (vv[10*kvh*hd+g*hd+d] + vv[11*kvh*hd+g*hd+d]) / 2
				if x := got[i*heads*hd+h*hd+d]; x != mean {
					t.Fatalf("row %d head %d dim %d: %g, want the values' mean %g", i, h, d, x, mean)
				}
			}
		}
	}

	// Attention over the first segment with its own flags gives the segment's rows
	one, _ := b.Alloc(7, heads*hd, ml.F32)
	a.Keys = b.Ints(flags[:7])
	b.Attention(one, q.RowsAt(0, 7), k.RowsAt(0, 7), v.RowsAt(0, 7), a)
	if o := read(t, b, one); !slices.Equal(o, got[:7*heads*hd]) {
		t.Error("Attention with flags differs from SegmentAttention with them")
	}

	for _, tc := range []struct {
		name string
		run  func()
	}{
		{"cached", func() { b.CachedAttention(one, q.RowsAt(0, 1), k, v, b.Ints([]int32{0, 1}), a) }},
		{"count", func() { b.Attention(one, q.RowsAt(0, 7), k.RowsAt(0, 6), v.RowsAt(0, 6), a) }},
	} {
		tc.run()
		if err := b.Sync(); !errors.Is(err, ml.ErrInvalidInput) {
			t.Errorf("%s: %v, want ml.ErrInvalidInput", tc.name, err)
		}
	}
}

// TestRopePartial: a partial rotary embedding (ml.Rotary.Dims) rotates the first Dims of each
// head exactly as a head of Dims would be rotated, and leaves the rest as it was; an odd or
// oversized Dims is refused.
func TestRopePartial(t *testing.T) {
	b := newBackend(t)
	r := rand.New(rand.NewPCG(11, 12))
	const rows, heads, hd, rd = 5, 3, 16, 12
	x, xv := filled(t, b, r, rows, heads*hd)
	cs, _ := filled(t, b, r, 2*rows, rd/2)
	rot := ml.Rotary{Cos: cs.RowsAt(0, rows), Sin: cs.RowsAt(rows, rows), Dims: rd}
	b.Rope(x, heads, hd, rot)
	got := read(t, b, x)
	// each head's first rd values as a head of rd, rotated alone
	for h := range heads {
		y, _ := b.Alloc(rows, rd, ml.F32)
		part := make([]float32, rows*rd)
		for i := range rows {
			copy(part[i*rd:(i+1)*rd], xv[i*heads*hd+h*hd:])
		}
		b.Write(y, part)
		b.Rope(y, 1, rd, ml.Rotary{Cos: rot.Cos, Sin: rot.Sin})
		want := read(t, b, y)
		for i := range rows {
			row := got[i*heads*hd+h*hd : i*heads*hd+(h+1)*hd]
			if !slices.Equal(row[:rd], want[i*rd:(i+1)*rd]) {
				t.Fatalf("row %d head %d: rotated %v, want %v", i, h, row[:rd], want[i*rd:(i+1)*rd])
			}
			if !slices.Equal(row[rd:], xv[i*heads*hd+h*hd+rd:i*heads*hd+(h+1)*hd]) {
				t.Fatalf("row %d head %d: the unrotated dimensions changed", i, h)
			}
		}
	}
	for _, d := range []int{7, hd + 2} {
		b.Rope(x, heads, hd, ml.Rotary{Cos: rot.Cos, Sin: rot.Sin, Dims: d})
		if err := b.Sync(); !errors.Is(err, ml.ErrInvalidInput) {
			t.Errorf("Dims %d: %v, want ml.ErrInvalidInput", d, err)
		}
	}
}
