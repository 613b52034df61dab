package imageio

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// orientationTag is the TIFF/EXIF Orientation tag (0x0112).
const orientationTag = 0x0112

// metadata collects what Pillow's Image.getexif reads to find an image's orientation, with
// Pillow's override rules applied while the file is walked: info["exif"], the PNG
// "Raw profile type exif" text, and the XMP packets.
type metadata struct {
	exif    []byte // info["exif"], nil when absent
	rawExif string // info["Raw profile type exif"], used only when exif is absent
	hasRaw  bool
	xmpText string // info["XML:com.adobe.xmp"] (a PNG text chunk)
	xmp     []byte // info["xmp"] (JPEG APP1 XMP, PNG iTXt XMP)
}

// orientation returns the EXIF orientation Pillow's ImageOps.exif_transpose would apply (1 when
// none), or an error where Pillow's getexif raises.
func (m *metadata) orientation() (int, error) {
	data := m.exif
	if data == nil && m.hasRaw {
		// Image.getexif: bytes.fromhex("".join(raw.split("\n")[3:])); a bad hex string raises.
		lines := strings.Split(m.rawExif, "\n")
		if len(lines) > 3 {
			joined := strings.Join(lines[3:], "")
			decoded, err := hexFromPython(joined)
			if err != nil {
				return 0, refuse(CodeCorrupt, "the EXIF text profile is not hexadecimal")
			}
			data = decoded
		} else {
			data = []byte{}
		}
	}
	present, value := false, 0
	if data != nil {
		var err error
		present, value, err = tiffOrientation(data)
		if err != nil {
			return 0, err
		}
	}
	if !present {
		// The XMP fallback: the first tiff:Orientation="d" or tiff:Orientation>d.
		if m.xmpText != "" {
			if d, ok := xmpOrientation([]byte(m.xmpText)); ok {
				return methodOrIdentity(d), nil
			}
		} else if len(m.xmp) > 0 {
			if d, ok := xmpOrientation(m.xmp); ok {
				return methodOrIdentity(d), nil
			}
		}
		return 1, nil
	}
	return methodOrIdentity(value), nil
}

// methodOrIdentity maps an orientation value to itself when exif_transpose acts on it (2..8),
// else to 1.
func methodOrIdentity(v int) int {
	if v >= 2 && v <= 8 {
		return v
	}
	return 1
}

// hexFromPython is bytes.fromhex: hex digit pairs, ASCII whitespace allowed between pairs.
func hexFromPython(s string) ([]byte, error) {
	var b strings.Builder
	for i := range len(s) {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\r', '\v', '\f':
			if b.Len()%2 != 0 {
				return nil, hex.ErrLength
			}
		default:
			b.WriteByte(c)
		}
	}
	return hex.DecodeString(b.String())
}

// xmpOrientation finds the regexp tiff:Orientation(="|>)([0-9]) in an XMP packet.
func xmpOrientation(p []byte) (int, bool) {
	const key = "tiff:Orientation"
	for i := 0; ; {
		j := bytes.Index(p[i:], []byte(key))
		if j < 0 {
			return 0, false
		}
		k := i + j + len(key)
		switch {
		case k+2 < len(p) && p[k] == '=' && p[k+1] == '"' && isDigit(p[k+2]):
			return int(p[k+2] - '0'), true
		case k+1 < len(p) && p[k] == '>' && isDigit(p[k+1]):
			return int(p[k+1] - '0'), true
		}
		i = k
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// tiffOrientation reads the Orientation tag of IFD0 the way Pillow's Exif.load and
// ImageFileDirectory_v2 do: present reports whether the tag is in the directory (which
// disables the XMP fallback); value is its number when it is one integer.
func tiffOrientation(data []byte) (present bool, value int, err error) {
	for bytes.HasPrefix(data, []byte("Exif\x00\x00")) {
		data = data[6:]
	}
	if len(data) == 0 {
		return false, 0, nil
	}
	// ImageFileDirectory_v2(head) raises SyntaxError on an unknown header, and so does
	// load_image: the reference refuses such a file.
	if len(data) < 8 {
		return false, 0, refuse(CodeCorrupt, "the EXIF block is truncated")
	}
	var bo binary.ByteOrder
	switch string(data[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return false, 0, refuse(CodeCorrupt, "the EXIF block is not a TIFF structure (no byte order mark)")
	}
	magic := string(data[2:4])
	if m := [2]byte{data[2], data[3]}; !(m == [2]byte{0, 0x2a} || m == [2]byte{0x2a, 0} ||
		(m == [2]byte{0, 0x2b} && bo == binary.BigEndian) || (m == [2]byte{0x2b, 0} && bo == binary.LittleEndian)) {
		return false, 0, refuse(CodeCorrupt, "the EXIF block is not a TIFF structure (no TIFF magic number)")
	}
	big := magic[0] == 0x2b || magic[1] == 0x2b
	var next uint64
	if big {
		if len(data) < 16 {
			// Pillow reads 8 header bytes and then unpacks 8 more for the offset: it raises.
			return false, 0, refuse(CodeCorrupt, "the BigTIFF EXIF block is truncated")
		}
		next = bo.Uint64(data[8:16])
	} else {
		next = uint64(bo.Uint32(data[4:8]))
	}
	// From here on Pillow warns and stops rather than raising.
	if next >= uint64(len(data)) {
		return false, 0, nil
	}
	p := data[next:]
	entrySize, countSize := 12, 2
	if big {
		entrySize, countSize = 20, 8
	}
	if len(p) < countSize {
		return false, 0, nil
	}
	var n uint64
	if big {
		n = bo.Uint64(p)
	} else {
		n = uint64(bo.Uint16(p))
	}
	p = p[countSize:]
	for range n {
		if len(p) < entrySize {
			return present, value, nil
		}
		e := p[:entrySize]
		p = p[entrySize:]
		tag, typ := bo.Uint16(e[0:2]), bo.Uint16(e[2:4])
		var count uint64
		var inline []byte
		if big {
			count, inline = bo.Uint64(e[4:12]), e[12:20]
		} else {
			count, inline = uint64(bo.Uint32(e[4:8])), e[8:12]
		}
		unit, ok := tiffTypeSize[typ]
		if !ok {
			continue // Pillow skips unknown types
		}
		if count > 1<<32 {
			continue
		}
		size := count * unit
		var val []byte
		if size > uint64(len(inline)) {
			var off uint64
			if big {
				off = bo.Uint64(inline)
			} else {
				off = uint64(bo.Uint32(inline))
			}
			if off > uint64(len(data)) || size > uint64(len(data))-off {
				continue // "Possibly corrupt EXIF data": skipped
			}
			val = data[off : off+size]
		} else {
			val = inline[:size]
		}
		if len(val) == 0 || tag != orientationTag {
			continue
		}
		// A later duplicate entry overwrites an earlier one, as in Pillow's dict.
		present, value = true, 0
		if count == 1 {
			switch typ {
			case 3:
				value = int(bo.Uint16(val))
			case 8:
				value = int(int16(bo.Uint16(val)))
			case 4:
				value = int(bo.Uint32(val))
			case 9:
				value = int(int32(bo.Uint32(val)))
			}
		}
	}
	return present, value, nil
}

// tiffTypeSize is the unit size of the TIFF field types Pillow can load.
var tiffTypeSize = map[uint16]uint64{
	1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4, 16: 8, 17: 8, 18: 8,
}
