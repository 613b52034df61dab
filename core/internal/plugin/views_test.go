package plugin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/plugin"
	"github.com/iris-vlm/iris/core/internal/plugin/plugintest"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

func viewsParams(m string, tiles int) map[string]any {
	return map[string]any{"mode": m, "tiles": int64(tiles)}
}

// TestViewsPlugin: an ABI-2 plugin's views and spans come through the host as it sent them.
func TestViewsPlugin(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	p := plugintest.Load(t, h, "views", modules["views"], plugin.Limits{})
	if d := p.Describe(); d.ABI != 2 || d.Minor != abi.Minor {
		t.Fatalf("describe: ABI %d minor %d, want 2 and %d", d.ABI, d.Minor, abi.Minor)
	}
	for _, tiles := range []int{1, 2, 8} {
		pl, err := p.Plan(context.Background(), img, viewsParams("ok", tiles))
		views := tiles + 1
		if tiles == 1 {
			views = 1
		}
		if err != nil || len(pl.Views) != views || pl.ImageTokens != 4*views || pl.ImageGrid() != (abi.Grid{T: views, H: 4, W: 4}) {
			t.Fatalf("%d tiles: %d views, %d tokens, grid %+v; %v", tiles, len(pl.Views), pl.ImageTokens, pl.ImageGrid(), err)
		}
		if got := pl.Views[tiles-1].Region; got == nil || got.X != 56*(tiles-1) {
			t.Errorf("%d tiles: last tile's region %+v", tiles, got)
		}
		f, err := p.Frame(context.Background(), abi.FrameRequest{Question: "q", Plan: pl, Params: viewsParams("ok", tiles)})
		if err != nil || len(f.ImageSpans()) != min(views, 2) {
			t.Fatalf("%d tiles: frame %+v, %v", tiles, f, err)
		}
	}
}

// TestViewsAbuseIsRefused: whatever an ABI-2 plugin says, the host refuses plans and frames it
// cannot execute faithfully or that would cost more than any single-view plan: too many views,
// too many pixels, token counts that do not add up, regions off the canvas, views of two grids.
func TestViewsAbuseIsRefused(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	p := plugintest.Load(t, h, "views", modules["views"], plugin.Limits{})
	for _, tc := range []struct{ mode, want string }{
		{"too_many_views", "65 views, at most 64"},
		{"huge_views", "canvas pixels"},
		{"too_many_tokens", "image tokens 1048577, the views give 12"},
		{"token_sum", "image tokens 13, the views give 12"},
		{"region_outside", "is not inside the 112x56 resized image"},
		{"mixed_grids", "engine takes one patch grid per image"},
		{"single_fields_too", "sets single-view fields too"},
		{"tiles_temporal", "needs temporal 1"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			_, err := p.Plan(context.Background(), img, viewsParams(tc.mode, 2))
			if plugin.CodeOf(err) != plugin.CodeBadOutput || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %s saying %q", err, plugin.CodeBadOutput, tc.want)
			}
		})
	}
	pl, err := p.Plan(context.Background(), img, viewsParams("ok", 2))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Frame(context.Background(), abi.FrameRequest{Question: "q", Plan: pl, Params: viewsParams("spans_sum", 2)})
	if plugin.CodeOf(err) != plugin.CodeBadOutput || !strings.Contains(err.Error(), "image spans have 13 placeholders, the plan has 12") {
		t.Fatalf("spans whose counts do not add up: %v", err)
	}
	if f, err := p.Frame(context.Background(), abi.FrameRequest{Question: "q", Plan: pl, Params: viewsParams("one_span", 2)}); err != nil ||
		f.Span.Count != 12 || f.Spans != nil {
		t.Fatalf("one span for three views: %+v, %v", f, err)
	}
}

// TestV1PluginMayNotSendV2: an ABI-1 plugin (raw) that answers with views or spans is refused,
// and a plugin that describes an ABI its marker does not reach never loads.
func TestV1PluginMayNotSendV2(t *testing.T) {
	h := plugintest.NewHost(t, plugin.Options{})
	p := plugintest.Load(t, h, "raw", modules["raw"], plugin.Limits{})
	if _, err := p.Plan(context.Background(), img, mode("views")); plugin.CodeOf(err) != plugin.CodeBadOutput ||
		!strings.Contains(err.Error(), "ABI v1 plugin answered with views") {
		t.Errorf("views from ABI 1: %v", err)
	}
	pl := okPlan(t, p)
	if _, err := p.Frame(context.Background(), abi.FrameRequest{Question: "q", Plan: pl, Params: mode("spans")}); plugin.CodeOf(err) != plugin.CodeBadOutput ||
		!strings.Contains(err.Error(), "ABI v1 plugin answered with several image spans") {
		t.Errorf("spans from ABI 1: %v", err)
	}
}
