package cuda

import "math"

// toBF16 rounds v to bf16 on the host (round to nearest even, NaN kept quiet), as
// __float2bfloat16_rn does on the device.
func toBF16(v float32) uint16 {
	b := math.Float32bits(v)
	if v != v {
		return 0x7fc0
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
