// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// This file is derived from Go's image/jpeg (reader.go and scan.go), BSD licence above.
// Iris changes, all to decode as libjpeg-turbo does:
//   - any integral sampling factors 1..4 (MCU geometry from the largest factors, single-component
//     scans over each component's own block grid, as jdinput.c lays them out);
//   - quantisation tables latched at a component's first scan (jdinput.c latch_quant_tables);
//   - coefficients stored as 16-bit JCOEFs;
//   - the coefficient-bit bookkeeping that decides libjpeg's progressive block smoothing, which
//     this decoder refuses rather than approximates;
//   - libjpeg's accurate integer IDCT (jpeg_idct.go) and its upsampling and colour conversion
//     (jpeg_color.go) instead of Go's;
//   - three-component and grey images only (Inspect refuses CMYK/YCCK), context cancellation.

package imageio

import (
	"context"
	"math/bits"
	"sync"

	"github.com/iris-vlm/iris/core/internal/par"
)

// jpegFormatError reports that the input is not a valid JPEG.
type jpegFormatError string

func (e jpegFormatError) Error() string { return "invalid JPEG: " + string(e) }

// jpegUnsupportedError reports a valid but unimplemented JPEG feature.
type jpegUnsupportedError string

func (e jpegUnsupportedError) Error() string { return "unsupported JPEG feature: " + string(e) }

// maxScans bounds the scans of one image. A progressive scan can cover the whole block grid
// with a few bytes of end-of-band runs, so without a bound a small file costs unbounded time;
// real encoders write about ten.
const maxScans = 100

const (
	jBlockSize     = 64
	jDCTable       = 0
	jACTable       = 1
	jMaxTc         = 1
	jMaxTh         = 3
	jMaxTq         = 3
	jMaxComponents = 3
)

const (
	sof0Marker = 0xc0 // Start Of Frame (Baseline Sequential).
	sof1Marker = 0xc1 // Start Of Frame (Extended Sequential).
	sof2Marker = 0xc2 // Start Of Frame (Progressive).
	dhtMarker  = 0xc4 // Define Huffman Table.
	rst0Marker = 0xd0 // ReSTart (0).
	rst7Marker = 0xd7 // ReSTart (7).
	eoiMarker  = 0xd9 // End Of Image.
	sosMarker  = 0xda // Start Of Scan.
	dqtMarker  = 0xdb // Define Quantization Table.
	driMarker  = 0xdd // Define Restart Interval.
	comMarker  = 0xfe // COMment.
	app0Marker = 0xe0
	app15Mark  = 0xef
)

// unzig maps from the zig-zag ordering to the natural ordering. For example,
// unzig[3] is the column and row of the fourth element in zig-zag order. The
// value is 16, which means first column (16%8 == 0) and third row (16/8 == 2).
var unzig = [jBlockSize]int{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
}

// jblock is a dequantisation table in natural order.
type jblock [jBlockSize]int32

// jcoefs is one 8x8 block of coefficients in natural order: libjpeg keeps them as 16-bit
// JCOEFs.
type jcoefs [jBlockSize]int16

// jcomp is a frame component (section B.2.2) and its decoding state.
type jcomp struct {
	h, v int   // sampling factors
	c    uint8 // component identifier
	tq   uint8 // quantisation table selector

	// bw, bh are the component's blocks per row and column that hold image data
	// (libjpeg's width_in_blocks, height_in_blocks); aw, ah the MCU-padded allocation.
	bw, bh, aw, ah int
	plane          []byte // aw*8 x ah*8 samples
	coefs          []jcoefs
	qt             jblock // latched quantisation table, natural order, as 16-bit multipliers
	latched        bool
	coefBits       [jBlockSize]int8 // libjpeg's coef_bits (zig-zag index), -1 until seen
	scans          int

	// nonZero[i] has bit k set when AC coefficient k (zig-zag order) of coefs[i] is non-zero,
	// for progressive images only: refinement scans visit the non-zero coefficients of every
	// block, and walking the mask's bits is much cheaper than testing all 63.
	nonZero []uint64
}

type jpegDecoder struct {
	ctx  context.Context //nolint:containedctx // lives for one Decode call, checked between MCU rows
	data []byte
	pos  int
	bits jbits

	width, height int
	hmax, vmax    int
	mcusX, mcusY  int
	nComp         int
	comp          [jMaxComponents]jcomp

	// As per section 4.5, there are four modes of operation (selected by the
	// SOF? markers): sequential DCT, progressive DCT, lossless and
	// hierarchical, although this implementation does not support the latter
	// two non-DCT modes. Sequential DCT is further split into baseline and
	// extended, as per section 4.11.
	baseline    bool
	progressive bool
	scans       int

	ri     int    // Restart Interval.
	eobRun uint16 // End-of-Band run, specified in section G.1.2.2.

	huff     [jMaxTc + 1][jMaxTh + 1]jhuffman
	quant    [jMaxTq + 1][jBlockSize]int32 // in zig-zag order
	hasQuant [jMaxTq + 1]bool

	// rgb says the planes hold R, G and B rather than YCbCr (the header's colour-space guess).
	// out receives the pixels when a baseline scan converts them as it decodes (scanPipe);
	// outDone says it holds the whole image.
	rgb     bool
	out     *RGB
	outDone bool
}

// decodeJPEG decodes data into its component planes. The frame must be the one Inspect read.
// The caller releases the decoder's buffers.
func decodeJPEG(ctx context.Context, data []byte, jh *jpegHeader) (*jpegDecoder, error) {
	d := &jpegDecoder{ctx: ctx, data: data, rgb: jh.rgb}
	if err := d.decode(); err != nil {
		d.release()
		return nil, err
	}
	if d.width != jh.width || d.height != jh.height || d.nComp != jh.nComp {
		d.release()
		return nil, jpegFormatError("frame differs from the inspected header")
	}
	return d, nil
}

func (d *jpegDecoder) decode() error {
	if b, err := d.readFull(2); err != nil || b[0] != 0xff || b[1] != 0xd8 {
		return jpegFormatError("missing SOI marker")
	}
	for {
		if err := d.ctx.Err(); err != nil {
			return err
		}
		b, err := d.readFull(2)
		if err != nil {
			// Pillow refuses a file that ends without EOI ("image file is truncated").
			return err
		}
		tmp := [2]byte{b[0], b[1]}
		for tmp[0] != 0xff {
			// Strictly speaking, this is a format error. However, libjpeg is
			// liberal in what it accepts: it warns about extraneous data and
			// continues, and so do we.
			tmp[0] = tmp[1]
			tmp[1], err = d.readByte()
			if err != nil {
				return err
			}
		}
		marker := tmp[1]
		if marker == 0 {
			// Treat "\xff\x00" as extraneous data.
			continue
		}
		for marker == 0xff {
			// Section B.1.1.2 says, "Any marker may optionally be preceded by any
			// number of fill bytes, which are bytes assigned code X'FF'".
			marker, err = d.readByte()
			if err != nil {
				return err
			}
		}
		if marker == eoiMarker { // End Of Image.
			break
		}
		if rst0Marker <= marker && marker <= rst7Marker {
			// A stray restart marker after the last entropy-coded segment is harmless.
			continue
		}

		// Read the 16-bit length of the segment. The value includes the 2 bytes for the
		// length itself, so we subtract 2 to get the number of remaining bytes.
		lb, err := d.readFull(2)
		if err != nil {
			return err
		}
		n := int(lb[0])<<8 + int(lb[1]) - 2
		if n < 0 {
			return jpegFormatError("short segment length")
		}

		switch marker {
		case sof0Marker, sof1Marker, sof2Marker:
			d.baseline = marker == sof0Marker
			d.progressive = marker == sof2Marker
			err = d.processSOF(n)
		case dhtMarker:
			err = d.processDHT(n)
		case dqtMarker:
			err = d.processDQT(n)
		case sosMarker:
			err = d.processSOS(n)
		case driMarker:
			err = d.processDRI(n)
		default:
			if app0Marker <= marker && marker <= app15Mark || marker == comMarker {
				_, err = d.readFull(n)
			} else if marker < 0xc0 { // See Table B.1 "Marker code assignments".
				err = jpegFormatError("unknown marker")
			} else {
				err = jpegUnsupportedError("unknown marker")
			}
		}
		if err != nil {
			return err
		}
	}
	if d.nComp == 0 || d.scans == 0 {
		return jpegFormatError("missing SOS marker")
	}
	for i := range d.nComp {
		if d.comp[i].scans == 0 {
			return jpegUnsupportedError("a component no scan carries")
		}
	}
	return nil
}

// Specified in section B.2.2.
func (d *jpegDecoder) processSOF(n int) error {
	if d.nComp != 0 {
		return jpegFormatError("multiple SOF markers")
	}
	switch n {
	case 6 + 3*1:
		d.nComp = 1
	case 6 + 3*3:
		d.nComp = 3
	default:
		return jpegUnsupportedError("number of components")
	}
	b, err := d.readFull(n)
	if err != nil {
		return err
	}
	if b[0] != 8 {
		return jpegUnsupportedError("precision")
	}
	d.height = int(b[1])<<8 + int(b[2])
	d.width = int(b[3])<<8 + int(b[4])
	if int(b[5]) != d.nComp {
		return jpegFormatError("SOF has wrong length")
	}
	if d.width == 0 || d.height == 0 {
		return jpegUnsupportedError("empty image (DNL)")
	}
	d.hmax, d.vmax = 1, 1
	for i := range d.nComp {
		c := &d.comp[i]
		c.c = b[6+3*i]
		for j := range i {
			if c.c == d.comp[j].c {
				return jpegFormatError("repeated component identifier")
			}
		}
		c.tq = b[8+3*i]
		if c.tq > jMaxTq {
			return jpegFormatError("bad Tq value")
		}
		hv := b[7+3*i]
		c.h, c.v = int(hv>>4), int(hv&0x0f)
		if c.h < 1 || 4 < c.h || c.v < 1 || 4 < c.v {
			return jpegFormatError("luma/chroma subsampling ratio")
		}
		d.hmax, d.vmax = max(d.hmax, c.h), max(d.vmax, c.v)
	}
	// jdinput.c initial_setup: the MCU grid, and each component's block grid.
	d.mcusX = ceilDiv(d.width, 8*d.hmax)
	d.mcusY = ceilDiv(d.height, 8*d.vmax)
	for i := range d.nComp {
		c := &d.comp[i]
		if d.hmax%c.h != 0 || d.vmax%c.v != 0 {
			return jpegUnsupportedError("fractional sampling ratio")
		}
		c.bw = ceilDiv(d.width*c.h, 8*d.hmax)
		c.bh = ceilDiv(d.height*c.v, 8*d.vmax)
		c.aw, c.ah = d.mcusX*c.h, d.mcusY*c.v
		for k := range c.coefBits {
			c.coefBits[k] = -1
		}
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Specified in section B.2.4.1.
func (d *jpegDecoder) processDQT(n int) error {
loop:
	for n > 0 {
		n--
		x, err := d.readByte()
		if err != nil {
			return err
		}
		tq := x & 0x0f
		if tq > jMaxTq {
			return jpegFormatError("bad Tq value")
		}
		switch x >> 4 {
		default:
			return jpegFormatError("bad Pq value")
		case 0:
			if n < jBlockSize {
				break loop
			}
			n -= jBlockSize
			b, err := d.readFull(jBlockSize)
			if err != nil {
				return err
			}
			for i := range d.quant[tq] {
				d.quant[tq][i] = int32(b[i])
			}
		case 1:
			if n < 2*jBlockSize {
				break loop
			}
			n -= 2 * jBlockSize
			b, err := d.readFull(2 * jBlockSize)
			if err != nil {
				return err
			}
			for i := range d.quant[tq] {
				d.quant[tq][i] = int32(b[2*i])<<8 | int32(b[2*i+1])
			}
		}
		d.hasQuant[tq] = true
	}
	if n != 0 {
		return jpegFormatError("DQT has wrong length")
	}
	return nil
}

// Specified in section B.2.4.4.
func (d *jpegDecoder) processDRI(n int) error {
	if n != 2 {
		return jpegFormatError("DRI has wrong length")
	}
	b, err := d.readFull(2)
	if err != nil {
		return err
	}
	d.ri = int(b[0])<<8 + int(b[1])
	return nil
}

// Specified in section B.2.3.
func (d *jpegDecoder) processSOS(n int) error {
	if d.nComp == 0 {
		return jpegFormatError("missing SOF marker")
	}
	if n < 6 || 4+2*d.nComp < n || n%2 != 0 {
		return jpegFormatError("SOS has wrong length")
	}
	b, err := d.readFull(n)
	if err != nil {
		return err
	}
	nComp := int(b[0])
	if n != 4+2*nComp {
		return jpegFormatError("SOS length inconsistent with number of components")
	}
	var scan [jMaxComponents]struct {
		compIndex uint8
		td        uint8 // DC table selector.
		ta        uint8 // AC table selector.
	}
	blocksInMCU := 0
	for i := range nComp {
		cs := b[1+2*i] // Component selector.
		compIndex := -1
		for j, comp := range d.comp[:d.nComp] {
			if cs == comp.c {
				compIndex = j
			}
		}
		if compIndex < 0 {
			return jpegFormatError("unknown component selector")
		}
		scan[i].compIndex = uint8(compIndex)
		for j := range i {
			if scan[i].compIndex == scan[j].compIndex {
				return jpegFormatError("repeated component selector")
			}
		}
		blocksInMCU += d.comp[compIndex].h * d.comp[compIndex].v

		// The baseline t <= 1 restriction is specified in table B.3.
		scan[i].td = b[2+2*i] >> 4
		if t := scan[i].td; t > jMaxTh || (d.baseline && t > 1) {
			return jpegFormatError("bad Td value")
		}
		scan[i].ta = b[2+2*i] & 0x0f
		if t := scan[i].ta; t > jMaxTh || (d.baseline && t > 1) {
			return jpegFormatError("bad Ta value")
		}
	}
	// libjpeg's D_MAX_BLOCKS_IN_MCU.
	if nComp > 1 && blocksInMCU > 10 {
		return jpegFormatError("total sampling factors too large")
	}

	// zigStart and zigEnd are the spectral selection bounds; ah and al the successive
	// approximation high and low values (the spec's Ss, Se, Ah and Al). For sequential
	// JPEGs these are 0/63/0/0, as per table B.3.
	zigStart, zigEnd, ah, al := int32(0), int32(jBlockSize-1), uint32(0), uint32(0)
	if d.progressive {
		zigStart = int32(b[1+2*nComp])
		zigEnd = int32(b[2+2*nComp])
		ah = uint32(b[3+2*nComp] >> 4)
		al = uint32(b[3+2*nComp] & 0x0f)
		// jdphuff.c start_pass_phuff_decoder.
		if (zigStart == 0 && zigEnd != 0) || zigStart > zigEnd || jBlockSize <= zigEnd {
			return jpegFormatError("bad spectral selection bounds")
		}
		if zigStart != 0 && nComp != 1 {
			return jpegFormatError("progressive AC coefficients for more than one component")
		}
		if (ah != 0 && ah != al+1) || al > 13 {
			return jpegFormatError("bad successive approximation values")
		}
	}

	for i := range nComp {
		c := &d.comp[scan[i].compIndex]
		// jdinput.c latch_quant_tables: a component keeps the table its first scan saw.
		if !c.latched {
			if !d.hasQuant[c.tq] {
				return jpegFormatError("missing quantization table")
			}
			for zig, q := range d.quant[c.tq] {
				c.qt[unzig[zig]] = int32(int16(q)) // ISLOW_MULT_TYPE is a short
			}
			c.latched = true
		}
		if c.plane == nil {
			c.plane = getPlane(c.aw * 8 * c.ah * 8)
		}
		// Every image keeps its coefficients: the IDCT runs after the scans, block rows in
		// parallel (reconstructAll), or during a baseline image's scan (scanPipe).
		if c.coefs == nil {
			c.coefs = getCoefs(c.aw * c.ah)
			if d.progressive {
				c.nonZero = getMasks(c.aw * c.ah)
			}
		}
		if d.progressive {
			for k := zigStart; k <= zigEnd; k++ {
				c.coefBits[k] = int8(al)
			}
		}
		c.scans++
		// libjpeg-turbo falls back to the standard tables for a missing table 0 or 1.
		if !d.progressive || (zigStart == 0 && ah == 0) {
			if err := d.defaultTable(jDCTable, scan[i].td); err != nil {
				return err
			}
		}
		if !d.progressive || zigStart != 0 {
			if err := d.defaultTable(jACTable, scan[i].ta); err != nil {
				return err
			}
		}
	}
	d.scans++
	if d.scans > maxScans {
		return jpegUnsupportedError("more than 100 scans")
	}

	// The MCU grid of this scan: whole MCUs for an interleaved scan, single blocks of the one
	// component's own grid otherwise (jdinput.c per_scan_setup).
	mcusX, mcusY := d.mcusX, d.mcusY
	if nComp == 1 {
		c := &d.comp[scan[0].compIndex]
		mcusX, mcusY = c.bw, c.bh
	}

	// A scan after the one a pipe converted changes coefficients the pixels came from.
	d.outDone = false
	pipe := d.startPipe(nComp, mcusY)
	if pipe != nil {
		defer pipe.end(false) // the error returns: no worker outlives the scan
	}

	d.resetBits()
	d.eobRun = 0
	mcu, expectedRST := 0, uint8(rst0Marker)
	// dc is the running DC predictor of each component. Blocks are decoded in place, their
	// coefficients in natural (not zig-zag) order.
	var dc [jMaxComponents]int32
	var noMask uint64
	for my := range mcusY {
		if err := d.ctx.Err(); err != nil {
			return err
		}
		for mx := range mcusX {
			for i := range nComp {
				compIndex := scan[i].compIndex
				c := &d.comp[compIndex]
				hi, vi := c.h, c.v
				if nComp == 1 {
					hi, vi = 1, 1
				}
				for j := range hi * vi {
					// Blocks within an MCU are in raster order (section A.2.3).
					bx, by := hi*mx+j%hi, vi*my+j/hi
					blk := &c.coefs[by*c.aw+bx]
					// Sequential scans keep no masks: their AC stores go to a dummy.
					nz := &noMask
					if d.progressive {
						nz = &c.nonZero[by*c.aw+bx]
					}
					if !d.progressive && c.scans > 1 {
						// A sequential scan sets the whole block; a component's first scan
						// finds it zeroed by getCoefs.
						*blk = jcoefs{}
					}

					if ah != 0 {
						if err := d.refine(blk, nz, &d.huff[jACTable][scan[i].ta], zigStart, zigEnd, 1<<al); err != nil {
							return err
						}
					} else {
						zig := zigStart
						if zig == 0 {
							zig++
							// Decode the DC coefficient, as specified in section F.2.2.1.
							value, err := d.decodeHuffman(&d.huff[jDCTable][scan[i].td])
							if err != nil {
								return err
							}
							if value > 16 {
								return jpegUnsupportedError("excessive DC component")
							}
							dcDelta, err := d.receiveExtend(value)
							if err != nil {
								return err
							}
							dc[compIndex] += dcDelta
							blk[0] = int16(dc[compIndex] << al)
						}

						if zig <= zigEnd && d.eobRun > 0 {
							d.eobRun--
						} else {
							// Decode the AC coefficients, as specified in section F.2.2.2.
							huff := &d.huff[jACTable][scan[i].ta]
							for ; zig <= zigEnd; zig++ {
								if d.bits.n < jLutSize {
									d.fill()
								}
								if d.bits.n >= jLutSize {
									if e := huff.acLut[d.bits.a>>(64-jLutSize)]; e != 0 {
										if e>>16 == 0 {
											// EOB ends the block, as startEOBRun(0) would; ZRL
											// skips 16 zeroes.
											d.bits.consume(int(e & 0x0f))
											if e>>8 == 0 {
												break
											}
											zig += 0x0f
											continue
										}
										zig += e >> 8 & 0x0f
										if zig > zigEnd {
											d.bits.consume(int(e >> 4 & 0x0f))
											break
										}
										d.bits.consume(int(e & 0x0f))
										v := int16(e >> 16 << al)
										blk[unzig[zig]] = v
										setNonZero(nz, zig, v)
										continue
									}
								}
								value, err := d.decodeHuffman(huff)
								if err != nil {
									return err
								}
								val0 := value >> 4
								val1 := value & 0x0f
								if val1 != 0 {
									zig += int32(val0)
									if zig > zigEnd {
										break
									}
									ac, err := d.receiveExtend(val1)
									if err != nil {
										return err
									}
									v := int16(ac << al)
									blk[unzig[zig]] = v
									setNonZero(nz, zig, v)
								} else {
									if val0 != 0x0f {
										if err := d.startEOBRun(val0); err != nil {
											return err
										}
										d.eobRun--
										break
									}
									zig += 0x0f
								}
							}
						}
					}

				} // for j
			} // for i
			mcu++
			if d.ri > 0 && mcu%d.ri == 0 && mcu < mcusX*mcusY {
				// For well-formed input, the RST[0-7] restart marker follows
				// immediately. For corrupt input, call findRST to try to
				// resynchronize.
				d.rewind()
				rb, err := d.readFull(2)
				if err != nil {
					return err
				}
				tmp := [2]byte{rb[0], rb[1]}
				if tmp[0] != 0xff || tmp[1] != expectedRST {
					if err := d.findRST(expectedRST, tmp); err != nil {
						return err
					}
				}
				expectedRST++
				if expectedRST == rst7Marker+1 {
					expectedRST = rst0Marker
				}
				// Reset the Huffman decoder.
				d.resetBits()
				// Reset the DC components, as per section F.2.1.3.1.
				dc = [jMaxComponents]int32{}
				// Reset the progressive decoder state, as per section G.1.2.2.
				d.eobRun = 0
			}
		} // for mx
		if pipe != nil {
			pipe.decoded(my)
		}
	} // for my
	d.rewind()
	if pipe != nil {
		pipe.end(true)
	}
	return nil
}

// startEOBRun sets d.eobRun to the run of end-of-band blocks that an EOBr symbol (r = val0 < 15)
// starts: 1<<r plus r more bits (section G.1.2.2).
func (d *jpegDecoder) startEOBRun(r uint8) error {
	d.eobRun = uint16(1 << r)
	if r != 0 {
		bits, err := d.decodeBits(int32(r))
		if err != nil {
			return err
		}
		d.eobRun |= uint16(bits)
	}
	return nil
}

// defaultTable installs the Annex K.3 table for an undefined table 0 or 1, as libjpeg-turbo's
// jpeg_std_huff_table does.
func (d *jpegDecoder) defaultTable(class, t uint8) error {
	h := &d.huff[class][t]
	if h.nCodes != 0 {
		return nil
	}
	if t > 1 {
		return jpegFormatError("uninitialized Huffman table")
	}
	std := stdHuffman[class][t]
	return h.build(std.counts, std.vals)
}

// refine decodes a successive approximation refinement block, as specified in
// section G.1.2.
func (d *jpegDecoder) refine(b *jcoefs, nzMask *uint64, h *jhuffman, zigStart, zigEnd, delta int32) error {
	// Refining a DC component is trivial.
	if zigStart == 0 {
		if zigEnd != 0 {
			return jpegFormatError("bad spectral selection bounds")
		}
		bit, err := d.decodeBit()
		if err != nil {
			return err
		}
		if bit {
			b[0] |= int16(delta)
		}
		return nil
	}

	// Refining AC components is more complicated; see sections G.1.2.2 and G.1.2.3.
	zig := zigStart
	if d.eobRun == 0 {
	loop:
		for ; zig <= zigEnd; zig++ {
			z := int32(0)
			value, err := d.decodeHuffman(h)
			if err != nil {
				return err
			}
			val0 := value >> 4
			val1 := value & 0x0f

			switch val1 {
			case 0:
				if val0 != 0x0f {
					if err := d.startEOBRun(val0); err != nil {
						return err
					}
					break loop
				}
			case 1:
				z = delta
				bit, err := d.decodeBit()
				if err != nil {
					return err
				}
				if !bit {
					z = -z
				}
			default:
				return jpegFormatError("unexpected Huffman code")
			}

			zig, err = d.refineNonZeroes(b, *nzMask, zig, zigEnd, int32(val0), delta)
			if err != nil {
				return err
			}
			if zig > zigEnd {
				return jpegFormatError("too many coefficients")
			}
			if z != 0 {
				b[unzig[zig]] = int16(z)
				setNonZero(nzMask, zig, int16(z))
			}
		}
	}
	if d.eobRun > 0 {
		d.eobRun--
		if _, err := d.refineNonZeroes(b, *nzMask, zig, zigEnd, -1, delta); err != nil {
			return err
		}
	}
	return nil
}

// refineNonZeroes refines non-zero entries of b, whose non-zero mask is nzMask, in zig-zag
// order from zig. If nz >= 0, the first nz zero entries are skipped over and it stops at the
// next one, returning its index; otherwise (or without that many zeroes) it returns zigEnd+1.
// Refinement keeps a coefficient's sign and non-zero-ness, so nzMask holds throughout.
func (d *jpegDecoder) refineNonZeroes(b *jcoefs, nzMask uint64, zig, zigEnd, nz, delta int32) (int32, error) {
	band := ^uint64(0) >> uint(63-zigEnd) & (^uint64(0) << uint(zig))
	todo := nzMask & band
	end := zigEnd + 1
	if nz >= 0 {
		zeroes := ^nzMask & band
		for ; nz > 0 && zeroes != 0; nz-- {
			zeroes &= zeroes - 1
		}
		if zeroes != 0 {
			end = int32(bits.TrailingZeros64(zeroes))
			todo &= 1<<uint(end) - 1
		}
	}
	for ; todo != 0; todo &= todo - 1 {
		if d.bits.n == 0 {
			if err := d.need(1); err != nil {
				return 0, err
			}
		}
		bit := d.bits.a >> 63
		d.bits.consume(1)
		if bit == 0 {
			continue
		}
		u := unzig[bits.TrailingZeros64(todo)]
		if b[u] >= 0 {
			b[u] += int16(delta)
		} else {
			b[u] -= int16(delta)
		}
	}
	return end, nil
}

// setNonZero records in *nzMask whether coefficient zig now holds a non-zero v. A shift by al
// can leave 0 in the 16 bits, so a stored coefficient is not always non-zero.
func setNonZero(nzMask *uint64, zig int32, v int16) {
	if v != 0 {
		*nzMask |= 1 << uint(zig)
	} else {
		*nzMask &^= 1 << uint(zig)
	}
}

// findRST advances past the next RST restart marker that matches expectedRST.
// Other than I/O errors, it is also an error if we encounter an {0xFF, M}
// two-byte marker sequence where M is not 0x00, 0xFF or the expectedRST.
//
// tmp holds the next two bytes of JPEG-encoded input.
func (d *jpegDecoder) findRST(expectedRST uint8, tmp [2]byte) error {
	for {
		// i is the index such that, at the bottom of the loop, we read 2-i
		// bytes into tmp[i:2], maintaining the invariant that tmp
		// holds the next two bytes of JPEG-encoded input. It is either 0 or 1,
		// so that each iteration advances by 1 or 2 bytes (or returns).
		i := 0

		if tmp[0] == 0xff {
			if tmp[1] == expectedRST {
				return nil
			} else if tmp[1] == 0xff {
				i = 1
			} else if tmp[1] != 0x00 {
				// libjpeg's jpeg_resync_to_restart treats nearby RST markers specially;
				// like Go's decoder, we give up instead.
				return jpegFormatError("bad RST marker")
			}
		} else if tmp[1] == 0xff {
			tmp[0] = 0xff
			i = 1
		}

		b, err := d.readFull(2 - i)
		if err != nil {
			return err
		}
		copy(tmp[i:], b)
	}
}

// smoothingApplies is libjpeg-turbo's smoothing_ok (jdcoefct.c) after the last scan: whether
// it would estimate missing low-frequency AC coefficients of a progressive image
// (decompress_smooth_data), which this decoder does not implement.
func (d *jpegDecoder) smoothingApplies() bool {
	if !d.progressive {
		return false
	}
	useful := false
	for i := range d.nComp {
		c := &d.comp[i]
		if !c.latched {
			return false
		}
		// DC and the first 9 AC quantisers (natural positions) must be non-zero.
		for _, pos := range [...]int{0, 1, 8, 16, 9, 2, 3, 10, 17, 24} {
			if c.qt[pos] == 0 {
				return false
			}
		}
		if c.coefBits[0] < 0 {
			return false
		}
		for k := 1; k < 10; k++ {
			if c.coefBits[k] != 0 {
				useful = true
			}
		}
	}
	return useful
}

// reconstructAll runs the IDCT over every stored block, block rows in parallel.
func (d *jpegDecoder) reconstructAll() error {
	for i := range d.nComp {
		c := &d.comp[i]
		par.Bands(c.bh, 8, func(lo, hi int) {
			for by := lo; by < hi; by++ {
				if d.ctx.Err() != nil {
					return
				}
				for bx := range c.bw {
					c.reconstruct(&c.coefs[by*c.aw+bx], bx, by)
				}
			}
		})
	}
	return d.ctx.Err()
}

// Component planes and coefficient arrays are large and short-lived: they come from pools and
// go back once the pixels are out.
var (
	planePool = sync.Pool{New: func() any { return new([]byte) }}
	coefsPool = sync.Pool{New: func() any { return new([]jcoefs) }}
	masksPool = sync.Pool{New: func() any { return new([]uint64) }}
)

func getPlane(n int) []byte {
	p := planePool.Get().(*[]byte)
	if cap(*p) < n {
		*p = make([]byte, n)
	}
	return (*p)[:n] // every sample is written by the IDCT before it is read
}

func getCoefs(n int) []jcoefs {
	p := coefsPool.Get().(*[]jcoefs)
	if cap(*p) < n {
		*p = make([]jcoefs, n)
		return *p
	}
	c := (*p)[:n]
	clear(c) // progressive scans accumulate into zeroed blocks
	return c
}

func getMasks(n int) []uint64 {
	p := masksPool.Get().(*[]uint64)
	if cap(*p) < n {
		*p = make([]uint64, n)
		return *p
	}
	m := (*p)[:n]
	clear(m)
	return m
}

// release returns the decoder's buffers to the pools.
func (d *jpegDecoder) release() {
	for i := range d.comp {
		c := &d.comp[i]
		if c.plane != nil {
			p := c.plane
			planePool.Put(&p)
			c.plane = nil
		}
		if c.coefs != nil {
			p := c.coefs
			coefsPool.Put(&p)
			c.coefs = nil
		}
		if c.nonZero != nil {
			p := c.nonZero
			masksPool.Put(&p)
			c.nonZero = nil
		}
	}
}

// reconstruct dequantises b and writes its inverse DCT to block (bx, by) of the plane.
func (c *jcomp) reconstruct(b *jcoefs, bx, by int) {
	stride := c.aw * 8
	idctIslow(b, &c.qt, c.plane[8*(by*stride+bx):], stride)
}
