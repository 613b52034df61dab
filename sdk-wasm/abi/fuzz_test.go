package abi

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to every decoder: none may panic or allocate beyond the
// input's size, and whatever decodes must encode to bytes that decode and encode to the very
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
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range messages() {
			v := newOf(m)
			if Decode(b, v) != nil {
				continue
			}
			again, err := Encode(v)
			if err != nil {
				t.Fatalf("%T decoded but does not encode: %v", v, err)
			}
			w := newOf(m)
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
		_, _ = DecodeResponse[Plan](b)
		_, _ = DecodeResponse[Frame](b)
		_, _ = DecodeResponse[Description](b)
	})
}
