package deepseekocr2

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
)

type plansGolden struct {
	Windows []struct {
		H, W, Side int
		Padded     [2]int
		Rows       []int32
	}
	Convs []struct {
		H, W, Cin, Cout, Kernel, Stride, Pad, Seed int
		OutH                                       int `json:"out_h"`
		OutW                                       int `json:"out_w"`
		Out                                        string
	}
}

func readPlans(t *testing.T) *plansGolden {
	t.Helper()
	raw, err := os.ReadFile("testdata/plans.json")
	if err != nil {
		t.Fatal(err)
	}
	var g plansGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Windows) < 4 || len(g.Convs) < 6 {
		t.Fatalf("golden: %d window partitions, %d convolutions", len(g.Windows), len(g.Convs))
	}
	return &g
}

// TestWindowPlan: the plan's window order is transformers' window_partition (the 64x64 map of a
// 1024 view and the 48x48 of a 768 tile in windows of 14, padded to 70 and 56, and odd sizes),
// the padding reading the zero row; Back undoes it.
func TestWindowPlan(t *testing.T) {
	for _, c := range readPlans(t).Windows {
		p := NewWindowPlan(c.H, c.W, c.Side)
		if p.PaddedH != c.Padded[0] || p.PadW != c.Padded[1] || len(p.Rows) != len(c.Rows) {
			t.Fatalf("%dx%d/%d: padded %dx%d, %d rows; want %v, %d rows", c.H, c.W, c.Side, p.PaddedH, p.PadW, len(p.Rows), c.Padded, len(c.Rows))
		}
		for i, r := range p.Rows {
			want := c.Rows[i] - 1 // the golden's p + 1, 0 for padding
			if want < 0 {
				want = int32(c.H * c.W)
			}
			if r != want {
				t.Fatalf("%dx%d/%d: windowed row %d reads %d, want %d", c.H, c.W, c.Side, i, r, want)
			}
		}
		for pos, w := range p.Back {
			if p.Rows[w] != int32(pos) {
				t.Fatalf("%dx%d/%d: Back[%d] = %d holds %d", c.H, c.W, c.Side, pos, w, p.Rows[w])
			}
		}
		if len(p.Bounds) != p.Windows+1 || int(p.Bounds[p.Windows]) != len(p.Rows) {
			t.Fatalf("%dx%d/%d: bounds %v for %d windows", c.H, c.W, c.Side, p.Bounds, p.Windows)
		}
	}
}

// writeSafetensors writes one F32 tensor as a safetensors file.
func writeSafetensors(t *testing.T, path, name string, shape []int, v []float32) {
	t.Helper()
	hdr, err := json.Marshal(map[string]any{name: map[string]any{"dtype": "F32", "shape": shape, "data_offsets": []int{0, 4 * len(v)}}})
	if err != nil {
		t.Fatal(err)
	}
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	buf := make([]byte, 8, 8+len(hdr)+4*len(v))
	binary.LittleEndian.PutUint64(buf, uint64(len(hdr)))
	buf = append(buf, hdr...)
	for _, x := range v {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConvPlan: a convolution as the plan's Gather (padding from the zero row) and one product
// with ml.Loader.ConvTaps' reordered weight equals F.conv2d: SAM's neck (3x3 stride 1, 1x1) and
// its downsampling (3x3 stride 2) at a 1024 view's and a 768 tile's sizes and odd ones. With the
// checkpoint's weight order instead (Matrix), it does not.
func TestConvPlan(t *testing.T) {
	b, err := cpu.New(cpu.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, c := range readPlans(t).Convs {
		t.Run(fmt.Sprintf("%dx%dx%d-k%d-s%d", c.H, c.W, c.Cin, c.Kernel, c.Stride), func(t *testing.T) {
			dir := t.TempDir()
			writeSafetensors(t, filepath.Join(dir, "model.safetensors"), "conv.weight", []int{c.Cout, c.Cin, c.Kernel, c.Kernel},
				values(c.Cout*c.Cin*c.Kernel*c.Kernel, c.Seed+1, 1))
			ck, err := ml.OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			ld := ml.NewLoader(b, ck)
			taps := c.Kernel * c.Kernel
			w := ld.ConvTaps([]string{""}, "conv.weight", c.Cout, c.Cin, c.Kernel, c.Kernel)
			plain := ld.Matrix([]string{""}, "conv.weight", c.Cout, c.Cin*taps)
			if ld.Err() != nil {
				t.Fatal(ld.Err())
			}
			p := NewConvPlan(c.H, c.W, c.Kernel, c.Stride, c.Pad)
			if p.OutH != c.OutH || p.OutW != c.OutW {
				t.Fatalf("output %dx%d, want %dx%d", p.OutH, p.OutW, c.OutH, c.OutW)
			}
			n := c.H * c.W
			x, _ := b.Alloc(n+1, c.Cin, ml.F32) // the map and its zero row
			b.Write(x.RowsAt(0, n), values(n*c.Cin, c.Seed, 2))
			cols, _ := b.Alloc(len(p.Rows), c.Cin, ml.F32)
			b.Gather(cols, x, b.Ints(p.Rows))
			y, _ := b.Alloc(p.OutH*p.OutW, c.Cout, ml.F32)
			want := f32s(t, c.Out)
			diff := func(w ml.Tensor) float64 {
				b.Linears(cols.Reshape(p.OutH*p.OutW, taps*c.Cin), ml.Out{Y: y, W: w})
				got := make([]float32, p.OutH*p.OutW*c.Cout)
				b.Read(got, y)
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
				var worst float64
				for i := range got {
					worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
				}
				return worst
			}
			if d := diff(w); d > 1e-5 {
				t.Errorf("max |diff| %g against F.conv2d", d)
			}
			if taps > 1 {
				if d := diff(plain); d < 1e-3 {
					t.Errorf("the checkpoint's own weight order lands within %g of F.conv2d", d)
				}
			}
		})
	}
}
