package prep_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/iris-vlm/iris/core/internal/plugin/plugintest"
	"github.com/iris-vlm/iris/core/internal/prep"
)

// BenchmarkPrepare runs the whole pipeline on a 640x480 golden JPEG (decoded once) for each
// family, and on the 426x320 photo of the latency workload (scripts/reference/testdata), and
// reports the median of each stage besides the mean of the whole.
//
//	CGO_LDFLAGS=-L$PWD/.build/lib go test -run '^$' -bench Prepare -benchtime 200x ./core/internal/prep
func BenchmarkPrepare(b *testing.B) {
	m := readManifest(b)
	e := newEnv(b)
	var in prep.Input
	for _, im := range m.Images {
		if im.File == "progressive_640x480.jpg" {
			in = decode(b, im.File, im.SHA256, im.RGBSHA256)
		}
	}
	in.Question = m.Question
	photo := decodePhoto(b)
	photo.Question = m.Question
	for _, c := range []struct {
		family  string
		release bool // hand pixel_values back, as the runtime does after the engine ran
		photo   bool // the 426x320 photo instead of the 640x480 JPEG
	}{{"qwen2_5_vl", false, false}, {"qwen2_5_vl", true, false}, {"qwen3_vl", true, false}, {"qwen2_5_vl", true, true}} {
		family := c.family
		name := family
		if c.release {
			name += "/released"
		}
		in := in
		if c.photo {
			name += "/photo_426x320"
			in = photo
		}
		b.Run(name, func(b *testing.B) {
			pr, err := prep.New(prep.Config{Plugin: e.plugins[family], Tokenizer: e.tok})
			if err != nil {
				b.Fatal(err)
			}
			var plan, pix, frame, tok []time.Duration
			for b.Loop() {
				res, err := pr.Prepare(context.Background(), in)
				if err != nil {
					b.Fatal(err)
				}
				plan = append(plan, res.Timings.Plan)
				pix = append(pix, res.Timings.Pixels)
				frame = append(frame, res.Timings.Frame)
				tok = append(tok, res.Timings.Tokenize)
				if c.release {
					res.Release()
				}
			}
			for _, s := range []struct {
				name string
				d    []time.Duration
			}{{"plan", plan}, {"pixels", pix}, {"frame", frame}, {"tokenize", tok}} {
				slices.Sort(s.d)
				b.ReportMetric(float64(s.d[len(s.d)/2].Microseconds()), s.name+"-p50-µs")
			}
		})
	}
}

// decodePhoto decodes scripts/reference/testdata/photo_426x320.jpg, the image of the latency
// workload (smart_resize takes it to 420x308, 660 patches).
func decodePhoto(t testing.TB) prep.Input {
	t.Helper()
	root, err := plugintest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "scripts", "reference", "testdata", "photo_426x320.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	return decodeBytes(t, data)
}
