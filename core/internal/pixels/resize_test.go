package pixels

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// resizeCase is one row of testdata/resize_golden.json.
type resizeCase struct {
	W, H, OW, OH int
	Seed         uint64
	Filter       string
	Torch, PIL   string
	Synth        string
}

func loadResizeGolden(t *testing.T) []resizeCase {
	t.Helper()
	path := "testdata/resize_golden.json"
	if p := os.Getenv("IRIS_RESIZE_SWEEP"); p != "" {
		path = p // a larger uncommitted grid from `just resize-sweep`
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden: %v", err)
	}
	var doc struct{ Cases []resizeCase }
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parsing golden: %v", err)
	}
	if len(doc.Cases) < 100 {
		t.Fatalf("golden holds only %d cases", len(doc.Cases))
	}
	return doc.Cases
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestResizeGolden checks both flavours against torchvision and Pillow on the whole size grid,
// with the vector kernels and with the scalar code.
func TestResizeGolden(t *testing.T) { withKernels(t, testResizeGolden) }

// withKernels runs test with the scalar code and, where the CPU has them, the AVX2 kernels.
func withKernels(t *testing.T, test func(*testing.T)) {
	modes := []bool{false}
	if haveAVX2 {
		modes = append(modes, true)
	}
	defer func(v bool) { haveAVX2 = v }(haveAVX2)
	for _, vec := range modes {
		haveAVX2 = vec
		name := "scalar"
		if vec {
			name = "avx2"
		}
		t.Run(name, test)
	}
}

func testResizeGolden(t *testing.T) {
	var checked, skipped int
	for _, c := range loadResizeGolden(t) {
		src := synth(c.W, c.H, c.Seed)
		if got := sha(src.Pix)[:16]; got != c.Synth {
			t.Fatalf("synthetic %dx%d seed %d differs from the generator's: %s vs %s", c.W, c.H, c.Seed, got, c.Synth)
		}
		filter := Bicubic
		if c.Filter == "bilinear" {
			filter = Bilinear
		}
		for _, fl := range []struct {
			flavor Flavor
			want   string
		}{{Torch, c.Torch}, {PIL, c.PIL}} {
			name := fmt.Sprintf("%s/%s/%dx%d-%dx%d", fl.flavor, c.Filter, c.W, c.H, c.OW, c.OH)
			if strings.HasPrefix(fl.want, "error") {
				skipped++ // the reference itself fails on this shape
				continue
			}
			dst := &RGB{W: c.OW, H: c.OH}
			if err := Resize(dst, src, fl.flavor, filter); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			checked++
			if got := sha(dst.Pix); got != fl.want {
				t.Errorf("%s: sha256 %s, want %s", name, got[:12], fl.want[:12])
			}
		}
	}
	t.Logf("%d resizes bit-identical to the reference; %d shapes the reference refuses", checked, skipped)
}

// TestResizeConcurrent runs resizes that share cached filter tables side by side (under -race
// it checks that a shared table is only read) and compares them with one alone.
func TestResizeConcurrent(t *testing.T) {
	src := synth(97, 61, 5)
	for _, fl := range []Flavor{Torch, PIL} {
		want := &RGB{W: 50, H: 70}
		if err := Resize(want, src, fl, Bicubic); err != nil {
			t.Fatal(err)
		}
		got := make([]*RGB, 4)
		var wg sync.WaitGroup
		for i := range got {
			got[i] = &RGB{W: 50, H: 70}
			wg.Go(func() {
				if err := Resize(got[i], src, fl, Bicubic); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for i, g := range got {
			if !bytes.Equal(g.Pix, want.Pix) {
				t.Errorf("%s: resize %d differs", fl, i)
			}
		}
	}
}
