// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// This file is derived from Go's image/jpeg (huffman.go and the byte reader of reader.go),
// BSD licence above. Iris changes: it reads from a byte slice held in memory, and
// missing tables 0 and 1 fall back to the standard tables of Annex K.3, as libjpeg-turbo does
// (jstdhuff.c) for Motion-JPEG frames.

package imageio

import "errors"

// jMaxCodeLength is the maximum (inclusive) number of bits in a Huffman code.
const jMaxCodeLength = 16

// jMaxNCodes is the maximum (inclusive) number of codes in a Huffman tree.
const jMaxNCodes = 256

// jLutSize is the log-2 size of the Huffman decoder's look-up table.
const jLutSize = 8

// jhuffman is a Huffman decoder, specified in section C.
type jhuffman struct {
	// nCodes is the number of codes in the tree.
	nCodes int32
	// lut is the look-up table for the next jLutSize bits in the bit-stream.
	// The high 8 bits of the uint16 are the encoded value. The low 8 bits
	// are 1 plus the code length, or 0 if the value is too large to fit in
	// jLutSize bits.
	lut [1 << jLutSize]uint16
	// vals are the decoded values, sorted by their encoding.
	vals [jMaxNCodes]uint8
	// minCodes[i] is the minimum code of length i, or -1 if there are no
	// codes of that length.
	minCodes [jMaxCodeLength]int32
	// maxCodes[i] is the maximum code of length i, or -1 if there are no
	// codes of that length.
	maxCodes [jMaxCodeLength]int32
	// valsIndices[i] is the index into vals of minCodes[i].
	valsIndices [jMaxCodeLength]int32
}

// jbits holds the unprocessed bits that have been taken from the byte-stream.
// The n least significant bits of a form the unread bits, to be read in MSB to
// LSB order.
type jbits struct {
	a uint32 // accumulator.
	m uint32 // mask. m==1<<(n-1) when n>0, with m==0 when n==0.
	n int32  // the number of unread bits in a.
}

var (
	errShortHuffmanData = jpegFormatError("short Huffman data")
	errMissingFF00      = jpegFormatError("missing 0xff00 sequence")
	errUnexpectedEOF    = jpegFormatError("unexpected end of data")
)

// readByte returns the next byte. It does not care about byte stuffing.
func (d *jpegDecoder) readByte() (byte, error) {
	if d.pos >= len(d.data) {
		return 0, errUnexpectedEOF
	}
	x := d.data[d.pos]
	d.pos++
	d.nUnreadable = 0
	return x, nil
}

// unreadByteStuffedByte undoes the most recent readByteStuffedByte call,
// giving a byte of data back from d.bits to the byte stream. The Huffman look-up table
// requires at least 8 bits for look-up, which means that Huffman decoding can
// sometimes overshoot and read one or two too many bytes. Two-byte overshoot
// can happen when expecting to read a 0xff 0x00 byte-stuffed byte.
func (d *jpegDecoder) unreadByteStuffedByte() {
	d.pos -= d.nUnreadable
	d.nUnreadable = 0
	if d.bits.n >= 8 {
		d.bits.a >>= 8
		d.bits.n -= 8
		d.bits.m >>= 8
	}
}

// readByteStuffedByte is like readByte but is for byte-stuffed Huffman data.
func (d *jpegDecoder) readByteStuffedByte() (byte, error) {
	if d.pos+2 <= len(d.data) {
		x := d.data[d.pos]
		d.pos++
		d.nUnreadable = 1
		if x != 0xff {
			return x, nil
		}
		if d.data[d.pos] != 0x00 {
			return 0, errMissingFF00
		}
		d.pos++
		d.nUnreadable = 2
		return 0xff, nil
	}
	d.nUnreadable = 0
	x, err := d.readByte()
	if err != nil {
		return 0, err
	}
	d.nUnreadable = 1
	if x != 0xff {
		return x, nil
	}
	x, err = d.readByte()
	if err != nil {
		return 0, err
	}
	d.nUnreadable = 2
	if x != 0x00 {
		return 0, errMissingFF00
	}
	return 0xff, nil
}

// readFull returns the next n bytes. It does not care about byte stuffing.
func (d *jpegDecoder) readFull(n int) ([]byte, error) {
	// Unread the overshot bytes, if any.
	if d.nUnreadable != 0 {
		if d.bits.n >= 8 {
			d.unreadByteStuffedByte()
		}
		d.nUnreadable = 0
	}
	if n > len(d.data)-d.pos {
		d.pos = len(d.data)
		return nil, errUnexpectedEOF
	}
	b := d.data[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

// ensureNBits reads bytes from the byte buffer to ensure that d.bits.n is at
// least n. For best performance (avoiding function calls inside hot loops),
// the caller is the one responsible for first checking that d.bits.n < n.
func (d *jpegDecoder) ensureNBits(n int32) error {
	for {
		c, err := d.readByteStuffedByte()
		if err != nil {
			if errors.Is(err, errUnexpectedEOF) {
				return errShortHuffmanData
			}
			return err
		}
		d.bits.a = d.bits.a<<8 | uint32(c)
		d.bits.n += 8
		if d.bits.m == 0 {
			d.bits.m = 1 << 7
		} else {
			d.bits.m <<= 8
		}
		if d.bits.n >= n {
			break
		}
	}
	return nil
}

// receiveExtend is the composition of RECEIVE and EXTEND, specified in section
// F.2.2.1.
func (d *jpegDecoder) receiveExtend(t uint8) (int32, error) {
	if d.bits.n < int32(t) {
		if err := d.ensureNBits(int32(t)); err != nil {
			return 0, err
		}
	}
	d.bits.n -= int32(t)
	d.bits.m >>= t
	s := int32(1) << t
	x := int32(d.bits.a>>uint8(d.bits.n)) & (s - 1)
	if x < s>>1 {
		x += ((-1) << t) + 1
	}
	return x, nil
}

// processDHT processes a Define Huffman Table marker, and initializes a huffman
// struct from its contents. Specified in section B.2.4.2.
func (d *jpegDecoder) processDHT(n int) error {
	for n > 0 {
		if n < 17 {
			return jpegFormatError("DHT has wrong length")
		}
		head, err := d.readFull(17)
		if err != nil {
			return err
		}
		tc := head[0] >> 4
		if tc > jMaxTc {
			return jpegFormatError("bad Tc value")
		}
		th := head[0] & 0x0f
		// The baseline th <= 1 restriction is specified in table B.5.
		if th > jMaxTh || (d.baseline && th > 1) {
			return jpegFormatError("bad Th value")
		}
		var counts [jMaxCodeLength]byte
		copy(counts[:], head[1:])
		total := 0
		for _, c := range counts {
			total += int(c)
		}
		n -= total + 17
		if n < 0 {
			return jpegFormatError("DHT has wrong length")
		}
		vals, err := d.readFull(total)
		if err != nil {
			return err
		}
		if err := d.huff[tc][th].build(counts, vals); err != nil {
			return err
		}
	}
	return nil
}

// build derives the decoding tables from the code counts per length and the values.
func (h *jhuffman) build(counts [jMaxCodeLength]byte, vals []byte) error {
	h.nCodes = 0
	var nCodes [jMaxCodeLength]int32
	for i := range nCodes {
		nCodes[i] = int32(counts[i])
		h.nCodes += nCodes[i]
	}
	if h.nCodes == 0 {
		return jpegFormatError("Huffman table has zero length")
	}
	if h.nCodes > jMaxNCodes || int(h.nCodes) != len(vals) {
		return jpegFormatError("Huffman table has excessive length")
	}
	copy(h.vals[:], vals)

	// Derive the look-up table.
	clear(h.lut[:])
	var x, code uint32
	for i := range jLutSize {
		code <<= 1
		for range nCodes[i] {
			// The codeLength is 1+i, so shift code by 8-(1+i) to
			// calculate the high bits for every 8-bit sequence
			// whose codeLength's high bits matches code.
			// The high 8 bits of lutValue are the encoded value.
			// The low 8 bits are 1 plus the codeLength.
			base := uint8(code << (7 - i))
			lutValue := uint16(h.vals[x])<<8 | uint16(2+i)
			for k := uint8(0); k < 1<<(7-i); k++ { //nolint:intrange // the bound depends on the row
				h.lut[base|k] = lutValue
			}
			code++
			x++
		}
	}

	// Derive minCodes, maxCodes, and valsIndices.
	var c, index int32
	for i, n := range nCodes {
		if n == 0 {
			h.minCodes[i] = -1
			h.maxCodes[i] = -1
			h.valsIndices[i] = -1
		} else {
			h.minCodes[i] = c
			h.maxCodes[i] = c + n - 1
			h.valsIndices[i] = index
			c += n
			index += n
		}
		c <<= 1
	}
	return nil
}

// decodeHuffman returns the next Huffman-coded value from the bit-stream,
// decoded according to h.
func (d *jpegDecoder) decodeHuffman(h *jhuffman) (uint8, error) {
	if h.nCodes == 0 {
		return 0, jpegFormatError("uninitialized Huffman table")
	}

	if d.bits.n < 8 {
		if err := d.ensureNBits(8); err != nil {
			if !errors.Is(err, errMissingFF00) && !errors.Is(err, errShortHuffmanData) {
				return 0, err
			}
			// There are no more bytes of data in this segment, but we may still
			// be able to read the next symbol out of the previously read bits.
			// First, undo the readByte that the ensureNBits call made.
			if d.nUnreadable != 0 {
				d.unreadByteStuffedByte()
			}
			goto slowPath
		}
	}
	if v := h.lut[(d.bits.a>>uint32(d.bits.n-jLutSize))&0xff]; v != 0 {
		n := (v & 0xff) - 1
		d.bits.n -= int32(n)
		d.bits.m >>= n
		return uint8(v >> 8), nil
	}

slowPath:
	for i, code := 0, int32(0); i < jMaxCodeLength; i++ {
		if d.bits.n == 0 {
			if err := d.ensureNBits(1); err != nil {
				return 0, err
			}
		}
		if d.bits.a&d.bits.m != 0 {
			code |= 1
		}
		d.bits.n--
		d.bits.m >>= 1
		if code <= h.maxCodes[i] {
			return h.vals[h.valsIndices[i]+code-h.minCodes[i]], nil
		}
		code <<= 1
	}
	return 0, jpegFormatError("bad Huffman code")
}

func (d *jpegDecoder) decodeBit() (bool, error) {
	if d.bits.n == 0 {
		if err := d.ensureNBits(1); err != nil {
			return false, err
		}
	}
	ret := d.bits.a&d.bits.m != 0
	d.bits.n--
	d.bits.m >>= 1
	return ret, nil
}

func (d *jpegDecoder) decodeBits(n int32) (uint32, error) {
	if d.bits.n < n {
		if err := d.ensureNBits(n); err != nil {
			return 0, err
		}
	}
	ret := d.bits.a >> uint32(d.bits.n-n)
	ret &= (1 << uint32(n)) - 1
	d.bits.n -= n
	d.bits.m >>= uint32(n)
	return ret, nil
}

// stdHuffman holds the code counts and values of the Annex K.3 tables, indexed by
// [class][table]: class 0 is DC, 1 is AC; table 0 is luminance, 1 is chrominance.
var stdHuffman = [2][2]struct {
	counts [jMaxCodeLength]byte
	vals   []byte
}{
	{
		{[16]byte{0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
		{[16]byte{0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0}, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
	},
	{
		{[16]byte{0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 125}, []byte{
			0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12,
			0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
			0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08,
			0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
			0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16,
			0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
			0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
			0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
			0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59,
			0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
			0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79,
			0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
			0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98,
			0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
			0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6,
			0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
			0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4,
			0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
			0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea,
			0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
			0xf9, 0xfa,
		}},
		{[16]byte{0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 119}, []byte{
			0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21,
			0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
			0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91,
			0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0,
			0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34,
			0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
			0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38,
			0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
			0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
			0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
			0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78,
			0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
			0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96,
			0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
			0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4,
			0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
			0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2,
			0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
			0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9,
			0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
			0xf9, 0xfa,
		}},
	},
}
