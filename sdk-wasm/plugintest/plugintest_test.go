package plugintest_test

import (
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/plugintest"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// echo plans a fixed 28x28 canvas and refuses images under 2x2.
type echo struct{}

func (echo) Describe() vlm.Description {
	return vlm.Description{Family: "echo", Tasks: []string{vlm.TaskVisionLanguage}}
}

func (echo) Plan(img vlm.ImageHeader, _ vlm.Params) (vlm.Plan, error) {
	if img.Width < 2 || img.Height < 2 {
		return vlm.Plan{}, vlm.Refuse(abi.CodeImageTooSmall, "%dx%d", img.Width, img.Height)
	}
	return vlm.Plan{
		Source:    vlm.Size{Width: img.Width, Height: img.Height},
		Resize:    &vlm.Resize{Width: 28, Height: 28, Filter: abi.FilterBilinear, Flavor: abi.FlavorPIL, Antialias: true},
		Normalize: vlm.Normalize{Rescale: 1.0 / 255, Std: [3]float64{1, 1, 1}, Flavor: abi.FlavorPIL},
		Patches:   vlm.Patches{Size: 14, Temporal: 1, Merge: 2, Layout: abi.LayoutMergeBlocks},
		Grid:      vlm.Grid{T: 1, H: 2, W: 2}, LLMGrid: vlm.Grid{T: 1, H: 1, W: 1}, ImageTokens: 1,
	}, nil
}

func (echo) Frame(req vlm.FrameRequest, _ vlm.Params) (vlm.Frame, error) {
	return vlm.Frame{Before: req.Question, Span: vlm.ImageSpan{Pad: "<p>", Count: req.Plan.ImageTokens},
		StopTokenIDs: []int32{1}}, nil
}

func TestSuiteRunsNatively(t *testing.T) {
	s, err := plugintest.LoadSuite("testdata/echo.json")
	if err != nil {
		t.Fatal(err)
	}
	s.Run(t, plugintest.Native(echo{}))
}

func TestLoadSuiteRefusesSuitesThatProveNothing(t *testing.T) {
	for _, path := range []string{"testdata/missing.json", "testdata/empty.json", "testdata/ambiguous.json"} {
		if _, err := plugintest.LoadSuite(path); err == nil {
			t.Errorf("%s loaded", path)
		}
	}
}
