package ml

import "math"

// Argmax returns the index of the largest logit, the first one on ties (as torch.argmax). NaNs
// are never picked; with no other value it returns 0.
//
// It runs once per generated token over the whole vocabulary (150k logits and more): the
// largest value is found first over eight independent running maxima, then its first index:
// 1.5-3x faster than one compare-and-branch chain (BenchmarkArgmax).
func Argmax(logits []float32) int32 {
	n := len(logits)
	ninf := float32(math.Inf(-1))
	m := [8]float32{ninf, ninf, ninf, ninf, ninf, ninf, ninf, ninf}
	i := 0
	for ; i+8 <= n; i += 8 {
		c := logits[i : i+8 : i+8]
		if c[0] > m[0] {
			m[0] = c[0]
		}
		if c[1] > m[1] {
			m[1] = c[1]
		}
		if c[2] > m[2] {
			m[2] = c[2]
		}
		if c[3] > m[3] {
			m[3] = c[3]
		}
		if c[4] > m[4] {
			m[4] = c[4]
		}
		if c[5] > m[5] {
			m[5] = c[5]
		}
		if c[6] > m[6] {
			m[6] = c[6]
		}
		if c[7] > m[7] {
			m[7] = c[7]
		}
	}
	best := ninf
	for _, v := range m {
		if v > best {
			best = v
		}
	}
	for _, v := range logits[i:] {
		if v > best {
			best = v
		}
	}
	for j, v := range logits {
		if v == best {
			return int32(j)
		}
	}
	return 0
}
