//go:build cuda

package gpu

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestCompatSymbols fails if the driver stops exporting a symbol cudacompat/cuda.h binds.
func TestCompatSymbols(t *testing.T) {
	missing, err := MissingCompatSymbols()
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("libcuda.so.1 lacks %v: cudacompat/cuda.h must be updated", missing)
	}
}

func openDevice(t *testing.T) *Device {
	t.Helper()
	d, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// saxpyPTX is y[i] = a*x[i] + y[i] over n floats, written by hand so that this package's test
// needs no build step.
const saxpyPTX = `
.version 8.0
.target sm_90
.address_size 64
.visible .entry saxpy(.param .u64 py, .param .u64 px, .param .f32 pa, .param .u32 pn)
{
	.reg .pred %p;
	.reg .b32 %r<6>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd1, [py];
	ld.param.u64 %rd2, [px];
	ld.param.f32 %f1, [pa];
	ld.param.u32 %r1, [pn];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ge.u32 %p, %r5, %r1;
	@%p bra DONE;
	mul.wide.u32 %rd3, %r5, 4;
	add.s64 %rd4, %rd1, %rd3;
	add.s64 %rd5, %rd2, %rd3;
	ld.global.f32 %f2, [%rd5];
	ld.global.f32 %f3, [%rd4];
	fma.rn.f32 %f3, %f1, %f2, %f3;
	st.global.f32 [%rd4], %f3;
DONE:
	ret;
}
`

// TestLaunchAndGraph loads a PTX module, launches a kernel directly and through a captured graph
// (with pinned-memory copies inside it), and checks every element.
func TestLaunchAndGraph(t *testing.T) {
	d := openDevice(t)
	t.Logf("device %+v", d.Info())
	const n = 1 << 20
	err := d.Do(func() error {
		m, err := LoadModule([]byte(saxpyPTX))
		if err != nil {
			return err
		}
		defer func() { _ = m.Unload() }()
		f, err := m.Function("saxpy")
		if err != nil {
			return err
		}
		s, err := NewStream()
		if err != nil {
			return err
		}
		defer func() { _ = s.Destroy() }()
		x, err := Alloc(4 * n)
		if err != nil {
			return err
		}
		defer func() { _ = x.Free() }()
		y, err := Alloc(4 * n)
		if err != nil {
			return err
		}
		defer func() { _ = y.Free() }()
		host, err := AllocHost(4 * n)
		if err != nil {
			return err
		}
		defer func() { _ = host.Free() }()
		h := host.Float32s()
		for i := range h {
			h[i] = float32(i % 1000)
		}
		if err := s.CopyHtoD(x.Ptr, host.Ptr(), 4*n); err != nil {
			return err
		}
		if err := s.Memset32(y.Ptr, math.Float32bits(1), n); err != nil {
			return err
		}
		args := []Arg{P(y.Ptr), P(x.Ptr), F(2), I(n)}
		if err := f.Launch(Dim3{X: n / 256}, Dim3{X: 256}, 0, s, args...); err != nil {
			return err
		}
		// the same step captured, with the copy back inside the graph
		if err := s.BeginCapture(); err != nil {
			return err
		}
		if err := f.Launch(Dim3{X: n / 256}, Dim3{X: 256}, 0, s, args...); err != nil {
			return err
		}
		if err := s.CopyDtoH(host.Ptr(), y.Ptr, 4*n); err != nil {
			return err
		}
		g, err := s.EndCapture()
		if err != nil {
			return err
		}
		defer func() { _ = g.Destroy() }()
		for i := range h {
			h[i] = -1
		}
		if err := g.Launch(s); err != nil {
			return err
		}
		if err := s.Sync(); err != nil {
			return err
		}
		for i, v := range h {
			if want := 1 + 4*float32(i%1000); v != want {
				t.Errorf("y[%d] = %v, want %v", i, v, want)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCompatHeaderPresent keeps the compat header where just/gpu.just puts it on the path.
func TestCompatHeaderPresent(t *testing.T) {
	if _, err := os.Stat(filepath.Join("cudacompat", "cuda.h")); err != nil {
		t.Fatal(err)
	}
}
