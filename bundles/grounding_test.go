package bundles

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// laGrounding is the grounding bundle build writes for LocateAnything's config.json.
var laGrounding = Grounding{CoordFirst: 151677, CoordLast: 152677, Scale: 1000, BoxOpen: 151668, BoxClose: 151669,
	RefOpen: 151672, RefClose: 151673}

// TestGroundingFromConfig: the family's keys are read from config.json, the class defaults fill
// absent keys, and a value that is no token id or ids that collide are refused with the key.
func TestGroundingFromConfig(t *testing.T) {
	fam := Families["locateanything"]
	g, err := fam.grounding(map[string]any{"coord_start_token_id": 151677.0, "box_end_token_id": 151669.0})
	if err != nil || g == nil || *g != laGrounding {
		t.Fatalf("defaults: %+v, %v", g, err)
	}
	g, err = fam.grounding(map[string]any{"ref_start_token_id": 7.0, "ref_end_token_id": 8.0})
	if err != nil || g.RefOpen != 7 || g.RefClose != 8 || g.BoxOpen != 151668 {
		t.Fatalf("config values: %+v, %v", g, err)
	}
	for _, tc := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"coord_start_token_id": "x"}, "config.json coord_start_token_id: x is not a token id"},
		{map[string]any{"box_start_token_id": 1.5}, "box_start_token_id: 1.5 is not a token id"},
		{map[string]any{"box_start_token_id": 151700.0}, "must be distinct, non-negative and not coordinate tokens"},
		{map[string]any{"ref_end_token_id": 151672.0}, "must be distinct"},
		{map[string]any{"coord_end_token_id": 10.0}, "want 0 <= first <= last"},
	} {
		if _, err := fam.grounding(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if g, err := Families["qwen2_5_vl"].grounding(map[string]any{}); g != nil || err != nil {
		t.Errorf("a family without grounding: %+v, %v", g, err)
	}
}

// TestGroundingManifest: generation.grounding round-trips through bundle.toml and a manifest
// with a bad one is refused as ErrInvalid.
func TestGroundingManifest(t *testing.T) {
	m := validManifest(t)
	g := laGrounding
	m.Generation.Grounding = &g
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "[generation.grounding]") {
		t.Fatalf("no [generation.grounding] table:\n%s", buf.String())
	}
	m2, err := DecodeManifest(&buf)
	if err != nil || !reflect.DeepEqual(m2.Generation.Grounding, &g) {
		t.Fatalf("round trip: %+v, %v", m2.Generation.Grounding, err)
	}
	bad := laGrounding
	bad.Scale = 0
	m.Generation.Grounding = &bad
	if err := m.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "generation.grounding") {
		t.Errorf("scale 0: %v", err)
	}
}
