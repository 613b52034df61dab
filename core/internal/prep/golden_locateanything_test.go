package prep_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/plugin/plugintest"
	"github.com/iris-vlm/iris/core/internal/prep"
	"github.com/iris-vlm/iris/core/internal/tokenize"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// laGoldenDir holds the LocateAnything-3B remote code's preprocessing of the golden images
// (scripts/reference/golden_locateanything.py, `just golden-locateanything`).
const laGoldenDir = "testdata/golden_locateanything"

// laRow is one raster patch of 14: 3 × 14 × 14 floats.
const laRow = 3 * 14 * 14

type laManifest struct {
	Question string
	System   string
	Images   []goldenImage
	Cases    []laCase
}

// laFrame is the reference's framed prompt: its text around the image span and its input_ids
// (run-length encoded: [id, count] pairs).
type laFrame struct {
	Before, After string
	InputIDs      [][2]int32 `json:"input_ids"`
}

type laCase struct {
	Image  string
	Params map[string]any
	// Grid is the processor's image_grid_hws [h, w]; Tokens (h·w)/4.
	Grid   [2]int
	Tokens int
	// SHA256 is the sha256 of pixel_values, [N, 3, 14, 14] float32: raster patches.
	SHA256           string
	Samples          [][2]float64
	ImageFirst       *laFrame `json:"image_first"`
	TextFirst        *laFrame `json:"text_first"`
	SystemImageFirst *laFrame `json:"system_image_first"`
}

func readLAManifest(t *testing.T) *laManifest {
	t.Helper()
	var m laManifest
	readGoldenManifest(t, laGoldenDir, "LocateAnything", &m)
	if len(m.Images) < 20 || len(m.Cases) < len(m.Images) {
		t.Fatalf("LocateAnything golden manifest: %d images, %d cases", len(m.Images), len(m.Cases))
	}
	return &m
}

// newLA returns a Preparer of the locateanything plugin, compiled from source and run by the real
// host, with LocateAnything's tokenizer; wrap, when set, stands between the plugin and prep.
func newLA(tb testing.TB, wrap func(prep.Planner) prep.Planner) *prep.Preparer {
	tb.Helper()
	return familyPreparer(tb, "locateanything", "locateanything",
		"LocateAnything's tokenizer (`just setup` writes it with scripts/reference/locateanything_tokenizer.py)", wrap)
}

// TestGoldenLocateAnything runs the whole pipeline (the locateanything plugin's plan and frame
// under wazero; PIL's bicubic resize once or twice, the normalisation and the raster patches
// natively) on every golden image and compares it with the remote code's processor: the
// pixel_values bit for bit (sha256 of [N, 3, 14, 14] float32, and the sampled values), the grid,
// the image tokens, and the framed prompt with the image before the question, after it, and
// after a client system message.
func TestGoldenLocateAnything(t *testing.T) {
	m := readLAManifest(t)
	inputs := goldenInputs(t, m.Images, nil)
	pr := newLA(t, nil)
	for _, c := range m.Cases {
		name := c.Image
		if len(c.Params) > 0 {
			name += fmt.Sprint(c.Params)
		}
		t.Run(name, func(t *testing.T) {
			in, ok := inputs[c.Image]
			if !ok {
				t.Fatalf("no image %s", c.Image)
			}
			in.Question, in.Params = m.Question, c.Params
			// the params cases check the pixels; the default ones the frames too
			variants := []laVariant{{"image first", false, nil, c.ImageFirst}}
			if c.ImageFirst != nil {
				variants = append(variants, laVariant{"text first", true, nil, c.TextFirst},
					laVariant{"system", false, &m.System, c.SystemImageFirst})
			}
			for _, v := range variants {
				in.TextFirst, in.System = v.textFirst, v.system
				res, err := pr.Prepare(context.Background(), in)
				if err != nil {
					t.Fatalf("%s: %v", v.name, err)
				}
				if v.want != nil {
					if got := rle(res.InputIDs); !slices.Equal(got, v.want.InputIDs) {
						t.Errorf("%s: input_ids (run-length encoded)\n got %v\nwant %v (the reference's text: %q <img>…</img> %q)",
							v.name, got, v.want.InputIDs, v.want.Before, v.want.After)
					}
				}
				if v.name == "image first" {
					for _, d := range checkLAPixels(res, &c) {
						t.Error(d)
					}
				}
				res.Release()
			}
		})
	}
}

type laVariant struct {
	name      string
	textFirst bool
	system    *string
	want      *laFrame
}

// checkLAPixels compares a prepared image with the processor's pixel_values, grid and tokens,
// returning the differences.
func checkLAPixels(res *prep.Result, c *laCase) []string {
	var diffs []string
	gh, gw := c.Grid[0], c.Grid[1]
	if want := (abi.Grid{T: 1, H: gh, W: gw}); res.Grid != want {
		diffs = append(diffs, fmt.Sprintf("grid %+v, want %+v", res.Grid, want))
	}
	if res.Rows != gh*gw || res.Cols != laRow || len(res.PixelValues) != res.Rows*res.Cols {
		return append(diffs, fmt.Sprintf("pixel_values [%d, %d], want [%d, %d]", res.Rows, res.Cols, gh*gw, laRow))
	}
	if res.ImageTokens != c.Tokens || len(res.ImageSpans) != 1 || res.ImageSpans[0].Len != c.Tokens {
		diffs = append(diffs, fmt.Sprintf("image tokens %d, spans %+v; want one span of %d", res.ImageTokens, res.ImageSpans, c.Tokens))
	}
	var maxDiff float64
	for _, s := range c.Samples {
		maxDiff = math.Max(maxDiff, math.Abs(float64(res.PixelValues[int(s[0])])-s[1]))
	}
	sum := sha256.Sum256(float32Bytes(res.PixelValues))
	if got := hex.EncodeToString(sum[:]); got != c.SHA256 {
		diffs = append(diffs, fmt.Sprintf("pixel_values sha256 %s, want %s (max |diff| %g over %d samples)",
			got[:16], c.SHA256[:16], maxDiff, len(c.Samples)))
	}
	return diffs
}

// TestGoldenLocateAnythingCatchesMutations: the goldens fail a preprocessing that is wrong in
// any of the ways the reference invites: one resize straight to the target instead of the shrink
// then the stretch, torch's resize instead of PIL's, the fused torchvision normalisation (128 of
// the 256 byte values differ from ToTensor-then-Normalize by an ulp), or the Qwen-VL merge-block
// patch order instead of raster patches.
func TestGoldenLocateAnythingCatchesMutations(t *testing.T) {
	m := readLAManifest(t)
	inputs := goldenInputs(t, m.Images, nil)
	var c *laCase
	for i := range m.Cases {
		if m.Cases[i].Image == "synth_4000x3000" && len(m.Cases[i].Params) == 0 {
			c = &m.Cases[i]
		}
	}
	if c == nil {
		t.Fatal("no default case of synth_4000x3000 in the manifest")
	}
	in := inputs[c.Image]
	in.Question = m.Question
	for _, tc := range []struct {
		name   string
		mutate func(*abi.Plan)
	}{
		{"one resize", func(p *abi.Plan) { p.Views[0].PreResize = nil }},
		{"torch's resize", func(p *abi.Plan) {
			for _, r := range []**abi.Resize{&p.Views[0].PreResize, &p.Views[0].Resize} {
				c := **r
				c.Flavor = abi.FlavorTorchvision
				*r = &c
			}
		}},
		{"fused normalisation", func(p *abi.Plan) { p.Views[0].Normalize.Flavor = abi.FlavorTorchvision }},
		{"merge-block patch order", func(p *abi.Plan) { p.Views[0].Patches.Layout = abi.LayoutMergeBlocks }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := newLA(t, func(p prep.Planner) prep.Planner { return mutated{Planner: p, mutate: tc.mutate} })
			res, err := pr.Prepare(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			if len(checkLAPixels(res, c)) == 0 {
				t.Error("the mutated preprocessing matches the golden")
			}
		})
	}
}

// TestLocateAnythingAnswerText: LocateAnything's tokenizer keeps the grounding tokens in an answer
// decoded with special tokens skipped (the runtime's answer text), as the official decode
// (skip_special_tokens=False) does, and drops the image and role tokens.
func TestLocateAnythingAnswerText(t *testing.T) {
	root, err := plugintest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.Load(filepath.Join(root, ".build", "tokenizer", "locateanything"))
	if err != nil {
		t.Fatalf("LocateAnything's tokenizer (`just setup`): %v", err)
	}
	defer tok.Close()
	ids, err := tok.Encode("<ref>white vehicle</ref><box><12><250><999><1000></box><null><switch>")
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{151672, 5782, 7310, 151673, 151668, 151689, 151927, 152676, 152677, 151669, 152678, 152679}
	if !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	answer := append([]int32{151665, 151666, 151667, 151676, 151644}, ids...)
	if got, want := tok.DecodeSkipSpecial(answer), "<ref>white vehicle</ref><box><12><250><999><1000></box><null><switch>"; got != want {
		t.Errorf("answer text %q, want %q", got, want)
	}
}
