package ml

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// safetensorsWidth is the size in bytes of one value of each dtype of the safetensors format
// whose values are whole bytes.
var safetensorsWidth = map[string]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// ReadSafetensorsHeader parses the header of the safetensors file at path
// ([ParseSafetensorsHeader]); errors name the file.
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
	es, err := ParseSafetensorsHeader(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return es, nil
}

// ParseSafetensorsHeader parses the header of a safetensors file of size bytes, read through r,
// and checks every tensor against it: its byte range lies inside the data (the bytes after the
// header), its dimensions are not negative, for a dtype of whole-byte values (F32, BF16, I64,
// ...) its size is the shape's values times the dtype's width, and no two tensors' bytes
// overlap. The entries are returned in the order of their bytes in the file.
func ParseSafetensorsHeader(r io.ReaderAt, size int64) ([]SafetensorsEntry, error) {
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("reading header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n == 0 || n > maxSafetensorsHeader || int64(n) > size-8 {
		return nil, fmt.Errorf("header length %d does not fit the file of %d bytes", n, size)
	}
	hdr := make([]byte, n)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("reading header: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("parsing header: %w", err)
	}
	base := int64(8 + n)
	dataLen := size - base
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
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		begin, end := e.Offsets[0], e.Offsets[1]
		if begin < 0 || end < begin || end > dataLen {
			return nil, fmt.Errorf("tensor %s: offsets [%d, %d) are not inside the %d bytes of data", name, begin, end, dataLen)
		}
		// the most values the bytes can hold: a value takes at least one bit
		w, known := safetensorsWidth[e.Dtype]
		limit := min(end-begin, math.MaxInt64/8) * 8
		if known {
			limit = (end - begin) / w
		}
		numel, ok := shapeNumel(e.Shape, limit)
		if !ok {
			return nil, fmt.Errorf("tensor %s: shape %v has a negative dimension or more %s values than %d bytes hold", name, e.Shape, e.Dtype, end-begin)
		}
		if known && numel*w != end-begin {
			return nil, fmt.Errorf("tensor %s: %d bytes, its %s shape %v needs %d", name, end-begin, e.Dtype, e.Shape, numel*w)
		}
		out = append(out, SafetensorsEntry{Name: name, Dtype: e.Dtype, Shape: e.Shape, Offset: base + begin, Size: end - begin})
	}
	slices.SortFunc(out, func(a, b SafetensorsEntry) int {
		return cmp.Or(cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Size, b.Size), strings.Compare(a.Name, b.Name))
	})
	for i := 1; i < len(out); i++ {
		if prev := out[i-1]; out[i].Offset < prev.Offset+prev.Size {
			return nil, fmt.Errorf("tensors %s and %s overlap: [%d, %d) and [%d, %d)", prev.Name, out[i].Name,
				prev.Offset-base, prev.Offset+prev.Size-base, out[i].Offset-base, out[i].Offset+out[i].Size-base)
		}
	}
	return out, nil
}

// shapeNumel returns the number of values of a shape; ok is false for a negative dimension or a
// count over limit (checked factor by factor, so the product never overflows).
func shapeNumel(shape []int64, limit int64) (n int64, ok bool) {
	n = 1
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d == 0 {
			n = 0
		}
	}
	if n == 0 {
		return 0, true
	}
	for _, d := range shape {
		if d > limit/n {
			return 0, false
		}
		n *= d
	}
	return n, true
}
