package prep_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/imageio"
	"github.com/iris-vlm/iris/core/internal/plugin"
	"github.com/iris-vlm/iris/core/internal/plugin/plugintest"
	"github.com/iris-vlm/iris/core/internal/prep"
	"github.com/iris-vlm/iris/core/internal/tokenize"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// goldenDir holds transformers 5.17's preprocessing outputs for the golden images
// (scripts/reference/golden_preprocess.py; format in its README.md).
const goldenDir = "testdata/golden"

type tokens struct {
	InputIDs       []int32 `json:"input_ids"`
	MMTokenTypeIDs []int32 `json:"mm_token_type_ids"`
}

type goldenCase struct {
	File               string
	Error              *struct{ Type, Message string }
	ResizedHeight      int          `json:"resized_height"`
	ResizedWidth       int          `json:"resized_width"`
	ImageGridTHW       []int        `json:"image_grid_thw"`
	PixelValuesShape   []int        `json:"pixel_values_shape"`
	PixelValuesSHA256  string       `json:"pixel_values_sha256"`
	PixelValues        []float64    `json:"pixel_values"`
	PixelValuesSamples [][2]float64 `json:"pixel_values_samples"`
	ImageFirst         *tokens      `json:"image_first"`
	TextFirst          *tokens      `json:"text_first"`
	SystemImageFirst   *tokens      `json:"system_image_first"`
}

type manifest struct {
	Question string
	System   string
	Images   []struct {
		File      string
		SHA256    string
		RGBSHA256 string `json:"rgb_sha256"`
	}
	Families map[string]struct {
		Cases   []goldenCase
		Budgets []budgetCase
	}
}

// budgetCase is an image at a per-request pixel budget: the processor run with
// size={"shortest_edge": MinPixels, "longest_edge": MaxPixels}.
type budgetCase struct {
	goldenCase
	MinPixels int64 `json:"min_pixels"`
	MaxPixels int64 `json:"max_pixels"`
}

func readManifest(t testing.TB) *manifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(goldenDir, "manifest.json"))
	if err != nil {
		t.Fatalf("reading the golden manifest: %v", err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("parsing the golden manifest: %v", err)
	}
	if m.Question == "" || len(m.Images) < 14 {
		t.Fatalf("golden manifest: question %q, %d images", m.Question, len(m.Images))
	}
	return &m
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// env is what every golden test shares: the real tokenizer and both family plugins, compiled
// from source and running under the real wazero host.
type env struct {
	tok     *tokenize.Tokenizer
	plugins map[string]*plugin.Plugin
}

func newEnv(t testing.TB) *env {
	t.Helper()
	root, err := plugintest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.Load(filepath.Join(root, ".build", "tokenizer", "qwen3"))
	if err != nil {
		t.Fatalf("the real Qwen tokenizer (`just setup` fetches it): %v", err)
	}
	t.Cleanup(func() { _ = tok.Close() })
	h := plugintest.NewHost(t, plugin.Options{})
	e := &env{tok: tok, plugins: map[string]*plugin.Plugin{}}
	for _, family := range []string{"qwen2_5_vl", "qwen3_vl"} {
		e.plugins[family] = plugintest.Load(t, h, family, plugintest.BuildFamily(t, family), plugin.Limits{})
	}
	return e
}

// goldenImage is an image of a family's golden manifest: a committed file (its bytes' sha256, and
// the RGB the reference decoded) or pixels of golden_internvl.py's synth() formula.
type goldenImage struct {
	Name      string
	File      string
	SHA256    string
	Synth     *struct{ Width, Height, Seed int }
	RGBSHA256 string `json:"rgb_sha256"`
}

func (g goldenImage) golden() goldenImage { return g }

// goldenInputs decodes (or synthesises) every image of a golden manifest, checking its RGB
// against the reference's; a committed file is read by decodeFile, or when it is nil as
// transformers' load_image reads it (decode). E is goldenImage or a manifest's image type that
// embeds it.
func goldenInputs[E interface{ golden() goldenImage }](t *testing.T, images []E, decodeFile func(*testing.T, E) prep.Input) map[string]prep.Input {
	t.Helper()
	inputs := map[string]prep.Input{}
	for _, e := range images {
		im := e.golden()
		var in prep.Input
		switch {
		case im.Synth != nil:
			in = prep.Input{Image: synthRGB(im.Synth.Width, im.Synth.Height, im.Synth.Seed), Format: "png"}
			if hexSum(in.Image.Pix) != im.RGBSHA256 {
				t.Fatalf("%s: the synthetic pixels differ from golden_internvl.py's synth()", im.Name)
			}
		case decodeFile != nil:
			in = decodeFile(t, e)
		default:
			in = decode(t, filepath.Base(im.File), im.SHA256, im.RGBSHA256)
		}
		inputs[im.Name] = in
	}
	return inputs
}

// readGoldenManifest parses a family's golden manifest.json in dir into m; what names it in
// failures.
func readGoldenManifest(t *testing.T, dir, what string, m any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatalf("reading the %s golden manifest: %v", what, err)
	}
	if err := json.Unmarshal(raw, m); err != nil {
		t.Fatalf("parsing the %s golden manifest: %v", what, err)
	}
}

// decode reads a golden image the way the gateway does, with no aspect-ratio cap: refusing
// extreme aspect ratios is the plugin's decision under test here.
func decode(t testing.TB, file, wantSHA, wantRGB string) prep.Input {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(goldenDir, "images", file))
	if err != nil {
		t.Fatal(err)
	}
	if hexSum(data) != wantSHA {
		t.Fatalf("%s: the file differs from the manifest's", file)
	}
	in := decodeBytes(t, data)
	if hexSum(in.Image.Pix) != wantRGB {
		t.Fatalf("%s: imageio's RGB differs from PIL's (a decoder regression, see core/internal/imageio)", file)
	}
	return in
}

// decodeBytes inspects and decodes an image file as the gateway does, without the limits that
// are the gateway's to choose.
func decodeBytes(t testing.TB, data []byte) prep.Input {
	t.Helper()
	hdr, err := imageio.Inspect(data, imageio.Limits{MaxBytes: 32 << 20, MaxPixels: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	img, err := imageio.Decode(context.Background(), data, hdr)
	if err != nil {
		t.Fatal(err)
	}
	return prep.Input{Image: img, Format: hdr.Format, HasAlpha: hdr.HasAlpha}
}

// TestGolden runs the whole pipeline (plugin plan and frame under wazero, native pixels, real
// tokenizer) on every golden image for both families and compares it with the transformers
// processor: pixel_values bit for bit (sha256, and max |diff| <= 1e-6 over the stored values),
// image_grid_thw, input_ids and mm_token_type_ids for the image before and after the text, and
// the refusal reason for the images the processor refuses.
func TestGolden(t *testing.T) {
	m := readManifest(t)
	e := newEnv(t)
	inputs := map[string]prep.Input{}
	for _, im := range m.Images {
		inputs[im.File] = decode(t, im.File, im.SHA256, im.RGBSHA256)
	}
	for _, family := range []string{"qwen2_5_vl", "qwen3_vl"} {
		fam, ok := m.Families[family]
		if !ok || len(fam.Cases) < len(m.Images) {
			t.Fatalf("%s: %d golden cases", family, len(fam.Cases))
		}
		pr, err := prep.New(prep.Config{Plugin: e.plugins[family], Tokenizer: e.tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range fam.Cases {
			t.Run(family+"/"+c.File, func(t *testing.T) {
				in, ok := inputs[c.File]
				if !ok {
					t.Fatalf("no image %s", c.File)
				}
				in.Question = m.Question
				checkCase(t, pr, in, &c)
				checkSystem(t, pr, in, m.System, &c)
			})
		}
	}
}

// checkSystem compares the prompt ids after a client system message with the processor's
// apply_chat_template: it replaces Qwen2.5-VL's default system turn and is Qwen3-VL's only one.
func checkSystem(t *testing.T, pr *prep.Preparer, in prep.Input, system string, c *goldenCase) {
	t.Helper()
	if c.Error != nil {
		return
	}
	if system == "" || c.SystemImageFirst == nil {
		t.Fatal("the golden case has no system-message ids")
	}
	in.System = &system
	res, err := pr.Prepare(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if !slices.Equal(res.InputIDs, c.SystemImageFirst.InputIDs) {
		t.Errorf("system message: input_ids\n got %v\nwant %v", res.InputIDs, c.SystemImageFirst.InputIDs)
	}
	if !slices.Equal(res.MMTokenTypeIDs, c.SystemImageFirst.MMTokenTypeIDs) {
		t.Error("system message: mm_token_type_ids differ")
	}
}

// TestGoldenBudgets runs the pipeline with per-request pixel budgets (the min_pixels and
// max_pixels params a request's image_url.detail or min_pixels/max_pixels sets) on images that
// scale down and up, for both families: resize, grid, pixel_values (sha256) and input_ids must
// be the processor's at each budget.
func TestGoldenBudgets(t *testing.T) {
	m := readManifest(t)
	e := newEnv(t)
	inputs := map[string]prep.Input{}
	for _, im := range m.Images {
		inputs[im.File] = decode(t, im.File, im.SHA256, im.RGBSHA256)
	}
	for _, family := range []string{"qwen2_5_vl", "qwen3_vl"} {
		budgets := m.Families[family].Budgets
		if len(budgets) < 9 {
			t.Fatalf("%s: %d budget cases", family, len(budgets))
		}
		pr, err := prep.New(prep.Config{Plugin: e.plugins[family], Tokenizer: e.tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range budgets {
			t.Run(fmt.Sprintf("%s/%s/%d-%d", family, c.File, c.MinPixels, c.MaxPixels), func(t *testing.T) {
				in := inputs[c.File]
				in.Question = m.Question
				in.Params = map[string]any{"min_pixels": c.MinPixels, "max_pixels": c.MaxPixels}
				res, err := pr.Prepare(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Release()
				if r := res.Plan.Resize; r == nil || r.Width != c.ResizedWidth || r.Height != c.ResizedHeight {
					t.Errorf("resize %+v, want %dx%d", r, c.ResizedWidth, c.ResizedHeight)
				}
				if got := []int{res.Grid.T, res.Grid.H, res.Grid.W}; !slices.Equal(got, c.ImageGridTHW) {
					t.Errorf("image_grid_thw %v, want %v", got, c.ImageGridTHW)
				}
				if !slices.Equal(res.InputIDs, c.ImageFirst.InputIDs) || !slices.Equal(res.MMTokenTypeIDs, c.ImageFirst.MMTokenTypeIDs) {
					t.Errorf("input_ids differ: %d ids, want %d", len(res.InputIDs), len(c.ImageFirst.InputIDs))
				}
				buf := make([]byte, 4*len(res.PixelValues))
				for i, v := range res.PixelValues {
					binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
				}
				if got := hexSum(buf); got != c.PixelValuesSHA256 {
					t.Errorf("pixel_values sha256 %s, want %s", got[:16], c.PixelValuesSHA256[:16])
				}
			})
		}
	}
}

func checkCase(t *testing.T, pr *prep.Preparer, in prep.Input, c *goldenCase) {
	t.Helper()
	for _, textFirst := range []bool{false, true} {
		in.TextFirst = textFirst
		res, err := pr.Prepare(context.Background(), in)
		if c.Error != nil {
			var e *abi.Error
			if !errors.As(err, &e) || e.Kind != abi.Refusal || e.Code != abi.CodeAspectRatioTooExtreme || e.Message != c.Error.Message {
				t.Fatalf("got %v, want the refusal %s(%q)", err, c.Error.Type, c.Error.Message)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		want := c.ImageFirst
		if textFirst {
			want = c.TextFirst
		}
		if want == nil {
			t.Fatal("the case has no token ids")
		}
		if !slices.Equal(res.InputIDs, want.InputIDs) {
			t.Errorf("text first %t: input_ids\n got %v\nwant %v", textFirst, res.InputIDs, want.InputIDs)
		}
		if !slices.Equal(res.MMTokenTypeIDs, want.MMTokenTypeIDs) {
			t.Errorf("text first %t: mm_token_type_ids differ", textFirst)
		}
		if len(res.ImageSpans) != 1 || res.InputIDs[res.ImageSpans[0].Start] != 151655 || res.ImageSpans[0].Len != res.ImageTokens {
			t.Errorf("image spans %+v do not cover the placeholders", res.ImageSpans)
		}
		if textFirst {
			continue // the pixels do not depend on the order
		}
		if r := res.Plan.Resize; r == nil || r.Width != c.ResizedWidth || r.Height != c.ResizedHeight {
			t.Errorf("resize %+v, want %dx%d", r, c.ResizedWidth, c.ResizedHeight)
		}
		if got := []int{res.Grid.T, res.Grid.H, res.Grid.W}; !slices.Equal(got, c.ImageGridTHW) {
			t.Errorf("image_grid_thw %v, want %v", got, c.ImageGridTHW)
		}
		if res.Rows != c.PixelValuesShape[0] || res.Cols != c.PixelValuesShape[1] || len(res.PixelValues) != res.Rows*res.Cols {
			t.Fatalf("pixel_values [%d, %d] (%d values), want %v", res.Rows, res.Cols, len(res.PixelValues), c.PixelValuesShape)
		}
		var maxDiff float64
		for _, s := range c.PixelValuesSamples {
			maxDiff = math.Max(maxDiff, math.Abs(float64(res.PixelValues[int(s[0])])-s[1]))
		}
		for i, v := range c.PixelValues {
			maxDiff = math.Max(maxDiff, math.Abs(float64(res.PixelValues[i])-v))
		}
		if maxDiff > 1e-6 {
			t.Errorf("pixel_values: max |diff| %g over the stored values", maxDiff)
		}
		buf := make([]byte, 4*len(res.PixelValues))
		for i, v := range res.PixelValues {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		if got := hexSum(buf); got != c.PixelValuesSHA256 {
			t.Errorf("pixel_values sha256 %s, want %s", got[:16], c.PixelValuesSHA256[:16])
		}
		if res.Timings.Plan <= 0 || res.Timings.Pixels <= 0 || res.Timings.Frame <= 0 || res.Timings.Tokenize <= 0 {
			t.Errorf("timings %+v: every stage must be timed", res.Timings)
		}
	}
}

// familyPreparer returns a Preparer of a family's plugin, compiled from source and run by the real
// host, with the tokenizer `just setup` writes to .build/tokenizer/<tokenizer> (what names it and
// how it is made, for the failure); wrap, when set, stands between the plugin and prep.
func familyPreparer(tb testing.TB, family, tokenizer, what string, wrap func(prep.Planner) prep.Planner) *prep.Preparer {
	tb.Helper()
	root, err := plugintest.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := tokenize.Load(filepath.Join(root, ".build", "tokenizer", tokenizer))
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	tb.Cleanup(func() { _ = tok.Close() })
	h := plugintest.NewHost(tb, plugin.Options{})
	var pl prep.Planner = plugintest.Load(tb, h, family, plugintest.BuildFamily(tb, family), plugin.Limits{})
	if wrap != nil {
		pl = wrap(pl)
	}
	pr, err := prep.New(prep.Config{Plugin: pl, Tokenizer: tok})
	if err != nil {
		tb.Fatal(err)
	}
	return pr
}
