package ml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Widen decodes little-endian F32, BF16 or F16 bytes (safetensors' dtype names) into dst.
func Widen(dst []float32, src []byte, from string) error {
	var width int
	switch from {
	case "F32":
		width = 4
	case "BF16", "F16":
		width = 2
	default:
		return fmt.Errorf("dtype %s: want F32, BF16 or F16", from)
	}
	if len(src) != len(dst)*width {
		return fmt.Errorf("%d bytes of %s for %d values", len(src), from, len(dst))
	}
	for i := range dst {
		switch from {
		case "F32":
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		case "BF16":
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		default:
			dst[i] = f16(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
	return nil
}

// BF16Bits is the bfloat16 nearest x, ties to even, as its bit pattern (what a bf16 backend
// stores of x: __float2bfloat16_rn on the GPU), infinities kept and NaN made quiet.
func BF16Bits(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // NaN: keep the sign, set the quiet bit
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// f16 widens an IEEE half.
func f16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp, man := uint32(h>>10)&0x1f, uint32(h&0x3ff)
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: renormalise
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}
