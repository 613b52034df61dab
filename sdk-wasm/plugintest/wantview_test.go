package plugintest

import (
	"strings"
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// TestWantViewMinor3: a want's pad, float resize and mask are compared as the plan means them
// (no pad and a zero pad alike, {0, 0} for no float resize, no mask for the whole grid).
func TestWantViewMinor3(t *testing.T) {
	white := abi.RGB{255, 255, 255}
	src := abi.Size{Width: 100, Height: 60}
	crop := abi.View{Resize: &abi.Resize{Width: 112, Height: 67}, Region: &abi.Rect{X: 56, Y: 56, Width: 56, Height: 11},
		Pad: &abi.Pad{Bottom: 45, Color: white}, Grid: abi.Grid{T: 1, H: 4, W: 4}, Mask: &abi.Rect{Width: 4, Height: 1}}
	whole := abi.View{Resize: &abi.Resize{Width: 112, Height: 67}, Grid: abi.Grid{T: 1, H: 4, W: 4},
		FloatResize: &abi.Resize{Width: 56, Height: 56}}
	resized := abi.Size{Width: 112, Height: 67}
	for _, tc := range []struct {
		name string
		v    abi.View
		want WantView
		err  string
	}{
		{"all as planned", crop, WantView{Resized: resized, Region: crop.Region, Pad: &abi.Pad{Bottom: 45, Color: white},
			FloatResize: &abi.Size{}, Mask: &abi.Rect{Width: 4, Height: 1}}, ""},
		{"pad colour", crop, WantView{Resized: resized, Region: crop.Region, Pad: &abi.Pad{Bottom: 45}}, "pad"},
		{"no pad is a zero pad of any colour", whole, WantView{Resized: resized, Pad: &abi.Pad{Color: white}}, ""},
		{"mask", crop, WantView{Resized: resized, Region: crop.Region, Mask: &abi.Rect{Width: 4, Height: 2}}, "patch mask"},
		{"no mask is the whole grid", whole, WantView{Resized: resized, Mask: &abi.Rect{Width: 4, Height: 4}}, ""},
		{"float resize", whole, WantView{Resized: resized, FloatResize: &abi.Size{Width: 56, Height: 56}}, ""},
		{"float resize missing", crop, WantView{Resized: resized, Region: crop.Region, FloatResize: &abi.Size{Width: 56, Height: 56}}, "float resize"},
		{"float resize unwanted", whole, WantView{Resized: resized, FloatResize: &abi.Size{}}, "float resize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.want.check(&tc.v, src)
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
}

// TestWantViewPreResize: a want's pre-resize is compared by size, {0, 0} for none.
func TestWantViewPreResize(t *testing.T) {
	src := abi.Size{Width: 4000, Height: 3000}
	twice := abi.View{PreResize: &abi.Resize{Width: 1847, Height: 1385}, Resize: &abi.Resize{Width: 1848, Height: 1400}}
	once := abi.View{Resize: &abi.Resize{Width: 1848, Height: 1400}}
	resized := abi.Size{Width: 1848, Height: 1400}
	for _, tc := range []struct {
		name string
		v    abi.View
		want WantView
		err  string
	}{
		{"as planned", twice, WantView{Resized: resized, PreResize: &abi.Size{Width: 1847, Height: 1385}}, ""},
		{"another size", twice, WantView{Resized: resized, PreResize: &abi.Size{Width: 1848, Height: 1385}}, "pre-resize to"},
		{"missing", once, WantView{Resized: resized, PreResize: &abi.Size{Width: 1847, Height: 1385}}, "pre-resize to {Width:0 Height:0}"},
		{"unwanted", twice, WantView{Resized: resized, PreResize: &abi.Size{}}, "pre-resize to {Width:1847 Height:1385}"},
		{"not checked", twice, WantView{Resized: resized}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.want.check(&tc.v, src)
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
}
