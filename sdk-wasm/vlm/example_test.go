package vlm_test

import (
	"fmt"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// tiled is an ABI-2 plugin in InternVL's shape: the image resized to a canvas of cols×rows tiles
// of 448×448 (the host resizes it once), the tiles in row-major order, then a thumbnail.
type tiled struct{ cols, rows int }

func (tiled) Describe() vlm.Description {
	return vlm.Description{ABI: 2, Family: "tiled", Tasks: []string{vlm.TaskVisionLanguage}}
}

var imagenet = vlm.Normalize{Rescale: 1.0 / 255, Mean: [3]float64{0.485, 0.456, 0.406},
	Std: [3]float64{0.229, 0.224, 0.225}, Flavor: abi.FlavorTorchvision}

// tile is one 448×448 view: 32×32 patches of 14 pixels in raster order, 256 tokens after a
// pixel shuffle of 0.5 (merge 2).
func tile(r *vlm.Resize, region *vlm.Rect) vlm.View {
	return vlm.View{Resize: r, Region: region, Normalize: imagenet,
		Patches: vlm.Patches{Size: 14, Temporal: 1, Merge: 2, Layout: abi.LayoutTiles},
		Grid:    vlm.Grid{T: 1, H: 32, W: 32}, LLMGrid: vlm.Grid{T: 1, H: 16, W: 16}, ImageTokens: 256}
}

func bicubic(w, h int) *vlm.Resize {
	return &vlm.Resize{Width: w, Height: h, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision, Antialias: true}
}

func (t tiled) Plan(img vlm.ImageHeader, _ vlm.Params) (vlm.Plan, error) {
	p := vlm.Plan{Source: vlm.Size{Width: img.Width, Height: img.Height}}
	canvas := bicubic(448*t.cols, 448*t.rows)
	for i := range t.cols * t.rows {
		p.Views = append(p.Views, tile(canvas, &vlm.Rect{X: 448 * (i % t.cols), Y: 448 * (i / t.cols), Width: 448, Height: 448}))
	}
	if t.cols*t.rows > 1 {
		p.Views = append(p.Views, tile(bicubic(448, 448), nil))
	}
	for _, v := range p.Views {
		p.ImageTokens += v.ImageTokens
	}
	return p, nil
}

// Frame puts every tile in one span, as InternVL's template does; a family that wraps each tile
// in its own tokens returns one span per tile in Frame.Spans instead.
func (tiled) Frame(req vlm.FrameRequest, _ vlm.Params) (vlm.Frame, error) {
	return vlm.Frame{
		Before:       "<|im_start|>user\n",
		Span:         vlm.ImageSpan{Open: []string{"<img>"}, Pad: "<IMG_CONTEXT>", Count: req.Plan.ImageTokens, Close: []string{"</img>"}},
		After:        "\n" + req.Question + "<|im_end|>\n<|im_start|>assistant\n",
		StopTokenIDs: []int32{151645},
	}, nil
}

// A plan of several views: a 4:3 photo on a 4×3 grid of tiles and its thumbnail, as the host
// receives it (validated exactly as the host validates it).
func ExamplePlan_views() {
	s := vlm.NewServer(tiled{cols: 4, rows: 3})
	req, _ := abi.Encode(&abi.PlanRequest{Image: abi.ImageHeader{Width: 426, Height: 320}})
	p, err := abi.DecodeResponse[abi.Plan](s.Handle(abi.ExportPlan, req))
	if err == nil {
		err = p.Validate(p.Source)
	}
	if err == nil {
		err = p.Uniform()
	}
	rows, cols := p.PixelShape()
	fmt.Println(len(p.Views), "views,", p.ImageTokens, "image tokens, grid", p.ImageGrid(), "pixels", rows, "x", cols, err)
	fmt.Println("tile 5 is", *p.Views[5].Region, "of the", p.Views[5].Resize.Width, "x", p.Views[5].Resize.Height, "canvas")
	// Output:
	// 13 views, 3328 image tokens, grid {13 32 32} pixels 13312 x 588 <nil>
	// tile 5 is {448 448 448 448} of the 1792 x 1344 canvas
}
