package plugin_test

// A minimal WebAssembly binary writer for the load-time checks: modules that must be refused
// only need the right imports and exports, and a hand-built module compiles in microseconds
// where a Go-built one takes seconds (tens of seconds under -race).

const (
	tI32 = 0x7f
	tI64 = 0x7e
)

type wfunc struct {
	name            string
	params, results []byte
}

type wimport struct{ module, name string }

func uleb(v uint32) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b = append(b, c)
		if v == 0 {
			return b
		}
	}
}

func vec(items ...[]byte) []byte {
	b := uleb(uint32(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func str(s string) []byte { return append(uleb(uint32(len(s))), s...) }

func section(id byte, body []byte) []byte {
	return append(append([]byte{id}, uleb(uint32(len(body)))...), body...)
}

// wasmModule returns a module importing imports (each as a () -> () function), exporting funcs
// (each returning zeros) and, if memory, a one-page memory named "memory".
func wasmModule(imports []wimport, funcs []wfunc, memory bool) []byte {
	var types, imps, fidx, exps, codes [][]byte
	for _, im := range imports {
		imps = append(imps, append(append(str(im.module), str(im.name)...), 0x00, byte(len(types))))
		types = append(types, []byte{0x60, 0x00, 0x00})
	}
	for i, f := range funcs {
		fidx = append(fidx, uleb(uint32(len(types))))
		types = append(types, append(append([]byte{0x60}, vec(bytesOf(f.params)...)...), vec(bytesOf(f.results)...)...))
		exps = append(exps, append(str(f.name), 0x00, byte(len(imports)+i)))
		var body []byte
		for _, r := range f.results {
			if r == tI64 {
				body = append(body, 0x42, 0x00)
			} else {
				body = append(body, 0x41, 0x00)
			}
		}
		body = append([]byte{0x00}, append(body, 0x0b)...) // no locals, the constants, end
		codes = append(codes, append(uleb(uint32(len(body))), body...))
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = append(out, section(1, vec(types...))...)
	if len(imps) > 0 {
		out = append(out, section(2, vec(imps...))...)
	}
	out = append(out, section(3, vec(fidx...))...)
	if memory {
		out = append(out, section(5, vec([]byte{0x00, 0x01}))...)
		exps = append(exps, append(str("memory"), 0x02, 0x00))
	}
	out = append(out, section(7, vec(exps...))...)
	return append(out, section(10, vec(codes...))...)
}

func bytesOf(ts []byte) [][]byte {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		out[i] = []byte{t}
	}
	return out
}

// abiFuncs are ABI v1's exports with the right signatures, marker named marker.
func abiFuncs(marker string) []wfunc {
	return []wfunc{
		{name: marker},
		{name: "_initialize"},
		{name: "iris_alloc", params: []byte{tI32}, results: []byte{tI32}},
		{name: "iris_reset"},
		{name: "iris_describe", results: []byte{tI64}},
		{name: "iris_plan", params: []byte{tI32, tI32}, results: []byte{tI64}},
		{name: "iris_frame", params: []byte{tI32, tI32}, results: []byte{tI64}},
	}
}
