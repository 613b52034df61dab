// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// This file is derived from Go's image/jpeg (huffman.go and the byte reader of reader.go),
// BSD licence above. Iris changes: it reads from a byte slice held in memory;
// missing tables 0 and 1 fall back to the standard tables of Annex K.3, as libjpeg-turbo does
// (jstdhuff.c) for Motion-JPEG frames; and, for speed, bits come through a 64-bit buffer
// refilled several bytes at a time, with 9-bit look-up tables (one also decoding AC
// magnitudes, as stb_image does). The decoded values, the errors and the position after each
// entropy-coded segment are those of Go's byte-at-a-time reader and 8-bit table, even for
// corrupt data and invalid tables.

package imageio

// jMaxCodeLength is the maximum (inclusive) number of bits in a Huffman code.
const jMaxCodeLength = 16

// jMaxNCodes is the maximum (inclusive) number of codes in a Huffman tree.
const jMaxNCodes = 256

// jLutSize is the log-2 size of the Huffman decoder's look-up tables. Nine bits resolve
// nearly every code of a photo's tables, and for AC codes most code+magnitude pairs too.
const jLutSize = 9

// jhuffman is a Huffman decoder, specified in section C.
type jhuffman struct {
	// nCodes is the number of codes in the tree.
	nCodes int32
	// lut is the look-up table for the next jLutSize bits in the bit-stream.
	// The high 8 bits of the uint16 are the encoded value. The low 8 bits
	// are the code length, or 0 if the code is longer than jLutSize bits.
	lut [1 << jLutSize]uint16
	// acLut decodes an AC code and its magnitude bits in one look-up when both fit in
	// jLutSize bits, and the EOB and ZRL codes: bits 0-3 hold the code length plus the
	// magnitude bits, 4-7 the code length, 8-11 the zero run, and the high 16 bits the
	// coefficient (0 for EOB and ZRL). 0 means the slow path.
	acLut [1 << jLutSize]int32
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

// jbits holds the unprocessed bits that have been taken from the byte-stream. The n most
// significant bits of a are the unread bits, MSB first. The bits below them are either zero
// or copies of the entropy-coded bytes that follow (a refill may load more than it counts),
// so a refill can OR new bytes in.
type jbits struct {
	a    uint64
	n    int
	stop error // why no more bytes can be counted: nil, errShortHuffmanData or errMissingFF00
	// start is the position of the entropy-coded segment's first byte, so that rewind does not
	// mistake a byte before it for half of a stuffed 0xff00.
	start int
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
	return x, nil
}

// readFull returns the next n bytes. It does not care about byte stuffing.
func (d *jpegDecoder) readFull(n int) ([]byte, error) {
	if n > len(d.data)-d.pos {
		d.pos = len(d.data)
		return nil, errUnexpectedEOF
	}
	b := d.data[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

// resetBits starts an entropy-coded segment at d.pos.
func (d *jpegDecoder) resetBits() {
	d.bits = jbits{start: d.pos}
}

// fill counts more entropy-coded bytes into d.bits, up to at least 56 bits, stopping before
// a marker (0xff not followed by 0x00) or the end of the data. The bits of the stream are
// the same whatever the refill does: a byte is only counted once every byte before it is.
func (d *jpegDecoder) fill() {
	b := &d.bits
	if b.stop != nil || b.n > 56 {
		return
	}
	if d.pos+8 <= len(d.data) {
		// Eight bytes without an 0xff need no unstuffing: count as many whole bytes as fit.
		v := uint64(d.data[d.pos])<<56 | uint64(d.data[d.pos+1])<<48 | uint64(d.data[d.pos+2])<<40 |
			uint64(d.data[d.pos+3])<<32 | uint64(d.data[d.pos+4])<<24 | uint64(d.data[d.pos+5])<<16 |
			uint64(d.data[d.pos+6])<<8 | uint64(d.data[d.pos+7])
		if hasNoFF(v) {
			b.a |= v >> uint(b.n)
			d.pos += (63 - b.n) >> 3
			b.n |= 56
			return
		}
	}
	for b.n <= 56 {
		if d.pos >= len(d.data) {
			b.stop = errShortHuffmanData
			return
		}
		x := d.data[d.pos]
		if x == 0xff {
			if d.pos+1 >= len(d.data) {
				b.stop = errShortHuffmanData
				return
			}
			if d.data[d.pos+1] != 0x00 {
				b.stop = errMissingFF00
				return
			}
			d.pos += 2
		} else {
			d.pos++
		}
		b.a |= uint64(x) << uint(56-b.n)
		b.n += 8
	}
}

// hasNoFF reports whether no byte of v is 0xff (the classic has-zero-byte test on ^v).
func hasNoFF(v uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	w := ^v
	return (w-lo)&^w&hi == 0
}

// rewind ends an entropy-coded segment: d.pos goes back to just after the last byte with a
// consumed bit, where the byte-at-a-time reader this replaces left it. Whole unread bytes
// are given back, a stuffed 0xff as its two bytes.
func (d *jpegDecoder) rewind() {
	for k := d.bits.n >> 3; k > 0; k-- {
		if d.pos-2 >= d.bits.start && d.data[d.pos-1] == 0x00 && d.data[d.pos-2] == 0xff {
			d.pos -= 2
		} else {
			d.pos--
		}
	}
	d.bits = jbits{}
}

// need makes at least n bits available, or returns the reason they are not.
func (d *jpegDecoder) need(n int) error {
	if d.bits.n < n {
		d.fill()
		if d.bits.n < n {
			return d.bits.stop
		}
	}
	return nil
}

// consume drops n available bits.
func (b *jbits) consume(n int) {
	b.a <<= uint(n)
	b.n -= n
}

// extend is EXTEND (section F.2.2.1) of the t-bit value x.
func extend(x uint32, t uint8) int32 {
	if t == 0 {
		return 0
	}
	if x < 1<<(t-1) {
		return int32(x) + (-1 << t) + 1
	}
	return int32(x)
}

// receiveExtend is the composition of RECEIVE and EXTEND, specified in section
// F.2.2.1.
func (d *jpegDecoder) receiveExtend(t uint8) (int32, error) {
	if err := d.need(int(t)); err != nil {
		return 0, err
	}
	x := uint32(d.bits.a >> (64 - uint(t))) // a shift by 64 gives 0 for t == 0
	d.bits.consume(int(t))
	return extend(x, t), nil
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

	// The 8-bit table of Go's decoder, whose results the wider tables reproduce: for an
	// over-subscribed (invalid) table, its later codes overwrite earlier ones, which the
	// canonical decoding of slowHuffman would not do.
	var lut8 [256]uint16
	var x, code uint32
	for i := range 8 {
		code <<= 1
		for range nCodes[i] {
			// The codeLength is 1+i, so shift code by 8-(1+i) to
			// calculate the high bits for every 8-bit sequence
			// whose codeLength's high bits matches code.
			base := uint8(code << (7 - i))
			lutValue := uint16(h.vals[x])<<8 | uint16(1+i)
			for k := uint8(0); k < 1<<(7-i); k++ { //nolint:intrange // the bound depends on the row
				lut8[base|k] = lutValue
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

	// Each jLutSize-bit prefix gets what the 8-bit table, or failing it the canonical
	// bit-by-bit search, decodes from it.
	for p := range uint32(1 << jLutSize) {
		v := lut8[p>>(jLutSize-8)]
		if v == 0 {
			code := int32(0)
			for i := range jLutSize {
				code |= int32(p>>(jLutSize-1-i)) & 1
				if code <= h.maxCodes[i] {
					v = uint16(h.vals[h.valsIndices[i]+code-h.minCodes[i]])<<8 | uint16(i+1)
					break
				}
				code <<= 1
			}
		}
		h.lut[p] = v
		h.acLut[p] = 0
		l := uint32(v & 0xff)
		s := uint32(v>>8) & 0x0f
		r := uint32(v>>8) >> 4
		switch {
		case l == 0:
		case s == 0 && (r == 0 || r == 0x0f):
			// EOB or ZRL: the coefficient field stays 0, which no magnitude decodes to.
			h.acLut[p] = int32(r<<8 | l<<4 | l)
		case s != 0 && l+s <= jLutSize:
			mag := (p >> (jLutSize - l - s)) & (1<<s - 1)
			h.acLut[p] = extend(mag, uint8(s))<<16 | int32(r<<8|l<<4|(l+s))
		}
	}
	return nil
}

// decodeHuffman returns the next Huffman-coded value from the bit-stream,
// decoded according to h.
func (d *jpegDecoder) decodeHuffman(h *jhuffman) (uint8, error) {
	if h.nCodes == 0 {
		return 0, jpegFormatError("uninitialized Huffman table")
	}
	if d.bits.n < jLutSize {
		d.fill()
		if d.bits.n < jLutSize {
			return d.decodeHuffmanShort(h)
		}
	}
	v := h.lut[d.bits.a>>(64-jLutSize)]
	if v == 0 {
		return d.slowHuffman(h)
	}
	d.bits.consume(int(v & 0xff))
	return uint8(v >> 8), nil
}

// decodeHuffmanShort decodes with fewer than jLutSize bits left before a marker or the end
// of the data. The decoder this replaces used its 8-bit table when 8 bits were there, and
// the bit-by-bit search otherwise; the table, read with the missing bits as zeros, agrees with
// it as long as the code it finds is within the available bits.
func (d *jpegDecoder) decodeHuffmanShort(h *jhuffman) (uint8, error) {
	if d.bits.n < 8 {
		return d.slowHuffman(h)
	}
	v := h.lut[d.bits.a>>(64-jLutSize)&^(1<<(jLutSize-d.bits.n)-1)]
	if v == 0 {
		return d.slowHuffman(h)
	}
	if int(v&0xff) > d.bits.n {
		return 0, d.bits.stop
	}
	d.bits.consume(int(v & 0xff))
	return uint8(v >> 8), nil
}

// slowHuffman decodes a code bit by bit, canonically (section F.2.2.3).
func (d *jpegDecoder) slowHuffman(h *jhuffman) (uint8, error) {
	for i, code := 0, int32(0); i < jMaxCodeLength; i++ {
		if d.bits.n == 0 {
			if err := d.need(1); err != nil {
				return 0, err
			}
		}
		code |= int32(d.bits.a >> 63)
		d.bits.consume(1)
		if code <= h.maxCodes[i] {
			return h.vals[h.valsIndices[i]+code-h.minCodes[i]], nil
		}
		code <<= 1
	}
	return 0, jpegFormatError("bad Huffman code")
}

func (d *jpegDecoder) decodeBit() (bool, error) {
	if d.bits.n == 0 {
		if err := d.need(1); err != nil {
			return false, err
		}
	}
	ret := d.bits.a>>63 != 0
	d.bits.consume(1)
	return ret, nil
}

func (d *jpegDecoder) decodeBits(n int32) (uint32, error) {
	if err := d.need(int(n)); err != nil {
		return 0, err
	}
	ret := uint32(d.bits.a >> (64 - uint(n)))
	d.bits.consume(int(n))
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
