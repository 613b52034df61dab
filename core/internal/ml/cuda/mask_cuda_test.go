//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// The references of the older attention tests, as forms of maskedRef (attnref_test.go).

// keyFlagsRef is non-causal attention of one segment (q, k and v rows of ld values, heads of hd,
// kvh key heads) in which only the keys flagged 1 are seen; a segment with none seen averages
// its values, as ml.Mask.Keys says.
func keyFlagsRef(q, k, v []float32, n, heads, kvh, hd, ld int, flags []int32, scale float64) []float64 {
	return maskedRef(q, k, v, []maskedSeg{{0, n, 0, n}}, heads, kvh, hd, ld, ld, scale,
		maskedForm{reach: func(s maskedSeg, _ int) int { return s.nk }, flags: flags})
}

// spanAttnRef is CachedAttention's definition in float64: query row i (heads of hd in rows of
// qd values) sees the pool rows [spans[2i], spans[2i]+spans[2i+1]) (kv heads of hd in rows of
// kvd values), softmax(q k^T * scale) v.
func spanAttnRef(q, kp, vp []float32, spans []int32, heads, kvh, hd int, scale float64) []float64 {
	segs := make([]maskedSeg, len(spans)/2)
	for i := range segs {
		segs[i] = maskedSeg{i, 1, int(spans[2*i]), int(spans[2*i+1])}
	}
	return maskedRef(q, kp, vp, segs, heads, kvh, hd, heads*hd, kvh*hd, scale,
		maskedForm{reach: func(s maskedSeg, _ int) int { return s.nk }})
}

// maskRef is attention in float64 by ml.Mask's definition over one segment of n rows (heads of
// hd, one kv head each): causal rows see keys [0, max(prefix, i+1)); bias(i, h, j), when set,
// added to the scaled score.
func maskRef(q, k, v []float32, n, heads, hd int, causal bool, prefix int, scale float64, bias func(i, h, j int) float64) []float64 {
	return maskedRef(q, k, v, []maskedSeg{{0, n, 0, n}}, heads, heads, hd, heads*hd, heads*hd, scale,
		maskedForm{reach: func(s maskedSeg, i int) int {
			if causal {
				return min(max(prefix, i+1), s.nk)
			}
			return s.nk
		}, bias: bias})
}

// TestKernelBackendMaskForms runs ml.Mask's prefix (an encoder's image tokens both ways, its
// queries causal after them) through Attention and a decomposed relative-position bias (SAM's
// windows) through SegmentAttention and Attention, in both storage types, against maskRef; the
// KV-pool ops refuse both forms.
func TestKernelBackendMaskForms(t *testing.T) {
	forBackends(t, func(t *testing.T, b *Backend) {
		dt := b.dt
		r := rand.New(rand.NewPCG(61, 62))
		tol := 1e-5
		if dt == bf16 {
			tol = 3e-2
		}
		for _, tc := range []struct{ n, heads, hd, prefix int }{{40, 2, 64, 16}, {300, 4, 64, 256}, {7, 1, 32, 0}} {
			t.Run(fmt.Sprintf("prefix%d-of%d", tc.prefix, tc.n), func(t *testing.T) {
				w := tc.heads * tc.hd
				q, k, v := randn(r, dt, tc.n*w, 1), randn(r, dt, tc.n*w, 1), randn(r, dt, tc.n*w, 1)
				var got []float32
				if err := b.Do(func() error {
					out := b.Scratch("out", tc.n, w)
					b.Attention(out, devTensor(b, tc.n, w, q), devTensor(b, tc.n, w, k), devTensor(b, tc.n, w, v),
						ml.Attn{Heads: tc.heads, KVHeads: tc.heads, HeadDim: tc.hd, Scale: 0.125, Mask: ml.Mask{Causal: true, Prefix: tc.prefix}})
					got = readBack(b, out)
					return b.Sync()
				}); err != nil {
					t.Fatal(err)
				}
				check(t, "prefix", got, maskRef(q, k, v, tc.n, tc.heads, tc.hd, true, tc.prefix, 0.125, nil), tol)
			})
		}
		// windows of 14x14 (196 rows) and one of a 3x5 grid, a bias each
		for _, tc := range []struct{ segs, gh, gw, heads, hd int }{{3, 14, 14, 2, 64}, {2, 3, 5, 4, 32}} {
			t.Run(fmt.Sprintf("relpos-%dx%d", tc.gh, tc.gw), func(t *testing.T) {
				n, w := tc.gh*tc.gw, tc.heads*tc.hd
				rows := tc.segs * n
				q, k, v := randn(r, dt, rows*w, 1), randn(r, dt, rows*w, 1), randn(r, dt, rows*w, 1)
				hv, wv := randn(r, dt, rows*tc.heads*tc.gh, 1), randn(r, dt, rows*tc.heads*tc.gw, 1)
				bounds := make([]int32, tc.segs+1)
				for s := range bounds {
					bounds[s] = int32(s * n)
				}
				var got, one []float32
				var cachedErr error
				if err := b.Do(func() error {
					ht, wt := devTensor(b, rows, tc.heads*tc.gh, hv), devTensor(b, rows, tc.heads*tc.gw, wv)
					rel := ml.RelPos{H: ht, W: wt, Height: tc.gh, Width: tc.gw}
					qt, kt, vt := devTensor(b, rows, w, q), devTensor(b, rows, w, k), devTensor(b, rows, w, v)
					a := ml.Attn{Heads: tc.heads, KVHeads: tc.heads, HeadDim: tc.hd, Scale: 0.125, Mask: ml.Mask{RelPos: rel}}
					out := b.Scratch("out", rows, w)
					b.SegmentAttention(out, qt, kt, vt, bounds, a)
					got = readBack(b, out)
					last := int(bounds[tc.segs-1])
					a.RelPos = rel.RowsAt(last, n)
					o1 := b.Scratch("one", n, w)
					b.Attention(o1, qt.RowsAt(last, n), kt.RowsAt(last, n), vt.RowsAt(last, n), a)
					one = readBack(b, o1)
					if err := b.Sync(); err != nil {
						return err
					}
					b.CachedAttention(o1.RowsAt(0, 1), qt.RowsAt(0, 1), kt, vt, b.Ints([]int32{0, 1}), a)
					cachedErr = b.Sync()
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if !errors.Is(cachedErr, ml.ErrInvalidInput) {
					t.Errorf("CachedAttention with a bias: %v, want ml.ErrInvalidInput", cachedErr)
				}
				for s := range tc.segs {
					r0 := s * n
					bias := func(i, h, j int) float64 { // the two summed and rounded to the storage type
						return round(dt, float64(hv[(r0+i)*tc.heads*tc.gh+h*tc.gh+j/tc.gw])+float64(wv[(r0+i)*tc.heads*tc.gw+h*tc.gw+j%tc.gw]))
					}
					want := maskRef(q[r0*w:], k[r0*w:], v[r0*w:], n, tc.heads, tc.hd, false, 0, 0.125, bias)
					check(t, fmt.Sprintf("segment %d", s), got[r0*w:(r0+n)*w], want, tol)
					if s == tc.segs-1 {
						check(t, "Attention of the last segment", one, want, tol)
					}
				}
			})
		}
	})
}
