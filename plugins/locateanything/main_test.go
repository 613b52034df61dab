package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/plugintest"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

const casesFile = "testdata/cases.json"

// TestCases runs the reference conformance cases natively; core/internal/plugin/plugintest runs
// the same file against the compiled module.
func TestCases(t *testing.T) {
	s, err := plugintest.LoadSuite(casesFile)
	if err != nil {
		t.Fatal(err)
	}
	s.Run(t, plugintest.Native(family{}))
}

func plan(t *testing.T, w, h int, table map[string]any) (vlm.Plan, error) {
	t.Helper()
	params, err := vlm.NewParams(family{}.Describe().Params, table)
	if err != nil {
		t.Fatal(err)
	}
	return family{}.Plan(vlm.ImageHeader{Width: w, Height: h}, params)
}

// TestLimits: the largest image span the description announces is the one the reference script
// counted over every image up to 32768×32768.
func TestLimits(t *testing.T) {
	raw, err := os.ReadFile(casesFile)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		MaxImageTokens int `json:"max_image_tokens"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.MaxImageTokens == 0 {
		t.Fatalf("cases.json's max_image_tokens: %d, %v", s.MaxImageTokens, err)
	}
	if got := (family{}).Describe().Limits; got.MaxImageTokens != s.MaxImageTokens || got.MinImageTokens != 1 {
		t.Errorf("limits %+v, the reference counts at most %d tokens", got, s.MaxImageTokens)
	}
	g, err := Rescale(740, 7105, DefaultTokenLimit)
	if err != nil || g.Tokens() != DefaultMaxTokens {
		t.Errorf("740x7105: %+v (%d tokens), %v; want the largest span, %d", g, g.Tokens(), err, DefaultMaxTokens)
	}
}

// TestRescale pins the geometry on sizes whose results the reference cases hold.
func TestRescale(t *testing.T) {
	for _, tc := range []struct {
		name           string
		w, h, limit    int
		shrunk, target vlm.Size
		tokens         int
	}{
		{"320x240 is stretched to 336x252: 108 tokens", 320, 240, DefaultTokenLimit, vlm.Size{Width: 320, Height: 240}, vlm.Size{Width: 336, Height: 252}, 108},
		{"1x1 becomes one token", 1, 1, DefaultTokenLimit, vlm.Size{Width: 1, Height: 1}, vlm.Size{Width: 28, Height: 28}, 1},
		{"at the limit (160x160 patches) nothing is shrunk", 2240, 2240, DefaultTokenLimit, vlm.Size{Width: 2240, Height: 2240}, vlm.Size{Width: 2240, Height: 2240}, 6400},
		{"one patch column past it: shrunk, then stretched from the shrunk size", 2254, 2240, DefaultTokenLimit, vlm.Size{Width: 2246, Height: 2233}, vlm.Size{Width: 2268, Height: 2240}, 6480},
		{"4000x3000 is shrunk under 25600 patches", 4000, 3000, DefaultTokenLimit, vlm.Size{Width: 2591, Height: 1943}, vlm.Size{Width: 2604, Height: 1960}, 6510},
		{"the class default limit 4096 shrinks 1600x1200", 1600, 1200, 4096, vlm.Size{Width: 1040, Height: 780}, vlm.Size{Width: 1064, Height: 784}, 1064},
		{"a 1-pixel strip of 7140 is 510 patches long", 7140, 1, DefaultTokenLimit, vlm.Size{Width: 7140, Height: 1}, vlm.Size{Width: 7140, Height: 28}, 255},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Rescale(tc.w, tc.h, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if g.Shrunk != tc.shrunk || g.Target != tc.target || g.Tokens() != tc.tokens {
				t.Errorf("Rescale = %+v (%d tokens), want %+v %+v (%d)", g, g.Tokens(), tc.shrunk, tc.target, tc.tokens)
			}
		})
	}
}

// mutation is the geometry with one of the reference's rules changed.
type mutation func(w, h, limit int) (shrunk, target vlm.Size, ok bool)

// TestHazardsMatter: the reference cases catch each rule a port gets wrong. For each mutation,
// some case of cases.json wants another view than the mutated geometry gives.
func TestHazardsMatter(t *testing.T) {
	s, err := plugintest.LoadSuite(casesFile)
	if err != nil {
		t.Fatal(err)
	}
	shrink := func(w, h, limit int, round func(float64) int) vlm.Size {
		if p := (w / PatchSize) * (h / PatchSize); p > limit {
			scale := math.Sqrt(float64(limit) / float64(p))
			return vlm.Size{Width: round(float64(w) * scale), Height: round(float64(h) * scale)}
		}
		return vlm.Size{Width: w, Height: h}
	}
	trunc := func(f float64) int { return int(f) }
	up := func(s vlm.Size) vlm.Size {
		return vlm.Size{Width: ceilTo(s.Width, Factor), Height: ceilTo(s.Height, Factor)}
	}
	fits := func(s vlm.Size) bool { return s.Width/PatchSize < MaxGridSide && s.Height/PatchSize < MaxGridSide }
	for _, m := range []struct {
		name string
		f    mutation
	}{
		{"the target from the source size, not the shrunk one", func(w, h, limit int) (vlm.Size, vlm.Size, bool) {
			s := shrink(w, h, limit, trunc)
			t := up(vlm.Size{Width: w, Height: h})
			return s, t, fits(t)
		}},
		{"the class default in_token_limit 4096", func(w, h, limit int) (vlm.Size, vlm.Size, bool) {
			if limit == DefaultTokenLimit {
				limit = 4096
			}
			s := shrink(w, h, limit, trunc)
			return s, up(s), fits(up(s))
		}},
		{"the shrink rounded instead of truncated", func(w, h, limit int) (vlm.Size, vlm.Size, bool) {
			s := shrink(w, h, limit, func(f float64) int { return int(math.RoundToEven(f)) })
			return s, up(s), fits(up(s))
		}},
		{"the limit on pixels/196 instead of whole patches", func(w, h, limit int) (vlm.Size, vlm.Size, bool) {
			s := vlm.Size{Width: w, Height: h}
			if p := float64(w*h) / 196; p > float64(limit) {
				scale := math.Sqrt(float64(limit) / p)
				s = vlm.Size{Width: int(float64(w) * scale), Height: int(float64(h) * scale)}
			}
			return s, up(s), fits(up(s))
		}},
		{"the 512-patch refusal off", func(w, h, limit int) (vlm.Size, vlm.Size, bool) {
			s := shrink(w, h, limit, trunc)
			return s, up(s), true
		}},
	} {
		t.Run(m.name, func(t *testing.T) {
			caught := 0
			for _, c := range s.Cases {
				if c.Image.Width < 1 || c.Image.Height < 1 || c.Params["fixed_size"] != nil {
					continue
				}
				limit := DefaultTokenLimit
				if v, ok := c.Params[ParamInTokenLimit].(float64); ok {
					limit = int(v)
				}
				shrunk, target, ok := m.f(c.Image.Width, c.Image.Height, limit)
				if ok != (c.WantError == "") {
					caught++
					continue
				}
				if !ok {
					continue
				}
				v := c.Want.Views[0]
				if v.Resized != target || (v.PreResize != nil && v.PreResize.Width != 0 && *v.PreResize != shrunk) {
					caught++
				}
			}
			if caught == 0 {
				t.Errorf("no reference case tells the mutated geometry from the reference's")
			}
		})
	}
}

// TestRefusals: an empty image is too small; the reference's "Exceed pos emb" and a shrink to an
// empty side are refused with what happened; bad params are failures naming the param.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		w, h   int
		params map[string]any
		code   string
		text   string
	}{
		{0, 5, nil, abi.CodeImageTooSmall, "image is 0x5"},
		{7200, 20, nil, abi.CodeAspectRatioTooExtreme,
			"Exceed pos emb: a 7200x20 image becomes 7224x28, 516x2 patches; MoonViT's positions stop at 511 a side"},
		{14, 7168, nil, abi.CodeAspectRatioTooExtreme, "Exceed pos emb: a 14x7168 image becomes 28x7168, 2x512 patches"},
		{32768, 14, map[string]any{ParamInTokenLimit: 1}, abi.CodeAspectRatioTooExtreme,
			"a 32768x14 image shrunk under 1 patches is 677x0, an empty side"},
	} {
		_, err := plan(t, tc.w, tc.h, tc.params)
		var e *abi.Error
		if !errors.As(err, &e) || e.Kind != abi.Refusal || e.Code != tc.code || !strings.HasPrefix(e.Message, tc.text) {
			t.Errorf("%dx%d: %v, want %s %q", tc.w, tc.h, err, tc.code, tc.text)
		}
	}
	for _, table := range []map[string]any{{ParamInTokenLimit: 0}, {ParamFixedSize: 450}, {ParamFixedSize: -28},
		{ParamFixedSize: maxFixedSize + Factor}} {
		_, err := plan(t, 640, 480, table)
		var e *abi.Error
		if !errors.As(err, &e) || e.Kind != abi.Failure || e.Code != abi.CodeInvalidParams {
			t.Errorf("%v: %v", table, err)
		}
	}
}

// TestPlanValidates: the plans of a spread of sizes pass the host's validation, resizing twice
// only when the image is past the token limit and the stretch changes the shrunk size, and the
// fixed geometry resizes once to its square.
func TestPlanValidates(t *testing.T) {
	for _, tc := range []struct {
		w, h  int
		twice bool
	}{{1, 1, false}, {320, 240, false}, {336, 252, false}, {4000, 3000, true}, {2254, 2240, true}, {7140, 1, false}, {30000, 3000, true}} {
		p, err := plan(t, tc.w, tc.h, nil)
		if err != nil {
			t.Fatalf("%dx%d: %v", tc.w, tc.h, err)
		}
		if err := p.Validate(p.Source); err != nil {
			t.Errorf("%dx%d: %v", tc.w, tc.h, err)
		}
		v := p.Views[0]
		if (v.PreResize != nil) != tc.twice || len(p.Views) != 1 || p.ImageTokens != v.ImageTokens {
			t.Errorf("%dx%d: %d views, pre-resize %+v, tokens %d", tc.w, tc.h, len(p.Views), v.PreResize, p.ImageTokens)
		}
		if tc.w == 336 && v.Resize != nil {
			t.Errorf("336x252 is already a multiple of 28: resized to %+v", *v.Resize)
		}
	}
	p, err := plan(t, 4000, 3000, map[string]any{ParamFixedSize: 448})
	if err != nil || p.Validate(p.Source) != nil || p.Views[0].PreResize != nil || p.ImageTokens != 256 ||
		*p.Views[0].Resize != (vlm.Resize{Width: 448, Height: 448, Filter: abi.FilterBicubic, Flavor: abi.FlavorPIL, Antialias: true}) {
		t.Errorf("fixed_size 448: %+v, %v", p, err)
	}
}
