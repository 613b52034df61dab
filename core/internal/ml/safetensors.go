package ml

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Shards lists the weight files of a Hugging Face checkpoint directory: those named by
// model.safetensors.index.json, else model.safetensors, else every *.safetensors.
func Shards(dir string) ([]string, error) {
	index := filepath.Join(dir, "model.safetensors.index.json")
	if data, err := os.ReadFile(index); err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &idx); err != nil {
			return nil, fmt.Errorf("reading %s: %w", index, err)
		}
		var files []string
		for _, f := range idx.WeightMap {
			if filepath.Base(f) != f {
				return nil, fmt.Errorf("%s: shard %q is not a plain file name", index, f)
			}
			files = append(files, filepath.Join(dir, f))
		}
		slices.Sort(files)
		files = slices.Compact(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: empty weight_map", index)
		}
		return files, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", index, err)
	}
	single := filepath.Join(dir, "model.safetensors")
	if _, err := os.Stat(single); err == nil {
		return []string{single}, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("%s: no safetensors weights", dir)
	}
	return files, nil
}

// SafetensorsEntry is one tensor of a safetensors file's header: what it holds and where its
// bytes are.
type SafetensorsEntry struct {
	Name   string
	Dtype  string // "BF16", "F32", "F16", ...
	Shape  []int64
	Offset int64 // from the start of the file
	Size   int64
}

// Numel is the number of values of the tensor.
func (e *SafetensorsEntry) Numel() int64 {
	n := int64(1)
	for _, d := range e.Shape {
		n *= d
	}
	return n
}

// maxSafetensorsHeader bounds a safetensors JSON header (the format's own limit is 100 MB).
const maxSafetensorsHeader = 100 << 20

// ReadSafetensorsHeader parses the header of one safetensors file and checks that every tensor's
// byte range lies in the file and, for F32, BF16 and F16, matches its shape. The order of the
// entries is not defined.
func ReadSafetensorsHeader(path string) ([]SafetensorsEntry, error) {
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
	if n == 0 || n > maxSafetensorsHeader || int64(n)+8 > st.Size() {
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
	var out []SafetensorsEntry
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
		t := SafetensorsEntry{Name: name, Dtype: e.Dtype, Shape: e.Shape, Offset: base + e.Offsets[0], Size: e.Offsets[1] - e.Offsets[0]}
		width := map[string]int64{"F32": 4, "BF16": 2, "F16": 2}[e.Dtype]
		if e.Offsets[0] < 0 || t.Size < 0 || t.Offset+t.Size > st.Size() || (width > 0 && t.Numel()*width != t.Size) {
			return nil, fmt.Errorf("%s: tensor %s: offsets [%d, %d) do not fit its shape or the file", path, name, e.Offsets[0], e.Offsets[1])
		}
		out = append(out, t)
	}
	return out, nil
}
