package cuda

import (
	"fmt"
	"slices"

	"github.com/iris-vlm/iris/core/internal/engine"
)

// tensor is one entry of a safetensors header and the file it is in.
type tensor struct {
	engine.SafetensorsEntry
	file string
}

// readHeader parses (and checks) the header of one safetensors file.
func readHeader(path string) ([]tensor, error) {
	es, err := engine.ReadSafetensorsHeader(path)
	if err != nil {
		return nil, err
	}
	out := make([]tensor, len(es))
	for i, e := range es {
		out[i] = tensor{SafetensorsEntry: e, file: path}
	}
	return out, nil
}

// checkpoint indexes the tensors of every shard by name.
type checkpoint map[string]*tensor

func openCheckpoint(dir string) (checkpoint, error) {
	files, err := engine.Shards(dir)
	if err != nil {
		return nil, err
	}
	ck := checkpoint{}
	for _, f := range files {
		ts, err := readHeader(f)
		if err != nil {
			return nil, err
		}
		for i := range ts {
			ck[ts[i].Name] = &ts[i]
		}
	}
	return ck, nil
}

// Tensor name prefixes, transformers 5 layout first, then the hub's older one (as the CPU
// engine's binder tries them).
var (
	textPrefixes   = []string{"model.language_model.", "model."}
	visionPrefixes = []string{"model.visual.", "visual."}
)

// find looks name up under each prefix.
func (ck checkpoint) find(prefixes []string, name string) (*tensor, error) {
	for _, p := range prefixes {
		if t, ok := ck[p+name]; ok {
			return t, nil
		}
	}
	return nil, fmt.Errorf("missing tensor %s%s", prefixes[0], name)
}

// shaped checks t against an expected shape (rows x cols for a matrix; a vector has cols 0).
func shaped(t *tensor, rows, cols int) error {
	if t.Dtype != "BF16" && t.Dtype != "F32" {
		return fmt.Errorf("tensor %s: dtype %s (want BF16 or F32)", t.Name, t.Dtype)
	}
	want := []int64{int64(rows)}
	if cols > 0 {
		want = append(want, int64(cols))
	}
	if cols > 0 && len(t.Shape) > 2 { // the Conv3d kernel: (out, c, t, p, p) flattens to (out, c*t*p*p)
		if t.Shape[0] == int64(rows) && t.Numel() == int64(rows)*int64(cols) {
			return nil
		}
	}
	if !slices.Equal(t.Shape, want) {
		return fmt.Errorf("tensor %s: shape %v, want %v", t.Name, t.Shape, want)
	}
	return nil
}
