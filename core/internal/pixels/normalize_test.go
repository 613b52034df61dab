package pixels

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"
)

// TestNormTables compares both flavours' lookup tables with transformers' arithmetic
// (testdata/resize_golden.json, "norms").
func TestNormTables(t *testing.T) {
	raw, err := os.ReadFile("testdata/resize_golden.json")
	if err != nil {
		t.Fatalf("reading golden: %v", err)
	}
	var doc struct {
		Norms []struct {
			Name       string
			Mean, Std  [3]float64
			Rescale    float64
			Torch, PIL string
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Norms) < 3 {
		t.Fatalf("golden holds %d normalisations", len(doc.Norms))
	}
	for _, n := range doc.Norms {
		for _, fl := range []struct {
			flavor Flavor
			want   string
		}{{Torch, n.Torch}, {PIL, n.PIL}} {
			tab, err := Norm{Rescale: n.Rescale, Mean: n.Mean, Std: n.Std, Flavor: fl.flavor}.Table()
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 0, 3*256*4)
			for c := range 3 {
				for _, v := range tab[c] {
					buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				}
			}
			if got := sha(buf); got != fl.want {
				t.Errorf("%s/%s: table sha256 %s, want %s", n.Name, fl.flavor, got[:12], fl.want[:12])
			}
		}
	}
}

// TestNormFlavoursDiffer guards against the two flavours collapsing into one: the fused
// division and the float64 rescale round differently somewhere.
func TestNormFlavoursDiffer(t *testing.T) {
	n := Norm{Rescale: 1.0 / 255, Mean: [3]float64{0.48145466, 0.4578275, 0.40821073}, Std: [3]float64{0.26862954, 0.26130258, 0.27577711}}
	n.Flavor = Torch
	a, _ := n.Table()
	n.Flavor = PIL
	b, _ := n.Table()
	if *a == *b {
		t.Fatal("torch and PIL normalisation tables are identical")
	}
}

func TestNormRejects(t *testing.T) {
	for _, n := range []Norm{
		{Rescale: 0, Std: [3]float64{1, 1, 1}, Flavor: Torch},
		{Rescale: 1, Std: [3]float64{1, 0, 1}, Flavor: Torch},
		{Rescale: 1, Std: [3]float64{1, 1, 1}},
		{Rescale: math.Inf(1), Std: [3]float64{1, 1, 1}, Flavor: PIL},
	} {
		if _, err := n.Table(); err == nil {
			t.Errorf("%+v: no error", n)
		}
	}
}
