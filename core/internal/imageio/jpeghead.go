package imageio

import (
	"bytes"
	"fmt"
)

// jpegHeader is the frame description Inspect parses and Decode checks against.
type jpegHeader struct {
	sof         byte // the SOFn marker
	width       int
	height      int
	nComp       int
	rgb         bool // libjpeg's colour-space guess says RGB (no YCbCr conversion)
	adobe       bool
	adobeXform  byte
	comps       [4]struct{ id, h, v, tq byte }
	hmax, vmax  int
	progressive bool
}

// inspectJPEG walks the markers up to the first SOS, as Pillow's JpegImageFile._open does,
// reading the frame header and the APP1 segments Pillow takes the orientation from.
func inspectJPEG(data []byte) (Header, error) {
	var (
		jh     jpegHeader
		md     metadata
		sawSOF bool
		jfif   bool
	)
	p := 2
	for {
		// Find the next marker: skip anything that is not 0xFF, then fill bytes.
		for p < len(data) && data[p] != 0xff {
			p++
		}
		for p < len(data) && data[p] == 0xff {
			p++
		}
		if p >= len(data) {
			return Header{}, refuse(CodeCorrupt, "the JPEG ends before its first scan")
		}
		m := data[p]
		p++
		switch {
		case m == 0x00 || m == 0x01 || (m >= 0xd0 && m <= 0xd8):
			continue // stuffed byte, TEM, RSTn, SOI: no length
		case m == 0xd9:
			return Header{}, refuse(CodeCorrupt, "the JPEG's end-of-image marker comes before its first scan")
		}
		if p+2 > len(data) {
			return Header{}, refuse(CodeCorrupt, "the JPEG header is truncated (a marker without its length)")
		}
		n := int(data[p])<<8 | int(data[p+1])
		if n < 2 || p+n > len(data) {
			return Header{}, refuse(CodeCorrupt, "the JPEG header is truncated (a segment runs past the end, or its length is under 2)")
		}
		seg := data[p+2 : p+n]
		p += n
		switch {
		case m == 0xda: // SOS
			if !sawSOF {
				return Header{}, refuse(CodeCorrupt, "the JPEG has a scan before its frame header")
			}
			return jh.header(&md, jfif)
		case m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
			if sawSOF {
				return Header{}, refuse(CodeCorrupt, "the JPEG has two frame headers")
			}
			sawSOF = true
			if err := jh.parseSOF(m, seg); err != nil {
				return Header{}, err
			}
		case m == 0xe0:
			// libjpeg's examine_app0 wants the full 14-byte JFIF header.
			if len(seg) >= 14 && bytes.HasPrefix(seg, []byte("JFIF\x00")) {
				jfif = true
			}
		case m == 0xe1:
			switch {
			case bytes.HasPrefix(seg, []byte("Exif\x00\x00")):
				if md.exif == nil {
					md.exif = bytes.Clone(seg)
				} else {
					md.exif = append(md.exif, seg[6:]...)
				}
			case bytes.HasPrefix(seg, []byte("http://ns.adobe.com/xap/1.0/\x00")):
				_, md.xmp, _ = bytes.Cut(seg, []byte{0})
			}
		case m == 0xee:
			if len(seg) >= 12 && bytes.HasPrefix(seg, []byte("Adobe")) {
				jh.adobe, jh.adobeXform = true, seg[11]
			}
		}
	}
}

// parseSOF reads a frame header.
func (jh *jpegHeader) parseSOF(m byte, seg []byte) error {
	switch m {
	case 0xc0, 0xc1, 0xc2:
	case 0xc3, 0xc7, 0xcb, 0xcf:
		return refuse(CodeFormat, "lossless JPEG is not supported")
	case 0xc5, 0xc6, 0xcd, 0xce:
		return refuse(CodeFormat, "hierarchical JPEG is not supported")
	default:
		return refuse(CodeFormat, "arithmetic-coded JPEG is not supported")
	}
	if len(seg) < 6 {
		return refuse(CodeCorrupt, "the JPEG frame header is truncated")
	}
	jh.sof, jh.progressive = m, m == 0xc2
	jh.height = int(seg[1])<<8 | int(seg[2])
	jh.width = int(seg[3])<<8 | int(seg[4])
	jh.nComp = int(seg[5])
	if seg[0] != 8 {
		return refuse(CodeFormat, fmt.Sprintf("%d-bit JPEG is not supported", seg[0]))
	}
	if len(seg) < 6+3*jh.nComp {
		return refuse(CodeCorrupt, fmt.Sprintf("the JPEG frame header is too short for its %d components", jh.nComp))
	}
	switch jh.nComp {
	case 1, 3:
	case 4:
		return refuse(CodeColorModel, "CMYK and YCCK JPEG images are not supported")
	default:
		return refuse(CodeColorModel, fmt.Sprintf("JPEG images with %d components are not supported", jh.nComp))
	}
	jh.hmax, jh.vmax = 1, 1
	for i := range jh.nComp {
		c := &jh.comps[i]
		c.id, c.h, c.v, c.tq = seg[6+3*i], seg[7+3*i]>>4, seg[7+3*i]&15, seg[8+3*i]
		if c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 || c.tq > 3 {
			return refuse(CodeCorrupt, "the JPEG frame header has bad sampling factors")
		}
		for j := range i {
			if jh.comps[j].id == c.id {
				return refuse(CodeCorrupt, "the JPEG frame header repeats a component")
			}
		}
		jh.hmax, jh.vmax = max(jh.hmax, int(c.h)), max(jh.vmax, int(c.v))
	}
	for i := range jh.nComp {
		// libjpeg-turbo upsamples integral ratios only (JERR_FRACT_SAMPLE_NOTIMPL).
		if c := jh.comps[i]; jh.hmax%int(c.h) != 0 || jh.vmax%int(c.v) != 0 {
			return refuse(CodeFormat, "the JPEG uses a fractional chroma sampling ratio")
		}
	}
	return nil
}

// header finishes the Header after the frame and APP segments are known.
func (jh *jpegHeader) header(md *metadata, jfif bool) (Header, error) {
	hd := Header{Format: FormatJPEG, BitDepth: 8, Progressive: jh.progressive, jpeg: jh}
	if jh.nComp == 1 {
		hd.ColorModel = ModelGray
	} else {
		// jdapimin.c default_decompress_parms for three components.
		switch {
		case jfif:
			jh.rgb = false
		case jh.adobe:
			jh.rgb = jh.adobeXform == 0
		default:
			c := jh.comps
			jh.rgb = !(c[0].id == 1 && c[1].id == 2 && c[2].id == 3) && c[0].id == 'R' && c[1].id == 'G' && c[2].id == 'B'
		}
		hd.ColorModel = ModelYCbCr
		if jh.rgb {
			hd.ColorModel = ModelRGB
		}
	}
	o, err := md.orientation()
	if err != nil {
		return Header{}, err
	}
	hd.orient(jh.width, jh.height, o)
	return hd, nil
}
