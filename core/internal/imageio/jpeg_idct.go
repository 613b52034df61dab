package imageio

// This is a port of libjpeg-turbo's jidctint.c (jpeg_idct_islow, JDCT_ISLOW, the default DCT
// method and the one Pillow decodes with): the Loeffler-Ligtenberg-Moschytz integer IDCT with
// 13-bit constants, a 2-bit scaled first pass over columns and a second pass over rows.
// libjpeg-turbo's SIMD versions compute the same integers for conforming data; out-of-range
// results saturate to [0, 255] as the x86 SIMD code does.

const (
	idctConstBits = 13
	idctPass1Bits = 2

	fix0_298631336 = 2446
	fix0_390180644 = 3196
	fix0_541196100 = 4433
	fix0_765366865 = 6270
	fix0_899976223 = 7373
	fix1_175875602 = 9633
	fix1_501321110 = 12299
	fix1_847759065 = 15137
	fix1_961570560 = 16069
	fix2_053119869 = 16819
	fix2_562915447 = 20995
	fix3_072711026 = 25172
)

// idctIslow dequantises the natural-order coefficients in with the natural-order multipliers q
// and writes the 8x8 result to dst with the given stride.
func idctIslow(in *jcoefs, q *jblock, dst []byte, stride int) {
	var ws [64]int32

	// Pass 1: process columns from input, store into work array.
	for c := range 8 {
		if in[8+c] == 0 && in[16+c] == 0 && in[24+c] == 0 && in[32+c] == 0 &&
			in[40+c] == 0 && in[48+c] == 0 && in[56+c] == 0 {
			// AC terms all zero.
			dc := int32(in[c]) * q[c] << idctPass1Bits
			for r := range 8 {
				ws[8*r+c] = dc
			}
			continue
		}
		d0, d1 := int32(in[c])*q[c], int32(in[8+c])*q[8+c]
		d2, d3 := int32(in[16+c])*q[16+c], int32(in[24+c])*q[24+c]
		d4, d5 := int32(in[32+c])*q[32+c], int32(in[40+c])*q[40+c]
		d6, d7 := int32(in[48+c])*q[48+c], int32(in[56+c])*q[56+c]
		// Even part.
		z1 := (d2 + d6) * fix0_541196100
		tmp2 := z1 + d6*-fix1_847759065
		tmp3 := z1 + d2*fix0_765366865
		tmp0 := (d0 + d4) << idctConstBits
		tmp1 := (d0 - d4) << idctConstBits
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2
		// Odd part: o0..o3 are libjpeg's final tmp0..tmp3. It is written out in both passes
		// because a shared function is too large for Go's inliner, and the call costs.
		z1, z2, z3, z4 := d7+d1, d5+d3, d7+d3, d5+d1
		z5 := (z3 + z4) * fix1_175875602  // sqrt(2) * c3
		z1 *= -fix0_899976223             // sqrt(2) * ( c7-c3)
		z2 *= -fix2_562915447             // sqrt(2) * (-c1-c3)
		z3 = z3*-fix1_961570560 + z5      // sqrt(2) * (-c3-c5)
		z4 = z4*-fix0_390180644 + z5      // sqrt(2) * ( c5-c3)
		o0 := d7*fix0_298631336 + z1 + z3 // sqrt(2) * (-c1+c3+c5-c7)
		o1 := d5*fix2_053119869 + z2 + z4 // sqrt(2) * ( c1+c3-c5+c7)
		o2 := d3*fix3_072711026 + z2 + z3 // sqrt(2) * ( c1+c3+c5-c7)
		o3 := d1*fix1_501321110 + z1 + z4 // sqrt(2) * ( c1+c3-c5-c7)
		const sh = idctConstBits - idctPass1Bits
		ws[c] = descale(tmp10+o3, sh)
		ws[56+c] = descale(tmp10-o3, sh)
		ws[8+c] = descale(tmp11+o2, sh)
		ws[48+c] = descale(tmp11-o2, sh)
		ws[16+c] = descale(tmp12+o1, sh)
		ws[40+c] = descale(tmp12-o1, sh)
		ws[24+c] = descale(tmp13+o0, sh)
		ws[32+c] = descale(tmp13-o0, sh)
	}

	// Pass 2: process rows from work array, store into output.
	const sh = idctConstBits + idctPass1Bits + 3
	for r := range 8 {
		w := ws[8*r : 8*r+8]
		out := dst[r*stride:]
		out = out[:8:8]
		if w[1] == 0 && w[2] == 0 && w[3] == 0 && w[4] == 0 && w[5] == 0 && w[6] == 0 && w[7] == 0 {
			v := sample(descale(w[0], idctPass1Bits+3))
			for x := range out {
				out[x] = v
			}
			continue
		}
		// Even part.
		z2, z3 := w[2], w[6]
		z1 := (z2 + z3) * fix0_541196100
		tmp0 := (w[0] + w[4]) << idctConstBits
		tmp3 := z1 + z2*fix0_765366865
		tmp1 := (w[0] - w[4]) << idctConstBits
		tmp2 := z1 + z3*-fix1_847759065
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2
		// Odd part, as in pass 1.
		z1, z2, z3, z4 := w[7]+w[1], w[5]+w[3], w[7]+w[3], w[5]+w[1]
		z5 := (z3 + z4) * fix1_175875602
		z1 *= -fix0_899976223
		z2 *= -fix2_562915447
		z3 = z3*-fix1_961570560 + z5
		z4 = z4*-fix0_390180644 + z5
		o0 := w[7]*fix0_298631336 + z1 + z3
		o1 := w[5]*fix2_053119869 + z2 + z4
		o2 := w[3]*fix3_072711026 + z2 + z3
		o3 := w[1]*fix1_501321110 + z1 + z4
		out[0] = sample(descale(tmp10+o3, sh))
		out[7] = sample(descale(tmp10-o3, sh))
		out[1] = sample(descale(tmp11+o2, sh))
		out[6] = sample(descale(tmp11-o2, sh))
		out[2] = sample(descale(tmp12+o1, sh))
		out[5] = sample(descale(tmp12-o1, sh))
		out[3] = sample(descale(tmp13+o0, sh))
		out[4] = sample(descale(tmp13-o0, sh))
	}
}

// descale is libjpeg's DESCALE: a rounding arithmetic right shift.
func descale(x int32, n uint) int32 { return (x + 1<<(n-1)) >> n }

// sample level-shifts an IDCT output by +128 and saturates it to a byte.
func sample(v int32) byte {
	return byte(min(max(v+128, 0), 255))
}
