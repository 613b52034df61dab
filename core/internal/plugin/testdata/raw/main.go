// Command raw is a test module that speaks the ABI by hand, with sdk-wasm/abi's codec but
// without the SDK's exports, to send the host what the SDK never would. The request's "mode"
// param picks the answer.
package main

import (
	"unsafe"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

var pinned [][]byte

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func keep(b []byte) uint64 {
	pinned = append(pinned, b)
	return abi.Pack(addr(b), uint32(len(b)))
}

//go:wasmexport iris_abi_v1
func marker() {}

//go:wasmexport iris_alloc
func alloc(n uint32) uint32 {
	b := make([]byte, n+1)
	pinned = append(pinned, b)
	return addr(b)
}

//go:wasmexport iris_reset
func reset() { pinned = pinned[:0] }

// describe answers at wire minor 0, as a plugin built before FrameRequest.System does: the
// host must write its requests at minor 0 and never send it a system message.
//
//go:wasmexport iris_describe
func describe() uint64 {
	b, _ := abi.EncodeAt(&abi.Description{ABI: 1, Family: "raw", Tasks: []string{"vision-language-generation"},
		Params: []abi.ParamSpec{{Name: "mode", Type: abi.ParamString, Default: "ok"}}}, 0)
	return keep(append([]byte{'O'}, b...))
}

func request(ptr, n uint32) []byte {
	for _, b := range pinned {
		if addr(b) == ptr {
			return b[:n]
		}
	}
	return nil
}

func plan() abi.Plan {
	return abi.Plan{
		Source: abi.Size{Width: 64, Height: 48},
		Normalize: abi.Normalize{Rescale: 1.0 / 255, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5},
			Flavor: abi.FlavorTorchvision},
		Resize:      &abi.Resize{Width: 28, Height: 28, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision},
		Patches:     abi.Patches{Size: 14, Temporal: 2, Merge: 2, Layout: abi.LayoutMergeBlocks},
		Grid:        abi.Grid{T: 1, H: 2, W: 2},
		LLMGrid:     abi.Grid{T: 1, H: 1, W: 1},
		ImageTokens: 1,
	}
}

//go:wasmexport iris_plan
func planExport(ptr, n uint32) uint64 {
	var req abi.PlanRequest
	if err := abi.Decode(request(ptr, n), &req); err != nil {
		return keep(abi.EncodeError(abi.Failf(abi.CodeBadRequest, "%v", err)))
	}
	mode, _ := req.Params["mode"].(string)
	good, _ := abi.EncodeResult(plan())
	switch mode {
	case "ok":
		return keep(good)
	case "garbage":
		return keep([]byte("{not a message"))
	case "truncated":
		return keep(good[:len(good)-1])
	case "trailing":
		return keep(append(good, 0))
	case "wrong_kind":
		b, _ := abi.EncodeResult(abi.Frame{Before: "x"})
		return keep(b)
	case "bad_code":
		return keep(abi.EncodeError(&abi.Error{Kind: abi.Refusal, Code: "Not A Code!"}))
	case "bad_kind":
		return keep(abi.EncodeError(&abi.Error{Kind: "maybe", Code: "x"}))
	case "invalid_plan":
		p := plan()
		p.Grid = abi.Grid{T: 1, H: 100000, W: 100000}
		p.LLMGrid = abi.Grid{T: 1, H: 50000, W: 50000}
		p.ImageTokens = 50000 * 50000
		b, _ := abi.EncodeResult(p)
		return keep(b)
	case "out_of_bounds":
		return abi.Pack(0xfffffff0, 64)
	case "huge":
		return abi.Pack(addr(good), 2<<20)
	case "zero":
		return 0
	case "raw_panic":
		panic("raw guest panic")
	case "views": // ABI-2 views from a plugin that describes itself as ABI 1
		p := abi.Plan{Source: abi.Size{Width: 64, Height: 48}, ImageTokens: 1, Views: []abi.View{{
			Resize: plan().Resize, Normalize: plan().Normalize, Patches: plan().Patches, Grid: plan().Grid,
			LLMGrid: plan().LLMGrid, ImageTokens: 1}}}
		b, _ := abi.EncodeResult(p)
		return keep(b)
	}
	return keep(abi.EncodeError(abi.Refusef("unknown_mode", "mode %q", mode)))
}

// frame reports the minor version of the request it got in Before; in mode "spans" it answers
// with ABI-2 spans, which this ABI-1 plugin may not.
//
//go:wasmexport iris_frame
func frame(ptr, n uint32) uint64 {
	in := request(ptr, n)
	var req abi.FrameRequest
	if err := abi.Decode(in, &req); err != nil {
		return keep(abi.EncodeError(abi.Failf(abi.CodeBadRequest, "%v", err)))
	}
	f := abi.Frame{Before: "minor " + string(rune('0'+in[1])),
		Span: abi.ImageSpan{Pad: "<p>", Count: req.Plan.ImageTokens}, StopTokenIDs: []int32{1}}
	if req.Params["mode"] == "spans" {
		f.Spans, f.Span = []abi.ImageSpan{f.Span}, abi.ImageSpan{}
	}
	b, _ := abi.EncodeResult(f)
	return keep(b)
}

func main() {}
