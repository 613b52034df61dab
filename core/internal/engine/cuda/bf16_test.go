package cuda

import (
	"math"
	"testing"
)

func TestToBF16(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{0, 0},
		{float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // halfway, even below: down
		{math.Float32frombits(0x3f818000), 0x3f82}, // halfway, odd below: up
		{math.Float32frombits(0x3f808001), 0x3f81}, // past halfway: up
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // the largest float rounds to infinity
		{float32(math.NaN()), 0x7fc0},
	} {
		if got := toBF16(tc.in); got != tc.want {
			t.Errorf("toBF16(%#x) = %#x, want %#x", math.Float32bits(tc.in), got, tc.want)
		}
	}
}
