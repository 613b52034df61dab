package aiperf

import (
	"math"
	"slices"
)

// Quantiles are the percentiles every record metric reports, in AIPerf's order.
var Quantiles = [9]float64{1, 5, 10, 25, 50, 75, 90, 95, 99}

// Stats summarises one metric's samples the way AIPerf's metric_result_from_array does.
type Stats struct {
	Count         int
	Sum, Avg      float64
	Min, Max, Std float64
	// P holds the percentiles of Quantiles, in order.
	P [9]float64
	// NoStd is set for error-adjusted bands, whose std is undefined.
	NoStd bool
}

// Percentile returns the q-th percentile (0-100) of sorted samples by linear interpolation
// between closest ranks, numpy's default: idx = q/100*(n-1).
func Percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	idx := q / 100 * float64(n-1)
	lo := int(idx)
	hi := min(lo+1, n-1)
	frac := idx - float64(lo)
	return sorted[lo] + frac*(sorted[hi]-sorted[lo])
}

// Summarize computes count, sum, avg, min, max, population std (ddof 0) and the nine
// percentiles of xs. It reports false for no samples. xs is not modified.
//
// Like AIPerf, the sum is a running sum in arrival order (column_store.numeric_sum) and the std
// is numpy's over the sorted samples; list metrics (inter_chunk_latency) use [SummarizeList].
func Summarize(xs []float64) (Stats, bool) {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return summarize(xs, sum)
}

// SummarizeList is [Summarize] for pooled list metrics, whose sum AIPerf takes with np.sum over
// the samples in arrival order.
func SummarizeList(xs []float64) (Stats, bool) { return summarize(xs, pairwiseSum(xs)) }

func summarize(xs []float64, sum float64) (Stats, bool) {
	n := len(xs)
	if n == 0 {
		return Stats{}, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	st := Stats{Count: n, Sum: sum, Avg: sum / float64(n), Min: s[0], Max: s[n-1]}
	for i, q := range Quantiles {
		st.P[i] = Percentile(s, q)
	}
	st.Std = populationStd(s)
	return st, true
}

// Adjusted is AIPerf's error-adjusted band (issue #688): the successful samples plus one +Inf per
// failed request, with nearest-rank percentiles (numpy method="nearest", ties to even) and no
// std. Infinite fields are written as null.
func Adjusted(xs []float64, failed int) (Stats, bool) {
	if failed <= 0 {
		return Stats{}, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	for range failed {
		s = append(s, math.Inf(1))
	}
	n := len(s)
	sum := pairwiseSum(s) // np.sum(inflated), over the sorted samples
	st := Stats{Count: n, Sum: sum, Avg: pairwiseSum(s) / float64(n), Min: s[0], Max: s[n-1], NoStd: true}
	for i, q := range Quantiles {
		idx := math.RoundToEven(q / 100 * float64(n-1))
		st.P[i] = s[int(idx)]
	}
	return st, true
}

// populationStd follows numpy.std: the square root of the mean of squared deviations from the
// mean, with both means taken by numpy's pairwise summation.
func populationStd(s []float64) float64 {
	n := float64(len(s))
	mean := pairwiseSum(s) / n
	dev := make([]float64, len(s))
	for i, x := range s {
		d := x - mean
		dev[i] = d * d
	}
	return math.Sqrt(pairwiseSum(dev) / n)
}

// pairwiseSum adds like numpy's float64 reduction (pairwise, with 8-way unrolled blocks of at
// most 128 elements), so that sums and means match AIPerf's to the last bit in common cases.
func pairwiseSum(a []float64) float64 {
	n := len(a)
	switch {
	case n < 8:
		var r float64
		for _, x := range a {
			r += x
		}
		return r
	case n <= 128:
		var r [8]float64
		copy(r[:], a[:8])
		i := 8
		for ; i+8 <= n; i += 8 {
			for j := range 8 {
				r[j] += a[i+j]
			}
		}
		res := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			res += a[i]
		}
		return res
	default:
		n2 := n / 2
		n2 -= n2 % 8
		return pairwiseSum(a[:n2]) + pairwiseSum(a[n2:])
	}
}

// Scale returns s with every value multiplied by f (AIPerf converts a result to its display unit
// by multiplying each statistic by the unit ratio).
func (s Stats) Scale(f float64) Stats {
	if f == 1 {
		return s
	}
	s.Sum *= f
	s.Avg *= f
	s.Min *= f
	s.Max *= f
	s.Std *= f
	for i := range s.P {
		s.P[i] *= f
	}
	return s
}
