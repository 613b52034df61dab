package bundles

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// STensor is one tensor of a safetensors file: its name, dtype ("F32", "BF16", ...), shape and
// where its bytes lie in the file.
type STensor struct {
	Name       string
	DType      string
	Shape      []int
	file       string
	begin, end int64
}

// Numel is the tensor's element count.
func (t STensor) Numel() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// dtypeSize is the bytes an element of a float dtype the converter handles (F32, BF16); 0 for
// any other.
func dtypeSize(dtype string) int {
	switch dtype {
	case "F32":
		return 4
	case "BF16":
		return 2
	}
	return 0
}

// maxHeader bounds a safetensors header (the format's own limit is 100 MB).
const maxHeader = 100 << 20

// ReadSafetensorsHeader lists the tensors of the safetensors file at path, sorted by name.
func ReadSafetensorsHeader(path string) ([]STensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil {
		return nil, fmt.Errorf("%s: reading the header length: %w", path, err)
	}
	if n > maxHeader || int64(n)+8 > fi.Size() {
		return nil, fmt.Errorf("%s: header of %d bytes in a file of %d", path, n, fi.Size())
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, fmt.Errorf("%s: reading the header: %w", path, err)
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(raw, &hdr); err != nil {
		return nil, fmt.Errorf("%s: parsing the header: %w", path, err)
	}
	data := int64(8 + n)
	var out []STensor
	for name, v := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType   string   `json:"dtype"`
			Shape   []int    `json:"shape"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", path, name, err)
		}
		t := STensor{Name: name, DType: e.DType, Shape: e.Shape, file: path, begin: data + e.Offsets[0], end: data + e.Offsets[1]}
		if t.begin > t.end || t.end > fi.Size() {
			return nil, fmt.Errorf("%s: tensor %q at bytes [%d, %d) of %d", path, name, t.begin, t.end, fi.Size())
		}
		if sz := dtypeSize(t.DType); sz > 0 && int64(t.Numel()*sz) != t.end-t.begin {
			return nil, fmt.Errorf("%s: tensor %q: %d bytes for %s %v", path, name, t.end-t.begin, t.DType, t.Shape)
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Bytes reads the tensor's raw little-endian bytes.
func (t STensor) Bytes() ([]byte, error) {
	f, err := os.Open(t.file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, t.end-t.begin)
	if _, err := f.ReadAt(b, t.begin); err != nil {
		return nil, fmt.Errorf("%s: reading tensor %q: %w", t.file, t.Name, err)
	}
	return b, nil
}

// Floats reads a float tensor as float32 values.
func (t STensor) Floats() ([]float32, error) {
	b, err := t.Bytes()
	if err != nil {
		return nil, err
	}
	return decodeFloats(t.DType, b)
}

func decodeFloats(dtype string, b []byte) ([]float32, error) {
	switch dtype {
	case "F32":
		out := make([]float32, len(b)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out, nil
	case "BF16":
		out := make([]float32, len(b)/2)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
		return out, nil
	}
	return nil, fmt.Errorf("dtype %s: not a float type the builder converts", dtype)
}

// EncodeFloats writes float32 values as dtype's little-endian bytes (round to nearest even).
func EncodeFloats(dtype string, v []float32) ([]byte, error) {
	switch dtype {
	case "F32":
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b, nil
	case "BF16":
		b := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(b[2*i:], floatToBF16(x))
		}
		return b, nil
	}
	return nil, fmt.Errorf("dtype %s: not a float type the builder converts", dtype)
}

// floatToBF16 rounds to nearest even, as torch's .to(torch.bfloat16); NaN stays a quiet NaN.
func floatToBF16(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// SafetensorsWriter writes a safetensors file whose tensors are declared up front (F32 or BF16),
// then written in that order.
type SafetensorsWriter struct {
	f    *os.File
	w    *bufio.Writer
	next []STensor // declared, not yet written
	err  error
}

// CreateSafetensors creates the file at path, declares the tensors (their names, dtypes and
// shapes, in the order they will be written) and writes the header.
func CreateSafetensors(path string, tensors []STensor) (*SafetensorsWriter, error) {
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, t := range tensors {
		sz := dtypeSize(t.DType)
		if sz == 0 {
			return nil, fmt.Errorf("tensor %q: dtype %s", t.Name, t.DType)
		}
		n := int64(t.Numel() * sz)
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": t.Shape, "data_offsets": [2]int64{off, off + n}}
		off += n
	}
	raw, err := json.Marshal(hdr)
	if err != nil {
		return nil, err
	}
	for len(raw)%8 != 0 { // the data starts 8-aligned
		raw = append(raw, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := &SafetensorsWriter{f: f, w: bufio.NewWriterSize(f, 1<<20), next: tensors}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(raw)))
	w.write(n[:])
	w.write(raw)
	return w, w.err
}

func (w *SafetensorsWriter) write(b []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
}

// Write writes the next declared tensor's bytes.
func (w *SafetensorsWriter) Write(name string, b []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(w.next) == 0 || w.next[0].Name != name {
		return fmt.Errorf("safetensors: tensor %q written out of order", name)
	}
	t := w.next[0]
	if len(b) != t.Numel()*dtypeSize(t.DType) {
		return fmt.Errorf("safetensors: tensor %q: %d bytes for %s %v", name, len(b), t.DType, t.Shape)
	}
	w.next = w.next[1:]
	w.write(b)
	return w.err
}

// Close flushes the file; every declared tensor must have been written.
func (w *SafetensorsWriter) Close() error {
	err := w.err
	if err == nil && len(w.next) > 0 {
		err = fmt.Errorf("safetensors: %d tensors declared and not written (first %q)", len(w.next), w.next[0].Name)
	}
	if e := w.w.Flush(); err == nil {
		err = e
	}
	return errors.Join(err, w.f.Close())
}
