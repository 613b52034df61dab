package imageio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"

	// Inflate dominates PNG decoding; klauspost's is faster than compress/zlib at the same
	// semantics (checksum errors included).
	"github.com/klauspost/compress/zlib"
)

// PNG decoding with Pillow's acceptance rules (PngImagePlugin.py and ZipDecode.c), which differ
// from image/png's: checksums of chunks before the first IDAT are verified, those of IDAT and
// later chunks are not; the image data is the run of consecutive IDAT chunks, decoding stops once
// every row is inflated (a missing zlib checksum or IEND is fine, a wrong checksum is not);
// unknown chunks are skipped; palette indices past the PLTE entries are black.

// maxDrain bounds how far past the last row Decode inflates to reach the zlib checksum.
const maxDrain = 1 << 20

// pngInfo is the part of the chunk stream decoding needs.
type pngInfo struct {
	w, h         int
	depth, ctype int
	interlace    bool
	palette      [256][3]byte
	idat         []byte
	channels     int // samples per pixel
	// alpha are the palette entries' alphas from a tRNS chunk before the image data (255 where
	// it says nothing), read with overWhite: composite RGBA and palette pixels on white.
	alpha     [256]byte
	trns      int // alphas the tRNS chunk gave
	overWhite bool
}

func decodePNG(ctx context.Context, data []byte, overWhite bool) (*RGB, error) {
	info, err := readPNGChunks(data)
	if err != nil {
		return nil, err
	}
	info.overWhite = overWhite
	zr, err := zlib.NewReader(bytes.NewReader(info.idat))
	if err != nil {
		return nil, refuse(CodeCorrupt, "the PNG image data is not a zlib stream")
	}
	img := &RGB{}
	img.Reset(info.w, info.h)
	if !info.interlace {
		if err := info.pass(ctx, zr, img, 0, 0, 1, 1); err != nil {
			return nil, err
		}
	} else {
		for _, p := range adam7 {
			if err := info.pass(ctx, zr, img, p[0], p[1], p[2], p[3]); err != nil {
				return nil, err
			}
		}
	}
	// Pillow's inflate sees a wrong checksum that directly follows the data; a missing one it
	// never waits for.
	if _, err := io.CopyN(io.Discard, zr, maxDrain); errors.Is(err, zlib.ErrChecksum) {
		return nil, refuse(CodeCorrupt, "the PNG image data fails its checksum")
	}
	return img, nil
}

// adam7 lists the interlace passes: x0, y0, dx, dy.
var adam7 = [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}}

// readPNGChunks walks the chunk stream.
func readPNGChunks(data []byte) (*pngInfo, error) {
	p := len(pngSignature)
	var info pngInfo
	for i := range info.alpha {
		info.alpha[i] = 255
	}
	var idat [][]byte
	sawIHDR, inIDAT, doneIDAT := false, false, false
	for {
		if len(data)-p < 8 {
			break
		}
		n := int(binary.BigEndian.Uint32(data[p:]))
		typ := string(data[p+4 : p+8])
		if n < 0 || n > len(data)-p-8 {
			if typ == "IDAT" && !doneIDAT {
				idat = append(idat, data[p+8:]) // a truncated last IDAT: use what is there
			} else if !inIDAT && !doneIDAT {
				return nil, refuse(CodeCorrupt, "the PNG is truncated")
			}
			break
		}
		body := data[p+8 : p+8+n]
		end := p + 8 + n + 4
		if typ == "IDAT" {
			if doneIDAT {
				// A second run of IDAT chunks is not read.
			} else {
				inIDAT = true
				idat = append(idat, body)
			}
		} else {
			if inIDAT {
				inIDAT, doneIDAT = false, true
			}
			if !doneIDAT {
				if end > len(data) || crc32.Update(crc32.ChecksumIEEE([]byte(typ)), crc32.IEEETable, body) != binary.BigEndian.Uint32(data[end-4:]) {
					return nil, refuse(CodeCorrupt, "a PNG chunk fails its checksum")
				}
			}
			switch typ {
			case "IHDR":
				if sawIHDR || n != 13 {
					return nil, refuse(CodeCorrupt, "the PNG has a bad IHDR")
				}
				sawIHDR = true
				info.w, info.h = int(binary.BigEndian.Uint32(body)), int(binary.BigEndian.Uint32(body[4:]))
				info.depth, info.ctype, info.interlace = int(body[8]), int(body[9]), body[12] == 1
			case "PLTE":
				for i := 0; i < n/3 && i < 256; i++ {
					info.palette[i] = [3]byte{body[3*i], body[3*i+1], body[3*i+2]}
				}
			case "tRNS":
				// PngStream.chunk_tRNS keeps, for a palette image, one alpha per entry (or the
				// index of its one transparent entry: the same alphas); convert("RGBA") applies
				// them (putpalettealphas)
				if !doneIDAT && info.ctype == 3 {
					for i := 0; i < n && i < 256; i++ {
						info.alpha[i] = body[i]
					}
					info.trns = n
				}
			case "IEND":
				doneIDAT = true
			}
		}
		if typ == "IEND" || end > len(data) {
			break
		}
		p = end
	}
	if !sawIHDR || info.w <= 0 || info.h <= 0 {
		return nil, refuse(CodeCorrupt, "the PNG has no valid IHDR")
	}
	if len(idat) == 0 {
		return nil, refuse(CodeCorrupt, "the PNG has no image data")
	}
	switch info.ctype {
	case 0, 3:
		info.channels = 1
	case 2:
		info.channels = 3
	case 4:
		info.channels = 2
	case 6:
		info.channels = 4
	default:
		return nil, refuse(CodeCorrupt, "the PNG colour type is invalid")
	}
	if info.depth != 8 && (info.ctype == 2 || info.ctype == 4 || info.ctype == 6) ||
		info.depth != 1 && info.depth != 2 && info.depth != 4 && info.depth != 8 {
		return nil, refuse(CodeColorModel, "the PNG bit depth is not supported")
	}
	info.idat = bytes.Join(idat, nil)
	return &info, nil
}

// pass inflates, unfilters and converts one interlace pass (or the whole image).
func (info *pngInfo) pass(ctx context.Context, zr io.Reader, img *RGB, x0, y0, dx, dy int) error {
	pw := (info.w - x0 + dx - 1) / dx
	ph := (info.h - y0 + dy - 1) / dy
	if pw <= 0 || ph <= 0 {
		return nil
	}
	bitsPP := info.depth * info.channels
	rowBytes := (pw*bitsPP + 7) / 8
	bpp := max(bitsPP/8, 1)
	cur, prev := make([]byte, rowBytes+1), make([]byte, rowBytes+1)
	for r := range ph {
		if r%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if _, err := io.ReadFull(zr, cur); err != nil {
			if errors.Is(err, zlib.ErrChecksum) {
				return refuse(CodeCorrupt, "the PNG image data fails its checksum")
			}
			return refuse(CodeCorrupt, "the PNG image data is truncated or corrupt")
		}
		if err := unfilter(cur[0], cur[1:], prev[1:], bpp); err != nil {
			return err
		}
		info.convertRow(img, cur[1:], pw, x0, y0+r*dy, dx)
		cur, prev = prev, cur
	}
	return nil
}

// unfilter reverses a PNG row filter in place.
func unfilter(ft byte, cur, prev []byte, bpp int) error {
	switch ft {
	case 0:
	case 1:
		for i := bpp; i < len(cur); i++ {
			cur[i] += cur[i-bpp]
		}
	case 2:
		for i, p := range prev {
			cur[i] += p
		}
	case 3:
		for i := range cur {
			var a int
			if i >= bpp {
				a = int(cur[i-bpp])
			}
			cur[i] += byte((a + int(prev[i])) / 2)
		}
	case 4:
		for i := range cur {
			var a, c int
			if i >= bpp {
				a, c = int(cur[i-bpp]), int(prev[i-bpp])
			}
			b := int(prev[i])
			pa, pb, pc := abs(b-c), abs(a-c), abs(a+b-2*c)
			switch {
			case pa <= pb && pa <= pc:
				cur[i] += byte(a)
			case pb <= pc:
				cur[i] += byte(b)
			default:
				cur[i] += byte(c)
			}
		}
	default:
		return refuse(CodeCorrupt, "the PNG uses an unknown row filter")
	}
	return nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// overWhite is PIL's paste of c on white through a mask of a (paste_mask_L's BLEND with
// DIV255: (t + 128 + ((t + 128) >> 8)) >> 8 of t = 255*(255-a) + c*a).
func overWhite(c, a byte) byte {
	t := 255*(255-int(a)) + int(c)*int(a) + 128
	return byte(((t >> 8) + t) >> 8)
}

// convertRow writes pw pixels of an unfiltered row to img row y, columns x0, x0+dx, ...
// as PIL's convert("RGB") sees them: grey scaled to 8 bits and replicated, palette looked up,
// alpha dropped; with overWhite, RGBA and palette pixels composited on white by their alpha.
func (info *pngInfo) convertRow(img *RGB, row []byte, pw, x0, y, dx int) {
	out := img.Row(y)
	put := func(i int, r, g, b byte) {
		x := 3 * (x0 + i*dx)
		out[x], out[x+1], out[x+2] = r, g, b
	}
	if info.overWhite && (info.ctype == 3 && info.trns > 0 || info.ctype == 6) {
		info.convertOverWhite(row, pw, put)
		return
	}
	switch {
	case info.depth < 8:
		scale := byte(255 / (1<<info.depth - 1))
		per := 8 / info.depth
		mask := byte(1<<info.depth - 1)
		for i := range pw {
			v := row[i/per] >> (8 - info.depth*(i%per+1)) & mask
			if info.ctype == 3 {
				p := info.palette[v]
				put(i, p[0], p[1], p[2])
			} else {
				v *= scale
				put(i, v, v, v)
			}
		}
	case info.ctype == 0 || info.ctype == 4:
		for i := range pw {
			v := row[i*info.channels]
			put(i, v, v, v)
		}
	case info.ctype == 3:
		for i := range pw {
			p := info.palette[row[i]]
			put(i, p[0], p[1], p[2])
		}
	default: // RGB, RGBA
		c := info.channels
		for i := range pw {
			put(i, row[i*c], row[i*c+1], row[i*c+2])
		}
	}
}

// convertOverWhite is convertRow for a palette image with a tRNS chunk (its entries' alphas) or
// an 8-bit RGBA image, composited on white.
func (info *pngInfo) convertOverWhite(row []byte, pw int, put func(i int, r, g, b byte)) {
	if info.ctype == 6 {
		for i := range pw {
			px := row[4*i : 4*i+4]
			a := px[3]
			put(i, overWhite(px[0], a), overWhite(px[1], a), overWhite(px[2], a))
		}
		return
	}
	per := 8 / info.depth
	mask := byte(1<<info.depth - 1)
	for i := range pw {
		v := row[i/per] >> (8 - info.depth*(i%per+1)) & mask
		p, a := info.palette[v], info.alpha[v]
		put(i, overWhite(p[0], a), overWhite(p[1], a), overWhite(p[2], a))
	}
}
