package core

import (
	"errors"
	"testing"

	"github.com/iris-vlm/iris/bundles"
)

func TestResolveBudget(t *testing.T) {
	withBudgets := &bundles.Manifest{Name: "b",
		Image:  bundles.Image{Budgets: &bundles.Budgets{Bounds: [2]int64{1000, 100000}, Low: [2]int64{1000, 5000}, High: [2]int64{1000, 100000}}},
		Plugin: bundles.Plugin{Params: map[string]any{"min_pixels": int64(2000), "max_pixels": int64(50000)}}}
	without := &bundles.Manifest{Name: "fixed"}
	cases := []struct {
		name     string
		m        *bundles.Manifest
		p        Params
		want     *PixelBudget
		code     string
		param    string
		nilNoErr bool
	}{
		{name: "none: the bundle's params", m: withBudgets, want: &PixelBudget{Detail: "auto", MinPixels: 2000, MaxPixels: 50000, Default: true}},
		{name: "auto", m: withBudgets, p: Params{Detail: "auto"}, want: &PixelBudget{Detail: "auto", MinPixels: 2000, MaxPixels: 50000, Default: true}},
		{name: "low", m: withBudgets, p: Params{Detail: "low"}, want: &PixelBudget{Detail: "low", MinPixels: 1000, MaxPixels: 5000}},
		{name: "high", m: withBudgets, p: Params{Detail: "high"}, want: &PixelBudget{Detail: "high", MinPixels: 1000, MaxPixels: 100000}},
		{name: "max only", m: withBudgets, p: Params{MaxPixels: 20000}, want: &PixelBudget{Detail: "auto", MinPixels: 2000, MaxPixels: 20000}},
		{name: "min only", m: withBudgets, p: Params{MinPixels: 3000}, want: &PixelBudget{Detail: "auto", MinPixels: 3000, MaxPixels: 50000}},
		{name: "min over the detail's max raises it", m: withBudgets, p: Params{Detail: "low", MinPixels: 8000}, want: &PixelBudget{Detail: "low", MinPixels: 8000, MaxPixels: 8000}},
		{name: "max under the default min lowers it", m: withBudgets, p: Params{MaxPixels: 1500}, want: &PixelBudget{Detail: "auto", MinPixels: 1500, MaxPixels: 1500}},
		{name: "max clamped to the bounds", m: withBudgets, p: Params{MaxPixels: 1 << 40}, want: &PixelBudget{Detail: "auto", MinPixels: 2000, MaxPixels: 100000}},
		{name: "min clamped to the bounds", m: withBudgets, p: Params{MinPixels: 10, MaxPixels: 20}, want: &PixelBudget{Detail: "auto", MinPixels: 1000, MaxPixels: 1000}},
		{name: "equal to the default", m: withBudgets, p: Params{MinPixels: 2000, MaxPixels: 50000}, want: &PixelBudget{Detail: "auto", MinPixels: 2000, MaxPixels: 50000, Default: true}},
		{name: "crossed", m: withBudgets, p: Params{MinPixels: 9000, MaxPixels: 8000}, code: "conflicting_parameters", param: "max_pixels"},
		{name: "bad detail", m: withBudgets, p: Params{Detail: "ultra"}, code: "invalid_value", param: "detail"},
		{name: "negative", m: withBudgets, p: Params{MinPixels: -1}, code: "invalid_value", param: "min_pixels"},
		{name: "fixed bundle, nothing asked", m: without, nilNoErr: true},
		{name: "fixed bundle, auto", m: without, p: Params{Detail: "auto"}, nilNoErr: true},
		{name: "fixed bundle, low", m: without, p: Params{Detail: "low"}, code: "image_budget_not_supported", param: "detail"},
		{name: "fixed bundle, max_pixels", m: without, p: Params{MaxPixels: 5}, code: "image_budget_not_supported", param: "max_pixels"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := resolveBudget(c.m, c.p)
			if c.code != "" {
				var e *Error
				if !errors.As(err, &e) || e.Kind != KindInvalid || e.Code != c.code || e.Param != c.param {
					t.Fatalf("got %+v, %v; want %s (%s)", got, err, c.code, c.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.nilNoErr {
				if got != nil {
					t.Fatalf("got %+v, want none", got)
				}
				return
			}
			if got == nil || *got != *c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	a := Resolved{Budget: &PixelBudget{MinPixels: 1000, MaxPixels: 5000}}
	d := Resolved{Budget: &PixelBudget{MinPixels: 2000, MaxPixels: 50000, Default: true}}
	if a.Key("q", "x") == d.Key("q", "x") || d.Key("q", "x") != (Resolved{}).Key("q", "x") {
		t.Error("a budget other than the default must change the answer's identity, the default must not")
	}
}
