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

func TestInspectRefusals(t *testing.T) {
	jpeg := fixture(t, "j64x64_422_q75_prog_noise.jpg")
	lim := Limits{MaxBytes: 1 << 20, MaxPixels: 1 << 20, MinSide: 2, MaxAspect: 200}
	for _, tc := range []struct {
		name string
		data []byte
		lim  Limits
		want Code
	}{
		{"empty", nil, lim, CodeEmpty},
		{"over max bytes", jpeg, Limits{MaxBytes: 100}, CodeTooLarge},
		{"unknown format", []byte("GIF89a......"), lim, CodeFormat},
		{"two bytes of JPEG", []byte{0xff, 0xd8}, lim, CodeCorrupt},
		{"JPEG without a third 0xFF", []byte{0xff, 0xd8, 0x00, 0x01}, lim, CodeFormat},
		{"PNG signature only", pngSignature[:5], lim, CodeCorrupt},
		{"truncated IHDR", pngHeader(10, 10, 8, 2)[:20], lim, CodeCorrupt},
		{"JPEG header cut before SOS", jpeg[:100], lim, CodeCorrupt},
		{"30000x30000 PNG bomb", pngHeader(30000, 30000, 8, 2), lim, CodeTooLarge},
		{"zero width", pngHeader(0, 10, 8, 2), lim, CodeEmpty},
		{"below min side", pngHeader(1, 10, 8, 2), lim, CodeTooSmall},
		{"aspect over 200", pngHeader(2010, 10, 8, 2), lim, CodeAspect},
		{"16-bit PNG", pngHeader(10, 10, 16, 2), lim, CodeColorModel},
		{"bad PNG depth", pngHeader(10, 10, 3, 2), lim, CodeCorrupt},
		{"CMYK JPEG", fixture(t, "j16x16_cmyk.jpg"), lim, CodeColorModel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Inspect(tc.data, tc.lim)
			if CodeOf(err) != tc.want {
				t.Fatalf("got %v, want code %s", err, tc.want)
			}
			if !errors.Is(err, &Error{Code: tc.want}) {
				t.Fatalf("errors.Is does not match code %s", tc.want)
			}
		})
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
