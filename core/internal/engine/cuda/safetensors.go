package cuda

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/iris-vlm/iris/core/internal/engine"
)

// tensor is one entry of a safetensors header: where its bytes are and what they hold.
type tensor struct {
	name   string
	file   string
	dtype  string // "BF16", "F32", "F16", ...
	shape  []int64
	offset int64 // from the start of the file
	size   int64
}

func (t *tensor) numel() int64 {
	n := int64(1)
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// maxHeader bounds a safetensors JSON header (the format's own limit is 100 MB).
const maxHeader = 100 << 20

// readHeader parses the header of one safetensors file.
func readHeader(path string) ([]tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var lenBuf [8]byte
	if _, err := f.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("%s: reading header length: %w", path, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n == 0 || n > maxHeader || int64(n)+8 > st.Size() {
		return nil, fmt.Errorf("%s: header length %d does not fit the file", path, n)
	}
	hdr := make([]byte, n)
	if _, err := f.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("%s: reading header: %w", path, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("%s: parsing header: %w", path, err)
	}
	base := int64(8 + n)
	var out []tensor
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			Dtype   string   `json:"dtype"`
			Shape   []int64  `json:"shape"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", path, name, err)
		}
		t := tensor{name: name, file: path, dtype: e.Dtype, shape: e.Shape, offset: base + e.Offsets[0], size: e.Offsets[1] - e.Offsets[0]}
		width := map[string]int64{"F32": 4, "BF16": 2, "F16": 2}[e.Dtype]
		if e.Offsets[0] < 0 || t.size < 0 || t.offset+t.size > st.Size() || (width > 0 && t.numel()*width != t.size) {
			return nil, fmt.Errorf("%s: tensor %s: offsets [%d, %d) do not fit its shape or the file", path, name, e.Offsets[0], e.Offsets[1])
		}
		out = append(out, t)
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
			ck[ts[i].name] = &ts[i]
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
	if t.dtype != "BF16" && t.dtype != "F32" {
		return fmt.Errorf("tensor %s: dtype %s (want BF16 or F32)", t.name, t.dtype)
	}
	want := []int64{int64(rows)}
	if cols > 0 {
		want = append(want, int64(cols))
	}
	if cols > 0 && len(t.shape) > 2 { // the Conv3d kernel: (out, c, t, p, p) flattens to (out, c*t*p*p)
		if t.shape[0] == int64(rows) && t.numel() == int64(rows)*int64(cols) {
			return nil
		}
	}
	if !slices.Equal(t.shape, want) {
		return fmt.Errorf("tensor %s: shape %v, want %v", t.name, t.shape, want)
	}
	return nil
}
