package cpu

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
)

// relPosBias computes a decomposed relative-position bias as SAM's get_decomposed_rel_pos does
// for a Height × Width grid with tables of 2·Height−1 and 2·Width−1 rows (no resampling):
// rel_h[i, h, kh] = q_i,h · Rh[qh − kh + Height − 1], rel_w likewise, in float64 rounded once.
func relPosBias(q []float32, heads, hd, height, width int, rh, rw []float32) (hb, wb []float32) {
	rows := height * width
	hb, wb = make([]float32, rows*heads*height), make([]float32, rows*heads*width)
	for i := range rows {
		qh, qw := i/width, i%width
		for h := range heads {
			qi := q[i*heads*hd+h*hd : i*heads*hd+(h+1)*hd]
			for kh := range height {
				var s float64
				for c := range hd {
					s += float64(qi[c]) * float64(rh[(qh-kh+height-1)*hd+c])
				}
				hb[i*heads*height+h*height+kh] = float32(s)
			}
			for kw := range width {
				var s float64
				for c := range hd {
					s += float64(qi[c]) * float64(rw[(qw-kw+width-1)*hd+c])
				}
				wb[i*heads*width+h*width+kw] = float32(s)
			}
		}
	}
	return hb, wb
}

// TestAttentionRelPosGolden: SAM's attention (qkv, the decomposed relative-position bias, softmax,
// proj) written with the op set, the bias through ml.Mask.RelPos, equals transformers'
// DeepseekOcr2SamVisionAttention on windows and grids (scripts/reference/golden_relpos.py); with
// the bias zeroed (a rel-pos table lost in loading) or its axes swapped, it does not.
func TestAttentionRelPosGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/relpos.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Name                       string
			Heads, Height, Width, Seed int
			HeadDim                    int `json:"head_dim"`
			Out                        string
		}
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 4 {
		t.Fatalf("%d cases", len(g.Cases))
	}
	b := newBackend(t)
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			heads, hd, height, width := c.Heads, c.HeadDim, c.Height, c.Width
			C, rows := heads*hd, height*width
			rh, rw := moeValues((2*height-1)*hd, c.Seed+1, 2), moeValues((2*width-1)*hd, c.Seed+2, 2)
			x := tensorOf(t, b, moeValues(rows*C, c.Seed+7, 2), rows, C, ml.F32)
			wqkv := tensorOf(t, b, moeValues(3*C*C, c.Seed+3, 1), 3*C, C, ml.F32)
			bqkv := tensorOf(t, b, moeValues(3*C, c.Seed+4, 0.5), 1, 3*C, ml.F32)
			wproj := tensorOf(t, b, moeValues(C*C, c.Seed+5, 1), C, C, ml.F32)
			bproj := tensorOf(t, b, moeValues(C, c.Seed+6, 0.5), 1, C, ml.F32)
			qkv, _ := b.Alloc(rows, 3*C, ml.F32)
			b.Linears(x, ml.Out{Y: qkv, W: wqkv, B: bqkv})
			all := read(t, b, qkv)
			q := make([]float32, rows*C)
			for i := range rows {
				copy(q[i*C:(i+1)*C], all[i*3*C:])
			}
			hv, wv := relPosBias(q, heads, hd, height, width, rh, rw)
			want := f32s(t, c.Out)
			run := func(hv, wv []float32, h, w int) float64 {
				rel := ml.RelPos{H: tensorOf(t, b, hv, rows, heads*h, ml.F32), W: tensorOf(t, b, wv, rows, heads*w, ml.F32), Height: h, Width: w}
				att, _ := b.Alloc(rows, C, ml.F32)
				a := ml.Attn{Heads: heads, KVHeads: heads, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))), Mask: ml.Mask{RelPos: rel}}
				b.Attention(att, qkv.ColsAt(0, C), qkv.ColsAt(C, C), qkv.ColsAt(2*C, C), a)
				out, _ := b.Alloc(rows, C, ml.F32)
				b.Linears(att, ml.Out{Y: out, W: wproj, B: bproj})
				got := read(t, b, out)
				var worst float64
				for i := range got {
					worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
				}
				return worst
			}
			if d := run(hv, wv, height, width); d > 2e-5 {
				t.Errorf("max |diff| %g against transformers", d)
			}
			if d := run(make([]float32, len(hv)), make([]float32, len(wv)), height, width); d < 1e-3 {
				t.Errorf("a zeroed bias lands within %g of the reference: the golden does not test the bias", d)
			}
			if height == width {
				if d := run(wv, hv, height, width); d < 1e-3 {
					t.Errorf("the bias's axes swapped land within %g of the reference", d)
				}
			}
		})
	}
}

// attnRef is attention in float64 by the op's definition: query row i sees keys [0, n_i), n_i =
// max(prefix, past+i+1) when causal, else every key; bias(i, h, j) added to the scaled score.
func attnRef(q, k, v []float32, nq, nk, heads, hd int, causal bool, past, prefix int, scale float64, bias func(i, h, j int) float64) []float64 {
	out := make([]float64, nq*heads*hd)
	for i := range nq {
		n := nk
		if causal {
			n = min(max(prefix, past+i+1), nk)
		}
		for h := range heads {
			s := make([]float64, n)
			mx := math.Inf(-1)
			for j := range n {
				var d float64
				for c := range hd {
					d += float64(q[i*heads*hd+h*hd+c]) * float64(k[j*heads*hd+h*hd+c])
				}
				s[j] = d * scale
				if bias != nil {
					s[j] += bias(i, h, j)
				}
				mx = math.Max(mx, s[j])
			}
			var sum float64
			for j := range n {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			for j := range n {
				for c := range hd {
					out[i*heads*hd+h*hd+c] += s[j] / sum * float64(v[j*heads*hd+h*hd+c])
				}
			}
		}
	}
	return out
}

// TestAttentionPrefix: with Causal and Prefix, the first Prefix rows see one another both ways
// and every later row sees the prefix and the rows before it (an encoder's image tokens and its
// learned queries); SegmentAttention takes a relative-position bias per segment; CachedAttention
// refuses both forms.
func TestAttentionPrefix(t *testing.T) {
	b := newBackend(t)
	const heads, hd, n = 2, 8, 13
	for _, prefix := range []int{0, 1, 5, 13, 20} {
		qv, kv, vv := moeValues(n*heads*hd, 1, 2), moeValues(n*heads*hd, 2, 2), moeValues(n*heads*hd, 3, 2)
		q, k, v := tensorOf(t, b, qv, n, heads*hd, ml.F32), tensorOf(t, b, kv, n, heads*hd, ml.F32), tensorOf(t, b, vv, n, heads*hd, ml.F32)
		out, _ := b.Alloc(n, heads*hd, ml.F32)
		b.Attention(out, q, k, v, ml.Attn{Heads: heads, KVHeads: heads, HeadDim: hd, Scale: 0.3, Mask: ml.Mask{Causal: true, Prefix: prefix}})
		got := read(t, b, out)
		want := attnRef(qv, kv, vv, n, n, heads, hd, true, 0, prefix, 0.3, nil)
		for i := range got {
			if math.Abs(float64(got[i])-want[i]) > 1e-5 {
				t.Fatalf("prefix %d: value %d: %g, want %g", prefix, i, got[i], want[i])
			}
		}
	}

	// two segments of a 2x3 grid each, one bias tensor for all six rows
	const rows, gh, gw = 12, 2, 3
	qv, kv, vv := moeValues(rows*heads*hd, 4, 2), moeValues(rows*heads*hd, 5, 2), moeValues(rows*heads*hd, 6, 2)
	hv, wv := moeValues(rows*heads*gh, 7, 3), moeValues(rows*heads*gw, 8, 3)
	q, k, v := tensorOf(t, b, qv, rows, heads*hd, ml.F32), tensorOf(t, b, kv, rows, heads*hd, ml.F32), tensorOf(t, b, vv, rows, heads*hd, ml.F32)
	rel := ml.RelPos{H: tensorOf(t, b, hv, rows, heads*gh, ml.F32), W: tensorOf(t, b, wv, rows, heads*gw, ml.F32), Height: gh, Width: gw}
	out, _ := b.Alloc(rows, heads*hd, ml.F32)
	a := ml.Attn{Heads: heads, KVHeads: heads, HeadDim: hd, Scale: 0.3, Mask: ml.Mask{RelPos: rel}}
	b.SegmentAttention(out, q, k, v, []int32{0, 6, 12}, a)
	got := read(t, b, out)
	for s := range 2 {
		r0 := 6 * s
		bias := func(i, h, j int) float64 {
			return float64(hv[(r0+i)*heads*gh+h*gh+j/gw] + wv[(r0+i)*heads*gw+h*gw+j%gw])
		}
		want := attnRef(qv[r0*heads*hd:], kv[r0*heads*hd:], vv[r0*heads*hd:], 6, 6, heads, hd, false, 0, 0, 0.3, bias)
		for i := range want {
			if d := math.Abs(float64(got[r0*heads*hd+i]) - want[i]); d > 1e-5 {
				t.Fatalf("segment %d: value %d: %g, want %g", s, i, got[r0*heads*hd+i], want[i])
			}
		}
	}
	b.CachedAttention(out.RowsAt(0, 1), q.RowsAt(0, 1), k, v, b.Ints([]int32{0, 1}), ml.Attn{Heads: heads, KVHeads: heads, HeadDim: hd,
		Scale: 0.3, Mask: ml.Mask{Causal: true, Prefix: 3}})
	if err := b.Sync(); !errors.Is(err, ml.ErrInvalidInput) {
		t.Errorf("CachedAttention with a prefix: %v, want ErrInvalidInput", err)
	}
	bad := rel
	bad.Width = 2 // 2x2 keys for a segment of 6
	b.SegmentAttention(out, q, k, v, []int32{0, 6, 12}, ml.Attn{Heads: heads, KVHeads: heads, HeadDim: hd, Scale: 0.3, Mask: ml.Mask{RelPos: bad}})
	if err := b.Sync(); !errors.Is(err, ml.ErrInvalidInput) {
		t.Errorf("a bias grid smaller than the segment: %v, want ErrInvalidInput", err)
	}
}
