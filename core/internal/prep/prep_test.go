package prep_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/iris-vlm/iris/core/internal/pixels"
	"github.com/iris-vlm/iris/core/internal/prep"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// fakePlanner returns a fixed plan and frame; tests edit them to reach each branch.
type fakePlanner struct {
	plan    abi.Plan
	frame   abi.Frame
	planErr error

	mu     sync.Mutex
	gotReq abi.FrameRequest
}

func (f *fakePlanner) Plan(_ context.Context, img abi.ImageHeader, _ map[string]any) (abi.Plan, error) {
	if f.planErr != nil {
		return abi.Plan{}, f.planErr
	}
	p := f.plan
	p.Source = abi.Size{Width: img.Width, Height: img.Height}
	return p, nil
}

func (f *fakePlanner) Frame(_ context.Context, req abi.FrameRequest) (abi.Frame, error) {
	f.mu.Lock()
	f.gotReq = req
	f.mu.Unlock()
	fr := f.frame
	if len(fr.Spans) == 0 {
		fr.Span.Count = req.Plan.ImageTokens
	}
	return fr, nil
}

// fakeTokenizer maps each rune to its code point and knows three special tokens.
type fakeTokenizer struct{}

var specials = map[string]int32{"<s>": 1000, "<p>": 1001, "<e>": 1002}

func (fakeTokenizer) Encode(text string) ([]int32, error) {
	if strings.ContainsRune(text, 0) {
		return nil, errors.New("encode: text contains a NUL byte")
	}
	var out []int32
	for _, r := range text {
		out = append(out, r)
	}
	return out, nil
}

func (fakeTokenizer) TokenID(tok string) (int32, bool) { id, ok := specials[tok]; return id, ok }

func basePlanner() *fakePlanner {
	return &fakePlanner{
		plan: abi.Plan{
			Crop:   &abi.Rect{X: 2, Y: 1, Width: 20, Height: 10},
			Resize: &abi.Resize{Width: 24, Height: 12, Filter: abi.FilterBilinear, Flavor: abi.FlavorPIL, Antialias: true},
			Pad:    &abi.Pad{Top: 2, Bottom: 2, Left: 0, Right: 0, Color: abi.RGB{9, 8, 7}},
			Normalize: abi.Normalize{Rescale: 1.0 / 255, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5},
				Flavor: abi.FlavorPIL},
			Patches:     abi.Patches{Size: 4, Temporal: 2, Merge: 2, Layout: abi.LayoutMergeBlocks},
			Grid:        abi.Grid{T: 1, H: 4, W: 6},
			LLMGrid:     abi.Grid{T: 1, H: 2, W: 3},
			ImageTokens: 6,
		},
		frame: abi.Frame{Before: "ab", Span: abi.ImageSpan{Open: []string{"<s>"}, Pad: "<p>", Close: []string{"<e>"}},
			After: "c", StopTokenIDs: []int32{7}, Hints: abi.DecodeHints{SkipSpecialTokens: true}},
	}
}

func testImage() *pixels.RGB {
	img := pixels.NewRGB(30, 20)
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	return img
}

func TestPrepareSplicesTheImageSpan(t *testing.T) {
	fp := basePlanner()
	pr, err := prep.New(prep.Config{Plugin: fp, Tokenizer: fakeTokenizer{}, Params: map[string]any{"k": int64(1)}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := pr.Prepare(context.Background(), prep.Input{Image: testImage(), Question: "q", TextFirst: true})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []int32{'a', 'b', 1000, 1001, 1001, 1001, 1001, 1001, 1001, 1002, 'c'}
	wantTypes := []int32{0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0}
	if !slices.Equal(res.InputIDs, wantIDs) || !slices.Equal(res.MMTokenTypeIDs, wantTypes) {
		t.Errorf("ids %v types %v", res.InputIDs, res.MMTokenTypeIDs)
	}
	if !slices.Equal(res.ImageSpans, []prep.Span{{Start: 3, Len: 6}}) || !slices.Equal(res.StopIDs, []int32{7}) || !res.Hints.SkipSpecialTokens {
		t.Errorf("spans %+v stop %v hints %+v", res.ImageSpans, res.StopIDs, res.Hints)
	}
	if fp.gotReq.Question != "q" || !fp.gotReq.TextFirst || fp.gotReq.Params["k"] != int64(1) {
		t.Errorf("frame request %+v", fp.gotReq)
	}

	// The same steps by hand: crop, resize, pad, normalise + patchify.
	src := testImage()
	crop := &pixels.RGB{W: 20, H: 10}
	if err := pixels.Crop(crop, src, 2, 1); err != nil {
		t.Fatal(err)
	}
	rs := &pixels.RGB{W: 24, H: 12}
	if err := pixels.Resize(rs, crop, pixels.PIL, pixels.Bilinear); err != nil {
		t.Fatal(err)
	}
	pad := &pixels.RGB{W: 24, H: 16}
	if err := pixels.Pad(pad, rs, 0, 2, [3]uint8{9, 8, 7}); err != nil {
		t.Fatal(err)
	}
	table, _ := pixels.Norm{Rescale: 1.0 / 255, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5}, Flavor: pixels.PIL}.Table()
	want, _, _, err := pixels.NormalizePatchify(nil, pad, table, pixels.Patches{Size: 4, Temporal: 2, Merge: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.PixelValues, want) || res.Rows != 24 || res.Cols != 96 {
		t.Errorf("pixel values [%d, %d] differ from the hand-run steps", res.Rows, res.Cols)
	}
}

// TestPrepareAwaitsTheImage checks the path where the image still decodes: the plan, frame and
// tokens come from the header while Await blocks, the pixels equal those of a decoded image,
// and Await's error comes back unchanged.
func TestPrepareAwaitsTheImage(t *testing.T) {
	pr, err := prep.New(prep.Config{Plugin: basePlanner(), Tokenizer: fakeTokenizer{}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := pr.Prepare(context.Background(), prep.Input{Image: testImage(), Question: "q"})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	framed := basePlanner()
	pa, err := prep.New(prep.Config{Plugin: framed, Tokenizer: fakeTokenizer{}})
	if err != nil {
		t.Fatal(err)
	}
	img := testImage()
	await := func(ctx context.Context) (*pixels.RGB, error) {
		<-release
		return img, nil
	}
	go func() {
		// Await is still blocked: the prompt must get framed meanwhile
		for {
			framed.mu.Lock()
			q := framed.gotReq.Question
			framed.mu.Unlock()
			if q == "q" {
				close(release)
				return
			}
			runtime.Gosched()
		}
	}()
	got, err := pa.Prepare(context.Background(), prep.Input{Width: img.W, Height: img.H, Await: await, Question: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.PixelValues, want.PixelValues) || !slices.Equal(got.InputIDs, want.InputIDs) || got.Grid != want.Grid {
		t.Errorf("awaited image: grid %v ids %v, want %v %v (or pixel values differ)", got.Grid, got.InputIDs, want.Grid, want.InputIDs)
	}

	bad := errors.New("the JPEG data is truncated")
	_, err = pr.Prepare(context.Background(), prep.Input{Width: 30, Height: 20, Await: func(context.Context) (*pixels.RGB, error) { return nil, bad }})
	if !errors.Is(err, bad) {
		t.Errorf("err = %v, want Await's own error", err)
	}
	wrong := pixels.NewRGB(20, 30)
	_, err = pr.Prepare(context.Background(), prep.Input{Width: 30, Height: 20, Await: func(context.Context) (*pixels.RGB, error) { return wrong, nil }})
	if err == nil || !strings.Contains(err.Error(), "header said 30x20") {
		t.Errorf("err = %v, want the size mismatch", err)
	}
	if _, err := pr.Prepare(context.Background(), prep.Input{Width: 30, Height: 20}); err == nil {
		t.Error("no image and no Await: want an error")
	}
}

func TestPrepareErrors(t *testing.T) {
	refusal := abi.Refusef(abi.CodeAspectRatioTooExtreme, "too wide")
	for _, tc := range []struct {
		name     string
		edit     func(*fakePlanner)
		question string
		want     string
		refusal  bool
	}{
		{"plugin refusal passes through", func(f *fakePlanner) { f.planErr = refusal }, "q", "too wide", true},
		{"question with NUL", func(*fakePlanner) {}, "a\x00b", "invalid_question", true},
		{"unknown span token", func(f *fakePlanner) { f.frame.Span.Open = []string{"<nope>"} }, "q", `"<nope>" is not a special token`, false},
		{"no antialias", func(f *fakePlanner) { f.plan.Resize.Antialias = false }, "q", "not a resampler this host has", false},
		{"grid disagrees", func(f *fakePlanner) { f.plan.Grid.H = 5 }, "q", "patchify gave a 4x6 grid", false},
		{"unknown norm flavour", func(f *fakePlanner) { f.plan.Normalize.Flavor = "numpy" }, "q", "normalise flavour", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := basePlanner()
			fp.frame.After = tc.question
			tc.edit(fp)
			pr, _ := prep.New(prep.Config{Plugin: fp, Tokenizer: fakeTokenizer{}})
			_, err := pr.Prepare(context.Background(), prep.Input{Image: testImage(), Question: tc.question})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			var e *abi.Error
			if isRefusal := errors.As(err, &e) && e.Kind == abi.Refusal; isRefusal != tc.refusal {
				t.Errorf("refusal %t, want %t: %v", isRefusal, tc.refusal, err)
			}
		})
	}
	if _, err := prep.New(prep.Config{}); err == nil {
		t.Error("New without a plugin")
	}
	pr, _ := prep.New(prep.Config{Plugin: basePlanner(), Tokenizer: fakeTokenizer{}})
	if _, err := pr.Prepare(context.Background(), prep.Input{}); err == nil {
		t.Error("Prepare without an image")
	}
}

// TestPrepareConcurrently shares one Preparer (its table cache and scratch images) across
// goroutines; every result must equal the sequential one.
func TestPrepareConcurrently(t *testing.T) {
	pr, _ := prep.New(prep.Config{Plugin: basePlanner(), Tokenizer: fakeTokenizer{}})
	want, err := pr.Prepare(context.Background(), prep.Input{Image: testImage(), Question: "q"})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 20 {
				got, err := pr.Prepare(context.Background(), prep.Input{Image: testImage(), Question: "q"})
				if err == nil && (!slices.Equal(got.PixelValues, want.PixelValues) || !slices.Equal(got.InputIDs, want.InputIDs)) {
					err = errors.New("a concurrent result differs")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
