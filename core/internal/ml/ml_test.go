package ml

import (
	"errors"
	"math"
	"testing"
)

func TestTensorViews(t *testing.T) {
	x := Tensor{Addr: 4096, Rows: 5, Cols: 12, Stride: 12, DType: BF16}
	if r := x.RowsAt(2, 3); r.Addr != 4096+2*12*2 || r.Rows != 3 || r.Cols != 12 {
		t.Errorf("RowsAt: %+v", r)
	}
	c := x.ColsAt(4, 6)
	if c.Addr != 4096+4*2 || c.Cols != 6 || c.Stride != 12 || c.Contiguous() {
		t.Errorf("ColsAt: %+v", c)
	}
	if r := x.Reshape(15, 4); r.Rows != 15 || r.Stride != 4 {
		t.Errorf("Reshape: %+v", r)
	}
	if z := (Tensor{}).RowsAt(3, 9).ColsAt(1, 2).Reshape(4, 4); z.Valid() {
		t.Errorf("a view of the zero tensor is %+v", z)
	}
	for name, f := range map[string]func(){
		"rows past the end": func() { x.RowsAt(4, 2) },
		"columns":           func() { x.ColsAt(10, 3) },
		"reshape strided":   func() { c.Reshape(5, 6) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// poolOnly is a Backend whose Alloc hands out distinct addresses (KVPool needs nothing else).
type poolOnly struct{ Backend }

func (p *poolOnly) Alloc(rows, cols int, dt DType) (Tensor, error) {
	return Tensor{Addr: 1 << 20, Rows: rows, Cols: cols, Stride: cols, DType: dt}, nil
}

func TestKVPool(t *testing.T) {
	p, err := NewKVPool(&poolOnly{}, 2, 8, 16, 10, F32)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := p.Alloc(40) // 3 blocks
	b, _ := p.Alloc(16) // 1
	c, _ := p.Alloc(50) // 4
	if used, total := p.Use(); used != 8 || total != 10 {
		t.Fatalf("use %d/%d, want 8/10", used, total)
	}
	if a.Cap() != 48 || b.Start() != 48 || c.Start() != 64 || a.K(1).Rows != 48 {
		t.Errorf("caps/starts: %d %d %d", a.Cap(), b.Start(), c.Start())
	}
	if _, err := p.Alloc(33); !errors.Is(err, ErrKVFull) {
		t.Errorf("3 blocks with 2 free: %v", err)
	}
	// freeing a and b leaves one run of 4 blocks (coalesced), then the tail's 2
	a.Free()
	b.Free()
	b.Free() // twice is fine
	d, err := p.Alloc(64)
	if err != nil || d.Start() != 0 {
		t.Fatalf("4 blocks after coalescing: start %v, %v", d, err)
	}
	c.Free()
	d.Free()
	if used, _ := p.Use(); used != 0 {
		t.Errorf("%d blocks in use after every free", used)
	}
	if e, err := p.Alloc(160); err != nil || e.Cap() != 160 {
		t.Errorf("the whole pool after everything was freed: %v", err)
	}
	if _, err := NewKVPool(&poolOnly{}, 0, 8, 16, 10, F32); err == nil {
		t.Error("a pool of no layers was made")
	}
}

func TestWiden(t *testing.T) {
	got := make([]float32, 3)
	// bf16 1.0, -2.0, and f16 0.5, 65504, a subnormal
	if err := Widen(got, []byte{0x80, 0x3f, 0x00, 0xc0, 0x00, 0x00}, "BF16"); err != nil || got[0] != 1 || got[1] != -2 || got[2] != 0 {
		t.Errorf("bf16: %v %v", got, err)
	}
	if err := Widen(got, []byte{0x00, 0x38, 0xff, 0x7b, 0x01, 0x00}, "F16"); err != nil || got[0] != 0.5 || got[1] != 65504 || got[2] != 5.9604645e-08 {
		t.Errorf("f16: %v %v", got, err)
	}
	if err := Widen(got, []byte{1, 2}, "F32"); err == nil {
		t.Error("2 bytes for 3 f32 values accepted")
	}
	if err := Widen(got, nil, "I8"); err == nil {
		t.Error("I8 accepted")
	}
}

// TestBF16Bits pins the float32-to-bfloat16 rounding of the fixture writers (seeded.py's
// bf16_bits): to nearest, ties to even, as the CUDA backend's bf16 writes (TestKernelWriteBF16).
func TestBF16Bits(t *testing.T) {
	for _, tc := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1: exact
		{0x3f807fff, 0x3f80}, // below half way: down
		{0x3f808000, 0x3f80}, // half way, even below: down
		{0x3f818000, 0x3f82}, // half way, odd below: up
		{0x3f808001, 0x3f81}, // above half way: up
		{0xbf80c000, 0xbf81}, // negative, above half way
		{0x3f7fffff, 0x3f80}, // carries into the exponent
		{0x00000000, 0x0000},
		{0x80000000, 0x8000},
		{0x7f7fffff, 0x7f80}, // the largest float rounds to infinity
		{0xff800000, 0xff80}, // -infinity kept
		{0x7f800001, 0x7fc0}, // a signalling NaN made quiet
		{0xffc00001, 0xffc0}, // a NaN keeps its sign
	} {
		if got := BF16Bits(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("BF16Bits(%#08x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
}

func TestKeyBucket(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{0, 64}, {1, 64}, {64, 64}, {65, 128}, {200, 256}, {256, 256}, {257, 512}, {8192, 8192}, {8193, 16384}} {
		if got := KeyBucket(tc.n); got != tc.want {
			t.Errorf("KeyBucket(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestLeadingDecodeRows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spans []int32 // start, keys a row
		want  int
	}{
		{"none", nil, 0},
		{"one decode row", []int32{0, 5}, 0},
		{"decode rows only", []int32{0, 5, 8, 3, 16, 9}, 0},
		{"a prefill only", []int32{0, 1, 0, 2, 0, 3}, 0},
		{"two decodes, then a prefill", []int32{0, 5, 8, 3, 16, 1, 16, 2}, 2},
		{"a decode, a prefill, a decode", []int32{8, 3, 16, 1, 16, 2, 0, 5}, 1},
		{"a prefill, then decodes", []int32{16, 1, 16, 2, 0, 5, 8, 3}, 0},
	} {
		if got := LeadingDecodeRows(tc.spans); got != tc.want {
			t.Errorf("%s: LeadingDecodeRows(%v) = %d, want %d", tc.name, tc.spans, got, tc.want)
		}
	}
}

func TestLongestSpan(t *testing.T) {
	for _, tc := range []struct {
		spans []int32
		want  int
	}{{nil, 0}, {[]int32{0, 5}, 5}, {[]int32{0, 5, 8, 200, 16, 9}, 200}, {[]int32{16, 1, 16, 2, 16, 3}, 3}} {
		if got := LongestSpan(tc.spans); got != tc.want {
			t.Errorf("LongestSpan(%v) = %d, want %d", tc.spans, got, tc.want)
		}
	}
}

// closeCounter is a Backend whose Close counts; nothing else is called.
type closeCounter struct {
	Backend
	closed *int
}

func (c closeCounter) Close() error { *c.closed++; return nil }

func TestLanes(t *testing.T) {
	var n [3]int
	var l Lanes
	a, b, c := closeCounter{closed: &n[0]}, closeCounter{closed: &n[1]}, closeCounter{closed: &n[2]}
	l.Add(a)
	l.Add(b)
	l.Add(c)
	l.Remove(b) // closed on its own
	if got := l.List(); len(got) != 2 || got[0] != Backend(a) || got[1] != Backend(c) {
		t.Fatalf("open lanes %v, want a and c", got)
	}
	l.CloseAll()
	if n != [3]int{1, 0, 1} {
		t.Errorf("closes %v, want [1 0 1]", n)
	}
	if got := l.List(); len(got) != 0 {
		t.Errorf("%d lanes left after CloseAll", len(got))
	}
	l.CloseAll()
	if n != [3]int{1, 0, 1} {
		t.Errorf("a second CloseAll closed again: %v", n)
	}
}
