package cpu_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
)

// stTensor is one tensor of a safetensors file written by writeSafetensors.
type stTensor struct {
	name, dtype string
	shape       []int64
	values      []float32 // stored as dtype (F32 or BF16, truncated)
}

// writeSafetensors writes dir/model.safetensors: the header (its length, then JSON), then each
// tensor's bytes in order.
func writeSafetensors(t *testing.T, dir string, ts []stTensor) {
	t.Helper()
	header := map[string]any{}
	var data []byte
	for _, x := range ts {
		start := len(data)
		for _, v := range x.values {
			bits := math.Float32bits(v)
			if x.dtype == "BF16" {
				data = binary.LittleEndian.AppendUint16(data, uint16(bits>>16))
			} else {
				data = binary.LittleEndian.AppendUint32(data, bits)
			}
		}
		header[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{start, len(data)}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	file = append(append(file, h...), data...)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), file, 0o644); err != nil {
		t.Fatal(err)
	}
}

func seq(n int, from float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = from + float32(i)
	}
	return v
}

// TestLoaderMatrices checks that Matrices binds its weights as one tensor whose row views hold
// each weight's values (used in place by the CPU backend: the joined bytes must outlive the
// loader), and refuses what Matrix refuses, naming the tensor.
func TestLoaderMatrices(t *testing.T) {
	dir := t.TempDir()
	writeSafetensors(t, dir, []stTensor{
		{"m.gate.weight", "F32", []int64{3, 4}, seq(12, 0)},
		{"m.gate.bias", "F32", []int64{3}, seq(3, 100)}, // between the pair, as in a checkpoint
		{"m.up.weight", "F32", []int64{3, 4}, seq(12, 50)},
		{"m.short.weight", "F32", []int64{2, 4}, seq(8, 0)},
		{"m.half.weight", "BF16", []int64{3, 4}, seq(12, 0)},
	})
	b, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ck, err := ml.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()

	ld := ml.NewLoader(b, ck)
	gu := ld.Matrices([]string{"m."}, []string{"gate.weight", "up.weight"}, 3, 4)
	if err := ld.Err(); err != nil {
		t.Fatal(err)
	}
	runtime.GC() // the joined bytes stay reachable through ck
	if len(gu) != 2 {
		t.Fatalf("%d tensors, want 2", len(gu))
	}
	if end := gu[0].Addr + uintptr(gu[0].Rows*gu[0].Stride)*uintptr(gu[0].DType.Size()); gu[1].Addr != end {
		t.Errorf("up at %#x, want right after gate (%#x)", gu[1].Addr, end)
	}
	for i, want := range [][]float32{seq(12, 0), seq(12, 50)} {
		got := make([]float32, 12)
		b.Read(got, gu[i])
		if !slices.Equal(got, want) {
			t.Errorf("tensor %d: %v, want %v", i, got, want)
		}
	}
	if ld.Bytes != 2*12*4 {
		t.Errorf("Bytes %d, want %d", ld.Bytes, 2*12*4)
	}

	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"gate.weight", "missing.weight"}, "missing tensor m.missing.weight"},
		{[]string{"gate.weight", "short.weight"}, "tensor m.short.weight: shape [2 4], want 3x4"},
		{[]string{"gate.weight", "half.weight"}, "tensor m.half.weight: dtype BF16, bound with F32 ones"},
	} {
		ld := ml.NewLoader(b, ck)
		got := ld.Matrices([]string{"m."}, tc.names, 3, 4)
		if err := ld.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.names, err, tc.want)
		}
		if len(got) != len(tc.names) || got[0].Valid() {
			t.Errorf("%v: %d tensors (first valid %v), want %d zero ones", tc.names, len(got), got[0].Valid(), len(tc.names))
		}
		// the first failure sticks
		if again := ld.Matrices([]string{"m."}, []string{"gate.weight", "up.weight"}, 3, 4); again[0].Valid() {
			t.Errorf("%v: a later Matrices bound after a failure", tc.names)
		}
	}
}

// TestLoaderPermuted: PermutedMatrix reorders a weight's rows and PermutedVector a vector's
// values (row i is the stored row perm[i]); a tensor whose leading dimensions
// make the rows ([2, 3, 4] as 6x4, a position table) binds as a matrix; a permutation of the
// wrong length or with a repeat is refused.
func TestLoaderPermuted(t *testing.T) {
	dir := t.TempDir()
	writeSafetensors(t, dir, []stTensor{
		{"m.w", "F32", []int64{3, 2}, seq(6, 0)},
		{"m.b", "F32", []int64{4}, seq(4, 20)},
		{"m.table", "F32", []int64{2, 3, 4}, seq(24, 0)},
	})
	b, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ck, err := ml.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	ld := ml.NewLoader(b, ck)
	p := []string{"m."}
	w := ld.PermutedMatrix(p, "w", 3, 2, []int{2, 0, 1})
	v := ld.PermutedVector(p, "b", 4, []int{3, 1, 2, 0})
	table := ld.Matrix(p, "table", 6, 4)
	if err := ld.Err(); err != nil {
		t.Fatal(err)
	}
	runtime.GC() // the permuted bytes stay reachable through ck
	for _, tc := range []struct {
		x    ml.Tensor
		want []float32
	}{
		{w, []float32{4, 5, 0, 1, 2, 3}},
		{v, []float32{23, 21, 22, 20}},
		{table, seq(24, 0)},
	} {
		got := make([]float32, len(tc.want))
		b.Read(got, tc.x)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v, want %v", got, tc.want)
		}
	}
	for _, perm := range [][]int{{0, 1}, {0, 0, 1}, {0, 1, 3}} {
		ld := ml.NewLoader(b, ck)
		if ld.PermutedMatrix(p, "w", 3, 2, perm); ld.Err() == nil || !strings.Contains(ld.Err().Error(), "tensor m.w: ") {
			t.Errorf("permutation %v: %v", perm, ld.Err())
		}
	}
}
