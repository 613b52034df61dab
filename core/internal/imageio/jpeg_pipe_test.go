package imageio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iris-vlm/iris/internal/poll"
)

// pipeCorpus is the baseline JPEGs the pipe tests decode: the sequential fixtures (every
// sampling, restart intervals, grey, RGB, one scan per component), the GPU workload's photo,
// and Go-encoded images of awkward sizes (4:2:0 and grey).
func pipeCorpus(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/decode/*.jpg")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../../scripts/reference/testdata/photo_426x320.jpg")
	corpus := map[string][]byte{}
	for _, f := range files {
		if strings.Contains(f, "prog") || strings.Contains(f, "cmyk") || strings.Contains(f, "j32x32_") {
			// Progressive, refused, or truncated (TestPipeFailures truncates baseline files).
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		corpus[filepath.Base(f)] = data
	}
	for _, sz := range [][2]int{{1, 1}, {17, 33}, {300, 7}, {7, 300}, {250, 190}, {641, 481}} {
		corpus[fmt.Sprintf("go_rgb_%dx%d", sz[0], sz[1])] = goJPEG(t, sz[0], sz[1], false, 1)
		corpus[fmt.Sprintf("go_gray_%dx%d", sz[0], sz[1])] = goJPEG(t, sz[0], sz[1], true, 1)
	}
	return corpus
}

// goJPEG encodes a w×h pattern with image/jpeg (4:2:0 colour, or grey); seed varies it.
func goJPEG(t *testing.T, w, h int, gray bool, seed int) []byte {
	t.Helper()
	var img image.Image
	if gray {
		g := image.NewGray(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				g.SetGray(x, y, color.Gray{uint8(x*seed*7 + y*y*3 + x*y)})
			}
		}
		img = g
	} else {
		c := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				c.SetRGBA(x, y, color.RGBA{uint8(x * 255 / w), uint8(y*seed*5 + x*x), uint8((x ^ y) * seed), 255})
			}
		}
		img = c
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// reference decodes data the way every image was decoded before the pipe: all scans, then the
// IDCT over every block, then the conversion of every row. Whether or not a pipe already
// converted the image, these recompute the planes from the coefficients.
func reference(t *testing.T, data []byte) []byte {
	t.Helper()
	hdr, err := Inspect(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := decodeJPEG(context.Background(), data, hdr.jpeg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.release()
	if err := d.reconstructAll(); err != nil {
		t.Fatal(err)
	}
	pix := make([]byte, 3*d.width*d.height)
	d.toRGB(pix, hdr.jpeg.rgb, 0, d.height)
	return pix
}

// withPipe runs fn at the given GOMAXPROCS with workers for images of any size (small) or the
// default threshold.
func withPipe(procs int, small bool, fn func()) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	if small {
		defer func(m int) { minPipePixels = m }(minPipePixels)
		minPipePixels = 1
	}
	fn()
}

// TestPipeMatchesBands checks that the pipelined decoding of baseline JPEGs, inline and with
// workers, gives the same pixels as the decode-then-reconstruct path.
func TestPipeMatchesBands(t *testing.T) {
	pipelined := 0
	for name, data := range pipeCorpus(t) {
		want := reference(t, data)
		hdr, err := Inspect(data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, procs := range []int{1, 2, 4, 8} {
			for _, small := range []bool{false, true} {
				withPipe(procs, small, func() {
					d, err := decodeJPEG(context.Background(), data, hdr.jpeg)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					defer d.release()
					// Only a one-scan image is converted during its scan; others, such as one
					// scan per component, take the decode-then-reconstruct path.
					if d.outDone != (d.scans == 1) {
						t.Fatalf("%s: %d scans, converted during the scan: %v", name, d.scans, d.outDone)
					}
					if !d.outDone {
						return
					}
					pipelined++
					if !bytes.Equal(d.out.Pix, want) {
						t.Fatalf("%s at GOMAXPROCS %d (small %v): pipelined pixels differ", name, procs, small)
					}
				})
			}
		}
	}
	t.Logf("%d pipelined decodes checked", pipelined)
}

// TestPipeLaterScan checks that a second sequential scan of the same components, after the one
// the pipe converted, makes Decode recompute the pixels: the file is image A's header and scan
// followed by image B's scan (image/jpeg writes the same tables for the same quality and
// size), so it must decode to B.
func TestPipeLaterScan(t *testing.T) {
	for _, gray := range []bool{false, true} {
		a, b := goJPEG(t, 250, 190, gray, 1), goJPEG(t, 250, 190, gray, 3)
		sos := bytes.Index(b, []byte{0xff, sosMarker})
		if sos < 0 || !bytes.Equal(a[:bytes.Index(a, []byte{0xff, sosMarker})], b[:sos]) {
			t.Fatal("image/jpeg wrote different headers")
		}
		two := append(append([]byte{}, a[:len(a)-2]...), b[sos:]...)
		want := reference(t, b)
		for _, procs := range []int{1, 4} {
			withPipe(procs, false, func() {
				hdr, err := Inspect(two, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				img, err := Decode(context.Background(), two, hdr)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(img.Pix, want) {
					t.Fatalf("gray %v, GOMAXPROCS %d: the pixels are the first scan's, not the second's", gray, procs)
				}
			})
		}
	}
}

// countdownCtx reports cancellation from its n-th Err call on: the decoder checks at every
// marker and MCU row, so this cancels a decode part-way through its scan.
type countdownCtx struct {
	context.Context
	n atomic.Int32
}

func (c *countdownCtx) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestPipeFailures decodes truncated, corrupted and cancelled baseline files with workers:
// each must fail (or decode) as a typed refusal or a context error, and leave no goroutine
// behind.
func TestPipeFailures(t *testing.T) {
	photo, err := os.ReadFile("../../../scripts/reference/testdata/photo_426x320.jpg")
	if err != nil {
		t.Fatal(err)
	}
	sources := [][]byte{
		photo,
		fixture(t, "j64x48_rst_rows.jpg"),
		fixture(t, "j64x64_420_q50_rst_edges.jpg"),
		goJPEG(t, 250, 190, true, 1),
	}
	withPipe(4, true, func() {
		before := runtime.NumGoroutine()
		check := func(what string, data []byte, ctx context.Context) {
			hdr, err := Inspect(data, Limits{})
			if err != nil {
				return
			}
			_, err = Decode(ctx, data, hdr)
			if err != nil && CodeOf(err) == "" && !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: untyped error %v", what, err)
			}
		}
		for _, src := range sources {
			sos := bytes.Index(src, []byte{0xff, sosMarker})
			for i := range 40 {
				// Cut the scan short.
				cut := sos + (len(src)-sos)*i/40
				check("truncated", src[:cut], context.Background())
				// Corrupt it: a run of bad bytes, or a marker where entropy data should be.
				bad := append([]byte{}, src...)
				at := sos + 20 + (len(src)-sos-40)*i/40
				for k := range 8 {
					bad[at+k] ^= byte(0x5a + 17*k)
				}
				check("corrupt", bad, context.Background())
				bad = append([]byte{}, src...)
				bad[at], bad[at+1] = 0xff, byte(0xc0+i%16)
				check("marker", bad, context.Background())
				// Cancel it after i context checks.
				ctx := &countdownCtx{Context: context.Background()}
				ctx.n.Store(int32(i))
				check("cancelled", src, ctx)
			}
		}
		// a worker that has signalled its exit may not have returned yet
		poll.Until(t, 10*time.Second, fmt.Sprintf("the decoders' workers to end (%d goroutines before)", before), func() string {
			if got := runtime.NumGoroutine(); got > before {
				buf := make([]byte, 1<<16)
				return fmt.Sprintf("%d goroutines:\n%s", got, buf[:runtime.Stack(buf, true)])
			}
			return ""
		})
	})
}
