package ml

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

// Checkpoint is the safetensors shards of a Hugging Face checkpoint directory, mapped read-only:
// a backend may use a tensor's bytes in place for as long as the Checkpoint is open.
type Checkpoint struct {
	tensors map[string]ckTensor
	maps    [][]byte
	// joined holds the tensors Loader.Matrices joined (or the Permuted binds reordered) in host
	// memory, which a backend may use in place: they live as long as the shards' maps
	joined [][]byte
}

type ckTensor struct {
	SafetensorsEntry
	data []byte
}

// OpenCheckpoint maps every shard of dir and indexes its tensors by name.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	files, err := Shards(dir)
	if err != nil {
		return nil, err
	}
	ck := &Checkpoint{tensors: map[string]ckTensor{}}
	for _, path := range files {
		entries, err := ReadSafetensorsHeader(path)
		if err != nil {
			ck.Close()
			return nil, err
		}
		data, err := mapFile(path)
		if err != nil {
			ck.Close()
			return nil, err
		}
		ck.maps = append(ck.maps, data)
		for _, e := range entries {
			ck.tensors[e.Name] = ckTensor{SafetensorsEntry: e, data: data[e.Offset : e.Offset+e.Size]}
		}
	}
	return ck, nil
}

func mapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 || st.Size() > math.MaxInt {
		return nil, fmt.Errorf("%s: size %d cannot be mapped", path, st.Size())
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	return data, nil
}

// Has reports whether the checkpoint holds name.
func (c *Checkpoint) Has(name string) bool { _, ok := c.tensors[name]; return ok }

// Close unmaps the shards and drops the joined tensors; tensors used in place must not be used
// after it.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, m := range c.maps {
		errs = append(errs, syscall.Munmap(m))
	}
	c.maps, c.joined = nil, nil
	return errors.Join(errs...)
}

// Loader binds a family's weights by name: it finds each tensor under the given prefixes (a
// checkpoint's layouts differ between the hub and transformers 5), checks its shape and loads it
// on the backend. The first failure sticks; Err reports it, naming the tensor.
type Loader struct {
	b   Backend
	ck  *Checkpoint
	err error
	// Bytes counts the checkpoint bytes bound.
	Bytes int64
}

// NewLoader binds from ck to b.
func NewLoader(b Backend, ck *Checkpoint) *Loader { return &Loader{b: b, ck: ck} }

// Err is the first failure.
func (l *Loader) Err() error { return l.err }

// Has reports whether the checkpoint holds name under one of the prefixes (a family telling
// two layouts of its checkpoints apart).
func (l *Loader) Has(prefixes []string, name string) bool {
	_, _, ok := l.find(prefixes, name)
	return ok
}

func (l *Loader) find(prefixes []string, name string) (ckTensor, string, bool) {
	for _, p := range prefixes {
		if t, ok := l.ck.tensors[p+name]; ok {
			return t, p + name, true
		}
	}
	return ckTensor{}, prefixes[0] + name, false
}

func (l *Loader) load(prefixes []string, name string, rows, cols int, dt func(stored DType) DType, matrix bool, perm []int) Tensor {
	if l.err != nil {
		return Tensor{}
	}
	t, full, ok := l.find(prefixes, name)
	if !ok {
		l.err = fmt.Errorf("missing tensor %s", full)
		return Tensor{}
	}
	var stored DType
	switch t.Dtype {
	case "F32":
		stored = F32
	case "BF16", "F16":
		stored = BF16
	default:
		l.err = fmt.Errorf("tensor %s: dtype %s (want F32, BF16 or F16)", full, t.Dtype)
		return Tensor{}
	}
	var shapeOK bool
	if matrix { // trailing dimensions flatten into cols (a Conv3d kernel), or leading ones into rows; leading ones of size 1
		// may go (a [1, 1025, hidden] position table, a [1, 1, hidden] CLS token)
		shape := t.Shape
		for len(shape) > 2 && shape[0] == 1 && shape[0] != int64(rows) {
			shape = shape[1:]
		}
		shapeOK = len(shape) >= 2 && shape[0] == int64(rows) && t.Numel() == int64(rows)*int64(cols)
		// or leading dimensions flatten into rows (a [64, 64, hidden] position table)
		if n := len(shape); !shapeOK && n > 2 && shape[n-1] == int64(cols) && t.Numel() == int64(rows)*int64(cols) {
			shapeOK = true
		}
	} else {
		shapeOK = len(t.Shape) == 1 && t.Shape[0] == int64(cols)
	}
	if !shapeOK {
		l.err = fmt.Errorf("tensor %s: shape %v, want %dx%d", full, t.Shape, rows, cols)
		return Tensor{}
	}
	if t.Dtype == "F16" {
		stored = F32 // widened
	}
	data := t.data
	if perm != nil {
		var err error
		if data, err = permute(t.data, perm, rows, cols, matrix); err != nil {
			l.err = fmt.Errorf("tensor %s: %w", full, err)
			return Tensor{}
		}
		// kept with the checkpoint: a backend may use the bytes in place, as a mapped file's
		l.ck.joined = append(l.ck.joined, data)
	}
	out, err := l.b.Load(data, t.Dtype, rows, cols, dt(stored))
	if err != nil {
		l.err = fmt.Errorf("loading tensor %s: %w", full, err)
		return Tensor{}
	}
	l.Bytes += t.Size
	return out
}

// Matrix binds a rows x cols weight (out x in features), kept in the type the backend computes
// products with (MatrixType).
func (l *Loader) Matrix(prefixes []string, name string, rows, cols int) Tensor {
	return l.load(prefixes, name, rows, cols, l.b.MatrixType, true, nil)
}

// PermutedMatrix binds a rows x cols weight as Matrix does with its rows reordered: row i is the
// stored row perm[i] (len(perm) == rows). A head-dim permutation of q and k's outputs, applied
// alike to both, leaves every attention score as it was: an interleaved rotary embedding (pairs of
// adjacent dimensions) then runs as the half-split one.
func (l *Loader) PermutedMatrix(prefixes []string, name string, rows, cols int, perm []int) Tensor {
	return l.load(prefixes, name, rows, cols, l.b.MatrixType, true, perm)
}

// PermutedVector binds an n-value weight as Vector does with its values reordered: value i is
// the stored value perm[i] (a bias of the outputs PermutedMatrix reorders).
func (l *Loader) PermutedVector(prefixes []string, name string, n int, perm []int) Tensor {
	return l.load(prefixes, name, 1, n, func(DType) DType { return l.b.DType() }, false, perm)
}

// permute returns a copy of a rows x cols tensor's bytes with its rows (a matrix) or values (a
// vector) in the order perm gives.
func permute(data []byte, perm []int, rows, cols int, matrix bool) ([]byte, error) {
	units := cols
	if matrix {
		units = rows
	}
	if len(perm) != units || len(data)%units != 0 {
		return nil, fmt.Errorf("a permutation of %d for %d units of %d bytes", len(perm), units, len(data))
	}
	size := len(data) / units
	seen := make([]bool, units)
	out := make([]byte, len(data))
	for i, src := range perm {
		if src < 0 || src >= units || seen[src] {
			return nil, fmt.Errorf("permutation %v is not one of %d units", perm, units)
		}
		seen[src] = true
		copy(out[i*size:(i+1)*size], data[src*size:(src+1)*size])
	}
	return out, nil
}

// MatrixF32 binds a rows x cols weight kept in F32 whatever type the backend computes products
// with: a weight the reference multiplies in F32 (a mixture of experts' router, whose logits
// transformers computes from hidden_states.float() and weight.float()).
func (l *Loader) MatrixF32(prefixes []string, name string, rows, cols int) Tensor {
	return l.load(prefixes, name, rows, cols, func(DType) DType { return F32 }, true, nil)
}

// Matrices binds several 2-D rows x cols weights as one tensor, returning a view of each one's rows
// in order (len(names) tensors, zero ones after a failure): weights that run as one product (a
// gated MLP's gate and up) are then adjacent wherever the backend places tensors. A pair that a
// device chunk's end split ran as two products, the second writing its output at an offset that
// is not 16-byte aligned (docs/gpu.md). The tensors must share the checkpoint's dtype; their
// bytes are joined in host memory first (kept only where the backend uses them in place).
func (l *Loader) Matrices(prefixes, names []string, rows, cols int) []Tensor {
	out := make([]Tensor, len(names))
	if l.err != nil || len(names) == 0 {
		return out
	}
	var joined []byte
	var dtype, first string
	var size int64
	for i, name := range names {
		t, full, ok := l.find(prefixes, name)
		switch {
		case !ok:
			l.err = fmt.Errorf("missing tensor %s", full)
		case i > 0 && t.Dtype != dtype:
			l.err = fmt.Errorf("tensor %s: dtype %s, bound with %s ones", full, t.Dtype, dtype)
		case len(t.Shape) != 2 || t.Shape[0] != int64(rows) || t.Shape[1] != int64(cols):
			l.err = fmt.Errorf("tensor %s: shape %v, want %dx%d", full, t.Shape, rows, cols)
		}
		if l.err != nil {
			return out
		}
		if i == 0 {
			dtype, first = t.Dtype, full
			joined = make([]byte, 0, int64(len(names))*int64(len(t.data)))
		}
		joined = append(joined, t.data...)
		size += t.Size
	}
	stored := BF16
	switch dtype {
	case "F32", "F16":
		stored = F32 // F16 widened
	case "BF16":
	default:
		l.err = fmt.Errorf("tensor %s: dtype %s (want F32, BF16 or F16)", first, dtype)
		return out
	}
	all, err := l.b.Load(joined, dtype, len(names)*rows, cols, l.b.MatrixType(stored))
	if err != nil {
		l.err = fmt.Errorf("loading tensors %s: %w", strings.Join(names, ", "), err)
		return out
	}
	if base := uintptr(unsafe.Pointer(&joined[0])); all.Addr >= base && all.Addr < base+uintptr(len(joined)) {
		l.ck.joined = append(l.ck.joined, joined) // used in place: kept as long as the maps
	}
	for i := range out {
		out[i] = all.RowsAt(i*rows, rows)
	}
	l.Bytes += size
	return out
}

// ConvTaps binds a Conv2d weight [out, in, kh, kw] as the out x kh·kw·in matrix of an im2col
// product whose input row holds, tap after tap ((ky, kx) in raster order), that tap's in-channel
// vector: column (ky·kw + kx)·in + c is the checkpoint's [o, c, ky, kx]. A convolution is then a
// Gather of kh·kw rows a output position (viewed as one row) and one product, with no host work
// a pass. The tensor's bytes are reordered in host memory (kept where the backend uses them in
// place), whatever its dtype.
func (l *Loader) ConvTaps(prefixes []string, name string, out, in, kh, kw int) Tensor {
	if l.err != nil {
		return Tensor{}
	}
	t, full, ok := l.find(prefixes, name)
	if !ok {
		l.err = fmt.Errorf("missing tensor %s", full)
		return Tensor{}
	}
	if len(t.Shape) != 4 || t.Shape[0] != int64(out) || t.Shape[1] != int64(in) || t.Shape[2] != int64(kh) || t.Shape[3] != int64(kw) {
		l.err = fmt.Errorf("tensor %s: shape %v, want [%d %d %d %d]", full, t.Shape, out, in, kh, kw)
		return Tensor{}
	}
	stored := BF16
	switch t.Dtype {
	case "F32", "F16":
		stored = F32 // F16 widened
	case "BF16":
	default:
		l.err = fmt.Errorf("tensor %s: dtype %s (want F32, BF16 or F16)", full, t.Dtype)
		return Tensor{}
	}
	es := len(t.data) / (out * in * kh * kw)
	taps := kh * kw
	perm := make([]byte, len(t.data))
	for o := range out {
		for c := range in {
			for k := range taps {
				src := ((o*in+c)*taps + k) * es
				dst := ((o*taps+k)*in + c) * es
				copy(perm[dst:dst+es], t.data[src:src+es])
			}
		}
	}
	w, err := l.b.Load(perm, t.Dtype, out, taps*in, l.b.MatrixType(stored))
	if err != nil {
		l.err = fmt.Errorf("loading tensor %s: %w", full, err)
		return Tensor{}
	}
	if base := uintptr(unsafe.Pointer(&perm[0])); w.Addr >= base && w.Addr < base+uintptr(len(perm)) {
		l.ck.joined = append(l.ck.joined, perm) // used in place: kept as long as the maps
	}
	l.Bytes += t.Size
	return w
}

// Rows binds a rows x cols weight that ops copy rows of (Gather: a token to place) rather than
// multiply by, in the backend's activation type (a backend may keep matrices in another).
func (l *Loader) Rows(prefixes []string, name string, rows, cols int) Tensor {
	return l.load(prefixes, name, rows, cols, func(DType) DType { return l.b.DType() }, true, nil)
}

// Vector binds an n-value weight (a norm's scale, a bias) as a 1 x n tensor of the backend's
// activation type.
func (l *Loader) Vector(prefixes []string, name string, n int) Tensor {
	return l.load(prefixes, name, 1, n, func(DType) DType { return l.b.DType() }, false, nil)
}
