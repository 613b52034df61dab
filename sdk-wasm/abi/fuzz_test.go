package abi

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
)

// Every count the decoder reads is at most the bytes left (reader.uint), so what one decode
// allocates grows with the input, never with what the input claims. The most allocated per
// input byte is a params map sized for a claimed count (a 16-byte key and a 16-byte value a
// slot, in a table of up to 2.3 slots an entry: some 80 bytes a byte) or Description.Params (a
// 64-byte ParamSpec a byte); decodeAllocPerByte bounds both. Views and spans are capped at 64
// each whatever the input (some 20 KiB together); decodeAllocFixed adds that and the error
// values.
const (
	decodeAllocPerByte = 128
	decodeAllocFixed   = 64 << 10
)

// decodeAllocBound is the most a decode of b may allocate, in bytes.
func decodeAllocBound(b []byte) uint64 { return decodeAllocPerByte*uint64(len(b)) + decodeAllocFixed }

// decoders decode b as each message type and response; each returns the message when it decoded.
var decoders = []func(b []byte) any{
	decodeAs[PlanRequest], decodeAs[Plan], decodeAs[FrameRequest], decodeAs[Frame], decodeAs[Description],
	func(b []byte) any { _, _ = DecodeResponse[Plan](b); return nil },
	func(b []byte) any { _, _ = DecodeResponse[Frame](b); return nil },
	func(b []byte) any { _, _ = DecodeResponse[Description](b); return nil },
}

func decodeAs[T any](b []byte) any {
	v := new(T)
	if Decode(b, v) != nil {
		return nil
	}
	return v
}

// decodeAll decodes b with every decoder and returns the messages that decoded and the bytes
// the decoders allocated together (runtime.MemStats.TotalAlloc, exact: ReadMemStats stops the
// world). One decode's bound holds for them all: a message's first byte names its kind, so at
// most one decoder reads past it (Decode of that kind, or the three DecodeResponse of an 'O'
// response, of which the second byte lets one through); the others allocate an error each, far
// less than decodeAllocFixed.
func decodeAll(b []byte) (decoded []any, allocated uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, dec := range decoders {
		if v := dec(b); v != nil {
			decoded = append(decoded, v)
		}
	}
	runtime.ReadMemStats(&after)
	return decoded, after.TotalAlloc - before.TotalAlloc
}

// FuzzDecode feeds arbitrary bytes to every decoder: none may panic or allocate more than
// decodeAllocBound, and whatever decodes must encode to bytes that decode and encode to the very
// same bytes (the codec has one reading of every message it accepts; bytes, not values, are
// compared so that NaNs compare equal).
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 60s ./abi
func FuzzDecode(f *testing.F) {
	for _, m := range messages() {
		b, _ := Encode(m)
		f.Add(b)
		r, _ := EncodeResult(samplePlan())
		f.Add(r)
	}
	f.Add(EncodeError(Refusef(CodeImageTooSmall, "small")))
	for _, b := range hostileCounts() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		decoded, allocated := decodeAll(b)
		if bound := decodeAllocBound(b); allocated > bound {
			t.Fatalf("decoding %d bytes allocated %d bytes, over the bound of %d", len(b), allocated, bound)
		}
		for _, v := range decoded {
			again, err := Encode(v)
			if err != nil {
				t.Fatalf("%T decoded but does not encode: %v", v, err)
			}
			w := newOf(v)
			if err := Decode(again, w); err != nil {
				t.Fatalf("%T: re-decoding: %v", v, err)
			}
			if third, _ := Encode(w); !bytes.Equal(third, again) {
				t.Fatalf("%T: %x re-encodes as %x", v, again, third)
			}
			if p, ok := v.(*Plan); ok {
				_ = p.Validate(p.Source)
			}
		}
	})
}

// hostileCounts are messages whose counts claim as many items as the bytes left allow (the
// decoders' worst case per input byte), and more: twice, 64 times and 2^40 times as many, which
// the decoders must refuse before allocating.
func hostileCounts() [][]byte {
	const n = 4096
	head := func(kind byte) []byte { return []byte{kind, Minor} }
	var out [][]byte
	for _, claim := range []uint64{n, 2 * n, 64 * n, 1 << 40} {
		// a description's params
		d := binary.AppendVarint(head(kindDescription), 2)
		d = append(d, 0, 0) // family "", no tasks
		d = binary.AppendUvarint(d, claim)
		out = append(out, append(d, make([]byte, n)...))
		// a plan request's params: a map sized for the claim
		pr := binary.AppendVarint(head(kindPlanRequest), 1)
		pr = binary.AppendVarint(pr, 1)
		pr = append(pr, 0, 0) // format "", no alpha
		pr = binary.AppendUvarint(pr, claim)
		out = append(out, append(pr, make([]byte, n)...))
		// a frame's open tokens
		fr := append(head(kindFrame), 0) // before ""
		fr = binary.AppendUvarint(fr, claim)
		out = append(out, append(fr, make([]byte, n)...))
		// a frame's stop ids
		fs := append(head(kindFrame), 0, 0, 0, 0, 0, 0) // before, span (no opens, pad "", count 0, no closes), after
		fs = binary.AppendUvarint(fs, claim)
		out = append(out, append(fs, make([]byte, n)...))
	}
	return out
}

// TestDecodeAllocBound holds the decoders to decodeAllocBound on the seeds and the hostile
// counts, and shows that the measure sees the allocations the bound is about.
func TestDecodeAllocBound(t *testing.T) {
	worst := 0.0
	for i, b := range hostileCounts() {
		_, allocated := decodeAll(b)
		if bound := decodeAllocBound(b); allocated > bound {
			t.Errorf("hostile message %d: decoding %d bytes allocated %d bytes, over the bound of %d", i, len(b), allocated, bound)
		}
		worst = max(worst, float64(allocated)/float64(len(b)))
	}
	for _, m := range messages() {
		b, _ := Encode(m)
		if _, allocated := decodeAll(b); allocated > decodeAllocBound(b) {
			t.Errorf("%T: decoding %d bytes allocated %d bytes, over the bound", m, len(b), allocated)
		}
	}
	// A params map sized for the claimed count takes more than 32 bytes a claimed param: a
	// measure that missed allocations would see less.
	if worst < 32 {
		t.Errorf("the worst hostile message allocated %.1f bytes per input byte: the measure misses allocations", worst)
	}
	t.Logf("worst hostile message: %.1f bytes allocated per input byte (bound %d)", worst, decodeAllocPerByte)
}
