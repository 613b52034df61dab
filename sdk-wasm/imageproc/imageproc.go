// Package imageproc holds the arithmetic helpers family plugins need to reproduce Python
// reference processors exactly: Python's rounding, flooring and ceiling on float64, and a few
// geometry helpers. It is pure math: no pixels, no allocation.
//
// Python semantics to keep in mind when porting (families.md §0.3-4): round() is banker's
// rounding, int() truncates toward zero, math.floor/ceil work on float64, a/b on ints is a
// float64 division. Keep float64 and the reference's operation order; these helpers do the rest.
package imageproc

import "math"

// Round is Python 3's round(x) for a float: the nearest integer, ties to even
// (round(2.5) == 2, round(3.5) == 4). Go's math.Round rounds ties away from zero instead.
func Round(x float64) int { return int(math.RoundToEven(x)) }

// Floor is Python's math.floor(x) for a float.
func Floor(x float64) int { return int(math.Floor(x)) }

// Ceil is Python's math.ceil(x) for a float.
func Ceil(x float64) int { return int(math.Ceil(x)) }

// Div is Python's true division a / b of two ints: a float64 quotient, correctly rounded for
// operands below 2^53 as CPython's int/int is.
func Div(a, b int) float64 { return float64(a) / float64(b) }

// FloorDiv is Python's a // b for ints: rounds toward negative infinity (Go's / truncates).
func FloorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// AspectRatio is max(h, w) / min(h, w) as a float64, the way the Qwen and InternVL processors
// compute it. Both sides must be positive.
func AspectRatio(w, h int) float64 { return Div(max(w, h), min(w, h)) }
