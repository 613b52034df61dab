package imageio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"strings"
	"testing"
)

func pngChunk(typ string, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	b = append(b, typ...)
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.Update(crc32.ChecksumIEEE([]byte(typ)), crc32.IEEETable, body))
}

// pngHeader is a PNG signature and an IHDR for a w×h image.
func pngHeader(w, h uint32, depth, ctype byte) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, depth, ctype, 0, 0, 0)
	return append(append([]byte{}, pngSignature...), pngChunk("IHDR", ihdr)...)
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/decode/" + name)
	if err != nil {
		t.Fatalf("reading fixture: %v", err)
	}
	return b
}

// jpegSeg is a JPEG marker segment: the marker, the length, the body.
func jpegSeg(marker byte, body []byte) []byte {
	return append([]byte{0xff, marker, byte((len(body) + 2) >> 8), byte(len(body) + 2)}, body...)
}

// sof is a frame header body: 8 bits a sample, 16x8 pixels, and the components (id, sampling
// factors h<<4|v, quantisation table).
func sof(comps ...[3]byte) []byte {
	b := []byte{8, 0, 8, 0, 16, byte(len(comps))}
	for _, c := range comps {
		b = append(b, c[:]...)
	}
	return b
}

// comps420 is a 4:2:0 YCbCr frame's components.
var comps420 = [][3]byte{{1, 0x22, 0}, {2, 0x11, 1}, {3, 0x11, 1}}

// jpegFile is SOI, the segments, and a scan header; Inspect stops at the scan.
func jpegFile(segs ...[]byte) []byte {
	b := []byte{0xff, 0xd8}
	for _, s := range segs {
		b = append(b, s...)
	}
	return append(b, jpegSeg(0xda, []byte{1, 1, 0, 0, 63, 0})...)
}

// exifJPEG is a valid 4:2:0 JPEG header whose APP1 Exif segment holds tiff.
func exifJPEG(tiff []byte) []byte {
	return jpegFile(jpegSeg(0xe1, append([]byte("Exif\x00\x00"), tiff...)), jpegSeg(0xc0, sof(comps420...)))
}

// pngWith is a valid 10x10 RGB PNG header (ihdr edited by edit) followed by chunks.
func pngWith(edit func(ihdr []byte), chunks ...[]byte) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, 10)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 10)
	ihdr = append(ihdr, 8, 2, 0, 0, 0)
	if edit != nil {
		edit(ihdr)
	}
	b := append(append([]byte{}, pngSignature...), pngChunk("IHDR", ihdr)...)
	for _, c := range chunks {
		b = append(b, c...)
	}
	return b
}

// Each refusal case breaks one thing of a valid header (or sets one limit) and names the check
// meant to refuse it by a fragment of its message; `go run ./scripts/mutate -terms FILE` on
// inspect.go, pnghead.go, jpeghead.go and exif.go disables each check in turn.
func TestInspectRefusals(t *testing.T) {
	jpeg := fixture(t, "j64x64_422_q75_prog_noise.jpg")
	lim := Limits{MaxBytes: 1 << 20, MaxPixels: 1 << 20, MinSide: 2, MaxAspect: 200}
	le := binary.LittleEndian
	tiffLE := func(magic string) []byte { return le.AppendUint32([]byte("II"+magic), 8) }
	for _, tc := range []struct {
		name string
		data []byte
		lim  Limits
		want Code
		msg  string
	}{
		{"empty", nil, lim, CodeEmpty, "the image has no bytes"},
		{"over max bytes", jpeg, Limits{MaxBytes: 100}, CodeTooLarge, "over the limit of 100"},
		{"unknown format", []byte("GIF89a......"), lim, CodeFormat, "neither PNG nor JPEG"},
		{"two bytes of JPEG", []byte{0xff, 0xd8}, lim, CodeCorrupt, "the image header is truncated"},
		{"JPEG without a third 0xFF", []byte{0xff, 0xd8, 0x00, 0x01}, lim, CodeFormat, "neither PNG nor JPEG"},
		{"PNG signature only", pngSignature[:5], lim, CodeCorrupt, "the image header is truncated"},
		{"truncated IHDR", pngHeader(10, 10, 8, 2)[:20], lim, CodeCorrupt, "the PNG header is truncated"},
		{"JPEG header cut before SOS", jpeg[:100], lim, CodeCorrupt, "the JPEG"},
		{"30000x30000 PNG bomb", pngHeader(30000, 30000, 8, 2), lim, CodeTooLarge, "over the limit of 1048576 pixels"},
		{"zero width", pngHeader(0, 10, 8, 2), lim, CodeEmpty, "the image is 0x10"},
		{"zero height", pngHeader(10, 0, 8, 2), lim, CodeEmpty, "the image is 10x0"},
		{"below min side", pngHeader(1, 10, 8, 2), lim, CodeTooSmall, "each side must be at least 2"},
		{"aspect over 200", pngHeader(2010, 10, 8, 2), lim, CodeAspect, "aspect ratio 201 over the limit of 200"},
		{"16-bit PNG", pngHeader(10, 10, 16, 2), lim, CodeColorModel, "16-bit PNG images are not supported"},
		{"bad PNG depth", pngHeader(10, 10, 3, 2), lim, CodeCorrupt, "the PNG IHDR is invalid (colour type 2, depth 3)"},
		{"CMYK JPEG", fixture(t, "j16x16_cmyk.jpg"), lim, CodeColorModel, "CMYK and YCCK JPEG images are not supported"},

		{"PNG IHDR length", append(append([]byte{}, pngSignature...), pngChunk("IHDR", make([]byte, 14))...), lim, CodeCorrupt, "does not start with a valid IHDR chunk"},
		{"PNG first chunk not IHDR", append(append([]byte{}, pngSignature...), pngChunk("IHDX", make([]byte, 13))...), lim, CodeCorrupt, "does not start with a valid IHDR chunk"},
		{"PNG width out of range", pngHeader(1<<31, 10, 8, 2), Limits{}, CodeCorrupt, "the PNG size is out of range"},
		{"PNG height out of range", pngHeader(10, 1<<31, 8, 2), Limits{}, CodeCorrupt, "the PNG size is out of range"},
		{"PNG compression method", pngWith(func(h []byte) { h[10] = 1 }), lim, CodeCorrupt, "the PNG IHDR is invalid"},
		{"PNG filter method", pngWith(func(h []byte) { h[11] = 1 }), lim, CodeCorrupt, "the PNG IHDR is invalid"},
		{"PNG interlace method", pngWith(func(h []byte) { h[12] = 2 }), lim, CodeCorrupt, "the PNG IHDR is invalid"},
		{"PNG EXIF not TIFF", pngWith(nil, pngChunk("eXIf", []byte("JUNKJUNKJUNK"))), lim, CodeCorrupt, "no byte order mark"},
		{"PNG EXIF profile not hex", pngWith(nil, pngChunk("tEXt", []byte("Raw profile type exif\x00\nexif\n8\nzz"))), lim, CodeCorrupt, "the EXIF text profile is not hexadecimal"},
		{"PNG EXIF profile odd digits", pngWith(nil, pngChunk("tEXt", []byte("Raw profile type exif\x00\nexif\n8\nabc def"))), lim, CodeCorrupt, "the EXIF text profile is not hexadecimal"},

		{"JPEG end before the scan", []byte{0xff, 0xd8, 0xff, 0xd9, 0xff, 0xc0, 0x00, 0x11}, lim, CodeCorrupt, "end-of-image marker comes before its first scan"},
		{"JPEG ends before the scan", []byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x02}, lim, CodeCorrupt, "the JPEG ends before its first scan"},
		{"JPEG marker without its length", []byte{0xff, 0xd8, 0xff, 0xe0, 0x00}, lim, CodeCorrupt, "a marker without its length"},
		{"JPEG segment length under 2", []byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x01, 0xff, 0xd9}, lim, CodeCorrupt, "a segment runs past the end, or its length is under 2"},
		{"JPEG segment past the end", []byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0, 0}, lim, CodeCorrupt, "a segment runs past the end"},
		{"JPEG scan before the frame", jpegFile(), lim, CodeCorrupt, "the JPEG has a scan before its frame header"},
		{"JPEG two frames", jpegFile(jpegSeg(0xc0, sof(comps420...)), jpegSeg(0xc2, sof(comps420...))), lim, CodeCorrupt, "the JPEG has two frame headers"},
		{"JPEG lossless", jpegFile(jpegSeg(0xc3, sof(comps420...))), lim, CodeFormat, "lossless JPEG is not supported"},
		{"JPEG hierarchical", jpegFile(jpegSeg(0xc5, sof(comps420...))), lim, CodeFormat, "hierarchical JPEG is not supported"},
		{"JPEG arithmetic", jpegFile(jpegSeg(0xc9, sof(comps420...))), lim, CodeFormat, "arithmetic-coded JPEG is not supported"},
		{"JPEG frame truncated", jpegFile(jpegSeg(0xc0, sof(comps420...)[:5])), lim, CodeCorrupt, "the JPEG frame header is truncated"},
		{"JPEG 12-bit", jpegFile(jpegSeg(0xc1, append([]byte{12}, sof(comps420...)[1:]...))), lim, CodeFormat, "12-bit JPEG is not supported"},
		{"JPEG frame short of its components", jpegFile(jpegSeg(0xc0, sof(comps420...)[:12])), lim, CodeCorrupt, "too short for its 3 components"},
		{"JPEG two components", jpegFile(jpegSeg(0xc0, sof(comps420[:2]...))), lim, CodeColorModel, "JPEG images with 2 components are not supported"},
		{"JPEG h sampling zero", jpegFile(jpegSeg(0xc0, sof([3]byte{1, 0x01, 0}))), lim, CodeCorrupt, "bad sampling factors"},
		{"JPEG h sampling five", jpegFile(jpegSeg(0xc0, sof([3]byte{1, 0x51, 0}))), lim, CodeCorrupt, "bad sampling factors"},
		{"JPEG v sampling zero", jpegFile(jpegSeg(0xc0, sof([3]byte{1, 0x10, 0}))), lim, CodeCorrupt, "bad sampling factors"},
		{"JPEG v sampling five", jpegFile(jpegSeg(0xc0, sof([3]byte{1, 0x15, 0}))), lim, CodeCorrupt, "bad sampling factors"},
		{"JPEG quantisation table", jpegFile(jpegSeg(0xc0, sof([3]byte{1, 0x11, 4}))), lim, CodeCorrupt, "bad sampling factors"},
		{"JPEG component twice", jpegFile(jpegSeg(0xc0, sof(comps420[0], comps420[1], comps420[1]))), lim, CodeCorrupt, "repeats a component"},
		{"JPEG fractional h sampling", jpegFile(jpegSeg(0xc0, sof([3]byte{1, 0x31, 0}, [3]byte{2, 0x21, 1}, [3]byte{3, 0x11, 1}))), lim, CodeFormat, "fractional chroma sampling ratio"},
		{"JPEG fractional v sampling", jpegFile(jpegSeg(0xc0, sof([3]byte{1, 0x13, 0}, [3]byte{2, 0x12, 1}, [3]byte{3, 0x11, 1}))), lim, CodeFormat, "fractional chroma sampling ratio"},
		{"JPEG EXIF truncated", exifJPEG([]byte("II*")), lim, CodeCorrupt, "the EXIF block is truncated"},
		{"JPEG EXIF byte order", exifJPEG([]byte("XX*\x00\x08\x00\x00\x00")), lim, CodeCorrupt, "no byte order mark"},
		{"JPEG EXIF magic", exifJPEG(tiffLE("\x00\x2b")), lim, CodeCorrupt, "no TIFF magic number"},
		{"JPEG BigTIFF EXIF truncated", exifJPEG(tiffLE("+\x00")), lim, CodeCorrupt, "the BigTIFF EXIF block is truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Inspect(tc.data, tc.lim)
			if CodeOf(err) != tc.want || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want code %s: %s", err, tc.want, tc.msg)
			}
			if !errors.Is(err, &Error{Code: tc.want}) {
				t.Fatalf("errors.Is does not match code %s", tc.want)
			}
		})
	}
	// The frames the refusals above break are accepted as they are.
	for _, data := range [][]byte{jpegFile(jpegSeg(0xc0, sof(comps420...))), exifJPEG(tiffLE("*\x00")), pngWith(nil)} {
		if _, err := Inspect(data, lim); err != nil {
			t.Errorf("a valid header refused: %v", err)
		}
	}
}

func TestInspectAccepts(t *testing.T) {
	hdr, err := Inspect(fixture(t, "j20x12_exif6.jpg"), Limits{MaxAspect: 200, MinSide: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := Header{Format: FormatJPEG, Width: 12, Height: 20, Orientation: 6, ColorModel: ModelYCbCr, BitDepth: 8}
	hdr.jpeg = nil
	if hdr != want {
		t.Fatalf("header %+v, want %+v", hdr, want)
	}
	hdr, err = Inspect(fixture(t, "p13x11_palette_trns.png"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Format != FormatPNG || hdr.ColorModel != ModelPalette || !hdr.HasAlpha || hdr.Width != 13 || hdr.Height != 11 {
		t.Fatalf("header %+v", hdr)
	}
}

// TestErrorsDoNotEchoPayload plants a marker in files and checks no refusal quotes it.
func TestErrorsDoNotEchoPayload(t *testing.T) {
	const marker = "SECRET-PAYLOAD-MARKER"
	good := fixture(t, "j63x65_422_q100_noise.jpg")
	bad := [][]byte{
		append([]byte(marker), good...),
		append(pngHeader(10, 10, 8, 2), pngChunk("IDAT", []byte(marker))...),
		append(append([]byte{}, good[:len(good)/2]...), marker...),
		append([]byte{0xff, 0xd8, 0xff, 0xe1, 0, 30}, append([]byte("Exif\x00\x00"), marker...)...),
	}
	for i, data := range bad {
		hdr, err := Inspect(data, Limits{})
		if err == nil {
			_, err = Decode(context.Background(), data, hdr)
		}
		if err == nil {
			t.Fatalf("case %d: accepted", i)
		}
		if strings.Contains(err.Error(), marker) || strings.Contains(err.Error(), "PAYLOAD") {
			t.Fatalf("case %d: error quotes the payload: %v", i, err)
		}
	}
}

func TestDecodeHonoursContext(t *testing.T) {
	data := fixture(t, "bench_1024x768_prog.jpg")
	hdr, err := Inspect(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Decode(ctx, data, hdr); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestDecodeTruncatedBodies(t *testing.T) {
	for _, name := range []string{"bench_426x320.jpg", "j64x64_422_q75_prog_noise.jpg", "p40x30_interlaced.png", "p13x11_palette4.png"} {
		data := fixture(t, name)
		hdr, err := Inspect(data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cut := range []int{len(data) / 3, len(data) / 2, len(data) - 40} {
			h2, err := Inspect(data[:cut], Limits{})
			if err != nil {
				continue // the cut reached into the header
			}
			if h2.Width != hdr.Width || h2.Height != hdr.Height {
				t.Fatalf("%s cut at %d: header changed", name, cut)
			}
			if _, err := Decode(context.Background(), data[:cut], h2); CodeOf(err) != CodeCorrupt {
				t.Fatalf("%s cut at %d: got %v, want %s", name, cut, err, CodeCorrupt)
			}
		}
	}
}

// order is a byte order that can also append.
type order interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

func TestTIFFOrientation(t *testing.T) {
	entry := func(bo order, tag, typ uint16, count uint32, val []byte) []byte {
		e := bo.AppendUint16(nil, tag)
		e = bo.AppendUint16(e, typ)
		e = bo.AppendUint32(e, count)
		return append(e, append(val, make([]byte, 4-len(val))...)...)
	}
	tiff := func(bo order, entries ...[]byte) []byte {
		b := []byte("II*\x00")
		if bo == order(binary.BigEndian) {
			b = []byte("MM\x00*")
		}
		b = bo.AppendUint32(b, 8)
		b = bo.AppendUint16(b, uint16(len(entries)))
		for _, e := range entries {
			b = append(b, e...)
		}
		return bo.AppendUint32(b, 0)
	}
	le, be := order(binary.LittleEndian), order(binary.BigEndian)
	for _, tc := range []struct {
		name    string
		data    []byte
		present bool
		value   int
		corrupt bool
	}{
		{"short LE", tiff(le, entry(le, 0x0112, 3, 1, le.AppendUint16(nil, 6))), true, 6, false},
		{"short BE", tiff(be, entry(be, 0x0112, 3, 1, be.AppendUint16(nil, 8))), true, 8, false},
		{"long", tiff(le, entry(le, 0x0112, 4, 1, le.AppendUint32(nil, 3))), true, 3, false},
		{"two shorts", tiff(le, entry(le, 0x0112, 3, 2, le.AppendUint32(nil, 3))), true, 0, false},
		{"other tag", tiff(le, entry(le, 0x0110, 3, 1, le.AppendUint16(nil, 6))), false, 0, false},
		{"with Exif prefix", append([]byte("Exif\x00\x00"), tiff(le, entry(le, 0x0112, 3, 1, le.AppendUint16(nil, 5)))...), true, 5, false},
		{"not TIFF", []byte("JUNKJUNKJUNK"), false, 0, true},
		{"empty after prefix", []byte("Exif\x00\x00"), false, 0, false},
		{"IFD offset out of range", append([]byte("II*\x00"), 0xff, 0, 0, 0), false, 0, false},
	} {
		present, value, err := tiffOrientation(tc.data)
		if (err != nil) != tc.corrupt || present != tc.present || value != tc.value {
			t.Errorf("%s: got (%v, %d, %v)", tc.name, present, value, err)
		}
	}
	for in, want := range map[string]int{
		`<rdf tiff:Orientation="6"/>`:               6,
		`<tiff:Orientation>8</tiff:Orientation>`:    8,
		`tiff:Orientation="x" tiff:Orientation="3"`: 3,
		`tiff:Orientation=6`:                        0,
	} {
		if got, _ := xmpOrientation([]byte(in)); got != want {
			t.Errorf("xmp %q: %d, want %d", in, got, want)
		}
	}
}

func TestInspectDoesNotAllocateRaster(t *testing.T) {
	bomb := pngHeader(30000, 30000, 8, 6)
	bomb = append(bomb, pngChunk("IDAT", bytes.Repeat([]byte{0}, 64))...)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := Inspect(bomb, Limits{MaxPixels: 1 << 24}); CodeOf(err) != CodeTooLarge {
			t.Fatalf("bomb: %v", err)
		}
	})
	if allocs > 8 {
		t.Fatalf("Inspect allocated %v times on a bomb", allocs)
	}
}
