package cuda

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/engine/fixture"
)

func TestPlanVision(t *testing.T) {
	cfg, err := engine.LoadConfig(fixture.ModelDir("tiny-untied"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		grid    engine.Grid
		windows []int32 // boundaries in patches
	}{
		// 320x240: a 9x11 unit grid in 4x4-unit windows: 3x3 windows, the last row and column partial
		{engine.Grid{T: 1, H: 18, W: 22}, []int32{0, 64, 128, 176, 240, 304, 352, 368, 384, 396}},
		// 8x8 units: exactly 2x2 windows (the padded empty windows add no boundary)
		{engine.Grid{T: 1, H: 16, W: 16}, []int32{0, 64, 128, 192, 256}},
	} {
		p := planVision(&cfg.Vision, tc.grid)
		if !slices.Equal(p.windows, tc.windows) {
			t.Errorf("grid %v: windows %v, want %v", tc.grid, p.windows, tc.windows)
		}
		if want := []int32{0, int32(tc.grid.Patches())}; !slices.Equal(p.frames, want) {
			t.Errorf("grid %v: frames %v, want %v", tc.grid, p.frames, want)
		}
		seen := slices.Clone(p.index)
		slices.Sort(seen)
		for i, v := range seen {
			if int(v) != i {
				t.Fatalf("grid %v: window index is not a permutation of the %d units", tc.grid, p.units)
			}
		}
		half := cfg.Vision.Hidden / cfg.Vision.Heads / 2
		if len(p.rope) != 2*p.patches*half || p.rope[0] != 1 || p.rope[p.patches*half] != 0 {
			t.Errorf("grid %v: rotary table starts cos %v sin %v (len %d)", tc.grid, p.rope[0], p.rope[p.patches*half], len(p.rope))
		}
	}
}

func TestCheckpointIndex(t *testing.T) {
	ck, err := openCheckpoint(fixture.ModelDir("tiny-untied"))
	if err != nil {
		t.Fatal(err)
	}
	tn, err := ck.find(textPrefixes, "embed_tokens.weight")
	if err != nil {
		t.Fatal(err)
	}
	if err := shaped(tn, 151936, 32); err != nil {
		t.Error(err)
	}
	pe, err := ck.find(visionPrefixes, "patch_embed.proj.weight")
	if err != nil {
		t.Fatal(err)
	}
	if err := shaped(pe, 64, 3*2*14*14); err != nil {
		t.Errorf("the Conv3d kernel must bind as a matrix: %v", err)
	}
	if _, err := ck.find(textPrefixes, "layers.99.mlp.down_proj.weight"); err == nil || !strings.Contains(err.Error(), "missing tensor") {
		t.Errorf("missing tensor: err = %v", err)
	}
}

func TestReadHeaderRejects(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string][]byte{
		"short":    {1, 2, 3},
		"too-long": binary.LittleEndian.AppendUint64(nil, 1<<40),
		"offsets":  header(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,64]}}`),
		"shape":    header(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}}`),
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readHeader(path); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, header(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := readHeader(ok)
	if err != nil || len(ts) != 1 || ts[0].Numel() != 4 {
		t.Errorf("valid file: %v %v", ts, err)
	}
}

// header builds a safetensors file with a JSON header and 16 bytes of data.
func header(js string) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	b = append(b, js...)
	return append(b, make([]byte, 16)...)
}
