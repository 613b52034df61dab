package pixels

import (
	"bytes"
	"errors"
	"testing"
)

func TestCropPadTile(t *testing.T) {
	src := synth(8, 6, 9)
	crop := &RGB{W: 3, H: 2}
	if err := Crop(crop, src, 4, 3); err != nil {
		t.Fatal(err)
	}
	for y := range 2 {
		if !bytes.Equal(crop.Row(y), src.Row(3 + y)[12:21]) {
			t.Fatalf("crop row %d differs", y)
		}
	}
	if err := Crop(&RGB{W: 5, H: 2}, src, 4, 3); err == nil {
		t.Error("a crop past the right edge accepted")
	}

	pad := &RGB{W: 10, H: 9}
	fill := [3]uint8{1, 2, 3}
	if err := Pad(pad, src, 1, 2, fill); err != nil {
		t.Fatal(err)
	}
	for y := range pad.H {
		for x := range pad.W {
			p := pad.Pix[3*(y*pad.W+x) : 3*(y*pad.W+x)+3]
			inside := x >= 1 && x < 9 && y >= 2 && y < 8
			var want []byte
			if inside {
				want = src.Pix[3*((y-2)*8+x-1) : 3*((y-2)*8+x-1)+3]
			} else {
				want = fill[:]
			}
			if !bytes.Equal(p, want) {
				t.Fatalf("pad (%d,%d) = %v, want %v", x, y, p, want)
			}
		}
	}
	if err := Pad(&RGB{W: 8, H: 6}, src, 1, 0, fill); err == nil {
		t.Error("a pad that does not fit accepted")
	}

	rows, cols, err := TileGrid(src, 2)
	if err != nil || rows != 3 || cols != 4 {
		t.Fatalf("grid %dx%d, %v", rows, cols, err)
	}
	tile := &RGB{}
	if err := Tile(tile, src, 2, 6); err != nil { // row 1, column 2
		t.Fatal(err)
	}
	if !bytes.Equal(tile.Row(0), src.Row(2)[12:18]) || !bytes.Equal(tile.Row(1), src.Row(3)[12:18]) {
		t.Error("tile 6 differs from the source region")
	}
	if err := Tile(tile, src, 2, 12); err == nil {
		t.Error("tile index past the grid accepted")
	}
	if _, _, err := TileGrid(src, 5); err == nil {
		t.Error("a tiling that does not divide accepted")
	}
}

func TestResizeRejects(t *testing.T) {
	src := synth(4, 4, 1)
	if err := Resize(&RGB{W: 2, H: 2}, src, Torch, Filter(9)); err == nil {
		t.Error("unknown filter accepted")
	}
	if err := Resize(&RGB{W: 2, H: 2}, src, Flavor(9), Bicubic); err == nil {
		t.Error("unknown flavour accepted")
	}
	if err := Resize(&RGB{W: 0, H: 2}, src, Torch, Bicubic); err == nil {
		t.Error("empty destination accepted")
	}
	if err := Resize(&RGB{W: 2, H: 2}, &RGB{W: 4, H: 4, Pix: make([]byte, 3)}, Torch, Bicubic); err == nil {
		t.Error("short source accepted")
	}
	same := &RGB{W: 4, H: 4}
	if err := Resize(same, src, PIL, Bilinear); err != nil || !bytes.Equal(same.Pix, src.Pix) {
		t.Errorf("equal sizes do not copy: %v", err)
	}
}

// TestParseNames: the names a plan gives (the plugin ABI's: abi.FlavorTorchvision "torchvision",
// abi.FlavorPIL "pil", abi.FilterBicubic "bicubic", abi.FilterBilinear "bilinear") map to the
// flavour and filter that resize as they say, and print as themselves; any other name, the
// case changed too, is ErrUnsupported.
func TestParseNames(t *testing.T) {
	for name, want := range map[string]Flavor{"torchvision": Torch, "pil": PIL} {
		if got, err := ParseFlavor(name); err != nil || got != want || got.String() != name {
			t.Errorf("ParseFlavor(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for name, want := range map[string]Filter{"bicubic": Bicubic, "bilinear": Bilinear} {
		if got, err := ParseFilter(name); err != nil || got != want || got.String() != name {
			t.Errorf("ParseFilter(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, name := range []string{"cv2", "PIL", "", "invalid"} {
		if got, err := ParseFlavor(name); !errors.Is(err, ErrUnsupported) || got != 0 {
			t.Errorf("ParseFlavor(%q) = %v, %v; want ErrUnsupported", name, got, err)
		}
	}
	for _, name := range []string{"lanczos", "Bicubic", "", "invalid"} {
		if got, err := ParseFilter(name); !errors.Is(err, ErrUnsupported) || got != 0 {
			t.Errorf("ParseFilter(%q) = %v, %v; want ErrUnsupported", name, got, err)
		}
	}
}
