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
