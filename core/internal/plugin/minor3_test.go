package plugin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/plugin"
	"github.com/iris-vlm/iris/core/internal/plugin/plugintest"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// TestViewsMinor3: patch masks, a float resize and separator tokens (wire minor 3) come through
// the host as the plugin sent them, and malformed ones are refused with a message naming them.
func TestViewsMinor3(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	p := plugintest.Load(t, h, "views", modules["views"], plugin.Limits{})
	if d := p.Describe(); d.Minor < 3 {
		t.Fatalf("the views plugin speaks wire minor %d, want 3 or later", d.Minor)
	}
	pl, err := p.Plan(context.Background(), img, viewsParams("masked", 2))
	if err != nil {
		t.Fatal(err)
	}
	last, th := pl.Views[1], pl.Views[2]
	if last.Mask == nil || *last.Mask != (abi.Rect{Width: 4, Height: 1}) || last.ImageTokens != 2 ||
		th.FloatResize == nil || th.FloatResize.Width != 56 || pl.SeparatorTokens != 3 || pl.ImageTokens != 4+2+4+3 {
		t.Fatalf("plan %+v: mask %+v, float resize %+v", pl, last.Mask, th.FloatResize)
	}
	f, err := p.Frame(context.Background(), abi.FrameRequest{Question: "q", Plan: pl, Params: viewsParams("masked", 2)})
	if err != nil || f.Spans[0].Count+f.Spans[1].Count != pl.ImageTokens {
		t.Fatalf("frame %+v, %v", f, err)
	}
	for _, tc := range []struct{ mode, want string }{
		{"mask_outside", "view 0: malformed message: mask {X:0 Y:0 Width:5 Height:4} is not inside the 4x4 patch grid"},
		{"mask_tokens", "image tokens 4, the llm grid under mask {X:0 Y:0 Width:4 Height:1} keeps 2"},
		{"float_antialias", "float resize bicubic/torchvision antialias=true: the float resize is bicubic/torchvision without antialias"},
		{"separators_sum", "image tokens 12, the views give 12 and the separators 3"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			_, err := p.Plan(context.Background(), img, viewsParams(tc.mode, 2))
			if plugin.CodeOf(err) != plugin.CodeBadOutput || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %s saying %q", err, plugin.CodeBadOutput, tc.want)
			}
		})
	}
}
