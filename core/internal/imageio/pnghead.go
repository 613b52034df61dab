package imageio

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
)

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// maxTextChunk is Pillow's MAX_TEXT_CHUNK: a larger decompressed text chunk is not read.
const maxTextChunk = 1 << 20

// inspectPNG reads the IHDR chunk and walks the chunk list for the metadata Pillow reads the
// orientation from. The walk only follows chunk lengths; pixel data is never inflated.
func inspectPNG(data []byte) (Header, error) {
	p := data[len(pngSignature):]
	if len(p) < 8+13 {
		return Header{}, refuse(CodeCorrupt, "the PNG header is truncated")
	}
	if binary.BigEndian.Uint32(p) != 13 || string(p[4:8]) != "IHDR" {
		return Header{}, refuse(CodeCorrupt, "the PNG does not start with a valid IHDR chunk")
	}
	ihdr := p[8:21]
	w, h := binary.BigEndian.Uint32(ihdr[0:4]), binary.BigEndian.Uint32(ihdr[4:8])
	depth, ctype, interlace := int(ihdr[8]), ihdr[9], ihdr[12]
	if w > 1<<31-1 || h > 1<<31-1 {
		return Header{}, refuse(CodeCorrupt, "the PNG size is out of range")
	}
	hd := Header{Format: FormatPNG, BitDepth: depth, Interlaced: interlace == 1}
	valid := false
	switch ctype {
	case 0:
		hd.ColorModel, valid = ModelGray, depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16
	case 2:
		hd.ColorModel, valid = ModelRGB, depth == 8 || depth == 16
	case 3:
		hd.ColorModel, valid = ModelPalette, depth == 1 || depth == 2 || depth == 4 || depth == 8
	case 4:
		hd.ColorModel, hd.HasAlpha, valid = ModelGrayAlpha, true, depth == 8 || depth == 16
	case 6:
		hd.ColorModel, hd.HasAlpha, valid = ModelRGBA, true, depth == 8 || depth == 16
	}
	if !valid || ihdr[10] != 0 || ihdr[11] != 0 || interlace > 1 {
		return Header{}, refuse(CodeCorrupt, fmt.Sprintf("the PNG IHDR is invalid (colour type %d, depth %d)", ctype, depth))
	}
	if depth == 16 {
		return Header{}, refuse(CodeColorModel, "16-bit PNG images are not supported")
	}
	var md metadata
	pngMetadata(p[8+13+4:], &md, &hd)
	o, err := md.orientation()
	if err != nil {
		return Header{}, err
	}
	hd.orient(int(w), int(h), o)
	return hd, nil
}

// pngMetadata walks the chunks after IHDR, in file order, recording what Pillow's PngStream
// stores in im.info; a later chunk overrides an earlier one as it does there. The walk stops
// quietly at IEND or at a truncated chunk: Decode reports truncation.
func pngMetadata(p []byte, md *metadata, hd *Header) {
	for len(p) >= 8 {
		n := uint64(binary.BigEndian.Uint32(p))
		typ := string(p[4:8])
		if n > uint64(len(p)-8) {
			return
		}
		body := p[8 : 8+n]
		switch typ {
		case "IEND":
			return
		case "tRNS":
			hd.HasAlpha = true
		case "eXIf":
			md.exif = append([]byte("Exif\x00\x00"), body...)
		case "tEXt":
			k, v, _ := bytes.Cut(body, []byte{0})
			pngText(md, k, v, true)
		case "zTXt":
			k, v, ok := bytes.Cut(body, []byte{0})
			if ok && len(v) > 0 && v[0] == 0 {
				if text, ok := inflateText(v[1:]); ok {
					pngText(md, k, text, false)
				}
			}
		case "iTXt":
			pngITXt(md, body)
		}
		if uint64(len(p)) < 12+n {
			return
		}
		p = p[12+n:]
	}
}

// pngText applies a tEXt (raw) or zTXt chunk: info[key] = value, where a tEXt "exif" keeps its
// bytes.
func pngText(md *metadata, k, v []byte, raw bool) {
	switch string(k) {
	case "exif":
		if raw {
			md.exif = bytes.Clone(v)
		}
	case "Raw profile type exif":
		md.rawExif, md.hasRaw = latin1(v), true
	case "XML:com.adobe.xmp":
		md.xmpText = latin1(v)
	}
}

// pngITXt applies an iTXt chunk as Pillow's chunk_iTXt does.
func pngITXt(md *metadata, body []byte) {
	k, r, ok := bytes.Cut(body, []byte{0})
	if !ok || len(r) < 2 {
		return
	}
	cf, cm, r := r[0], r[1], r[2:]
	parts := bytes.SplitN(r, []byte{0}, 3)
	if len(parts) < 3 {
		return
	}
	v := parts[2]
	if cf != 0 {
		if cm != 0 {
			return
		}
		text, ok := inflateText(v)
		if !ok {
			return
		}
		v = text
	}
	key := string(k)
	if key == "XML:com.adobe.xmp" {
		md.xmp = bytes.Clone(v)
		md.xmpText = string(v)
	}
	if key == "Raw profile type exif" {
		md.rawExif, md.hasRaw = string(v), true
	}
}

// inflateText decompresses a text chunk up to Pillow's limit.
func inflateText(b []byte) ([]byte, bool) {
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, false
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, maxTextChunk+1))
	if err != nil || len(out) > maxTextChunk {
		return nil, false
	}
	return out, true
}

// latin1 decodes ISO-8859-1 bytes.
func latin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}
