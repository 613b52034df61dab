package core

import (
	"fmt"

	"github.com/iris-vlm/iris/bundles"
)

// Plugin params a pixel budget sets (bundles.Budgets).
const (
	paramMinPixels = "min_pixels"
	paramMaxPixels = "max_pixels"
)

// resolveBudget chooses a request's image pixel budget: the detail's budget (the bundle's
// [plugin.params] range for "auto" or none), then min_pixels and max_pixels replacing its ends
// (the one the request names wins over the other when they cross), then both clamped into the
// bundle's bounds: no request gets more (or fewer) pixels than the operator allows. A bundle
// without budgets refuses every request for one but "auto".
func resolveBudget(m *bundles.Manifest, p Params) (*PixelBudget, error) {
	switch p.Detail {
	case "", DetailAuto, DetailLow, DetailHigh:
	default:
		return nil, Errorf(KindInvalid, "invalid_value", "detail", "detail must be \"auto\", \"low\" or \"high\"")
	}
	if p.MinPixels < 0 || p.MaxPixels < 0 {
		return nil, Errorf(KindInvalid, "invalid_value", "min_pixels", "min_pixels and max_pixels must be positive")
	}
	if p.MinPixels > 0 && p.MaxPixels > 0 && p.MinPixels > p.MaxPixels {
		return nil, Errorf(KindInvalid, "conflicting_parameters", "max_pixels", "min_pixels %d is over max_pixels %d", p.MinPixels, p.MaxPixels)
	}
	b := m.Image.Budgets
	if b == nil {
		for _, f := range []struct {
			set   bool
			param string
		}{{p.Detail == DetailLow || p.Detail == DetailHigh, "detail"}, {p.MinPixels > 0, "min_pixels"}, {p.MaxPixels > 0, "max_pixels"}} {
			if f.set {
				return nil, Errorf(KindInvalid, "image_budget_not_supported", f.param,
					"model %q declares no image budgets: its image resolution is fixed (image_url.detail \"auto\" only)", m.Name)
			}
		}
		return nil, nil
	}
	def, err := defaultBudget(m)
	if err != nil {
		return nil, err
	}
	out := &PixelBudget{Detail: DetailAuto, MinPixels: def[0], MaxPixels: def[1]}
	switch p.Detail {
	case DetailLow:
		out.Detail, out.MinPixels, out.MaxPixels = DetailLow, b.Low[0], b.Low[1]
	case DetailHigh:
		out.Detail, out.MinPixels, out.MaxPixels = DetailHigh, b.High[0], b.High[1]
	}
	if p.MinPixels > 0 {
		out.MinPixels, out.MaxPixels = p.MinPixels, max(out.MaxPixels, p.MinPixels)
	}
	if p.MaxPixels > 0 {
		out.MaxPixels, out.MinPixels = p.MaxPixels, min(out.MinPixels, p.MaxPixels)
	}
	if p.Detail != DetailAuto && p.Detail != "" || p.MinPixels > 0 || p.MaxPixels > 0 {
		out.MinPixels = min(max(out.MinPixels, b.Bounds[0]), b.Bounds[1])
		out.MaxPixels = min(max(out.MaxPixels, b.Bounds[0]), b.Bounds[1])
	}
	out.Default = out.MinPixels == def[0] && out.MaxPixels == def[1]
	return out, nil
}

// defaultBudget is the bundle's [plugin.params] pixel range, what a request without a budget
// gets; a bundle that declares budgets must set both (bundle build does).
func defaultBudget(m *bundles.Manifest) ([2]int64, error) {
	var out [2]int64
	for i, name := range []string{paramMinPixels, paramMaxPixels} {
		switch v := m.Plugin.Params[name].(type) {
		case int64:
			out[i] = v
		case int:
			out[i] = int64(v)
		default:
			return out, &Error{Kind: KindInternal, Code: "invalid_bundle", Message: "internal error",
				Err: fmt.Errorf("bundle %s declares image budgets but no integer plugin.params.%s", m.Name, name)}
		}
	}
	return out, nil
}

// budgetParams are the plugin params of a request's budget, merged over the bundle's; nil when
// the bundle's own apply.
func budgetParams(b *PixelBudget) map[string]any {
	if b == nil || b.Default {
		return nil
	}
	return map[string]any{paramMinPixels: b.MinPixels, paramMaxPixels: b.MaxPixels}
}
