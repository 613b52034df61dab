package imageio

import (
	"bytes"
	"fmt"
)

// Limits bound what Inspect accepts. A zero field disables its check.
type Limits struct {
	// MaxBytes caps the file size.
	MaxBytes int64
	// MaxPixels caps width·height.
	MaxPixels int64
	// MinSide is the smallest accepted width or height.
	MinSide int
	// MaxAspect caps long side / short side.
	MaxAspect float64
}

// Formats.
const (
	FormatPNG  = "png"
	FormatJPEG = "jpeg"
)

// Colour models a Header may report.
const (
	ModelGray      = "gray"
	ModelGrayAlpha = "gray_alpha"
	ModelRGB       = "rgb"
	ModelRGBA      = "rgba"
	ModelPalette   = "palette"
	ModelYCbCr     = "ycbcr"
	ModelCMYK      = "cmyk"
	ModelYCCK      = "ycck"
)

// Header is what the file's header says about the image.
type Header struct {
	// Format is FormatPNG or FormatJPEG.
	Format string
	// Width and Height are the size of the pixels Decode returns: the stored size, with the
	// sides swapped when the EXIF orientation transposes the image.
	Width, Height int
	// Orientation is the EXIF orientation (1..8) Decode applies, as ImageOps.exif_transpose
	// does; 1 means none.
	Orientation int
	// ColorModel is one of the Model constants, as stored in the file.
	ColorModel string
	// BitDepth is the bits per sample as stored.
	BitDepth int
	// HasAlpha is true when the file carries transparency; Decode drops it, as PIL's
	// convert("RGB") does.
	HasAlpha bool
	// Progressive is true for a progressive JPEG; Interlaced for an Adam7 PNG.
	Progressive, Interlaced bool

	jpeg *jpegHeader
}

// Inspect reads data's header, applies lim and returns the header. It allocates no raster: a
// decompression bomb is refused after reading a few dozen bytes.
func Inspect(data []byte, lim Limits) (Header, error) {
	if len(data) == 0 {
		return Header{}, refuse(CodeEmpty, "the image has no bytes")
	}
	if lim.MaxBytes > 0 && int64(len(data)) > lim.MaxBytes {
		return Header{}, refuse(CodeTooLarge, fmt.Sprintf("the image has %d bytes, over the limit of %d", len(data), lim.MaxBytes))
	}
	var h Header
	var err error
	switch {
	case bytes.HasPrefix(data, pngSignature):
		h, err = inspectPNG(data)
	case len(data) >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff: // Pillow's _accept
		h, err = inspectJPEG(data)
	case len(data) < len(pngSignature) && bytes.HasPrefix(pngSignature, data),
		len(data) < 3 && bytes.HasPrefix([]byte{0xff, 0xd8, 0xff}, data):
		return Header{}, refuse(CodeCorrupt, "the image header is truncated")
	default:
		return Header{}, refuse(CodeFormat, "the image is neither PNG nor JPEG")
	}
	if err != nil {
		return Header{}, err
	}
	if err := h.apply(lim); err != nil {
		return Header{}, err
	}
	return h, nil
}

// apply checks the header against lim.
func (h *Header) apply(lim Limits) error {
	if h.Width <= 0 || h.Height <= 0 {
		return refuse(CodeEmpty, fmt.Sprintf("the image is %dx%d", h.Width, h.Height))
	}
	if lim.MaxPixels > 0 && int64(h.Width)*int64(h.Height) > lim.MaxPixels {
		return refuse(CodeTooLarge, fmt.Sprintf("the image is %dx%d, over the limit of %d pixels", h.Width, h.Height, lim.MaxPixels))
	}
	if lim.MinSide > 0 && min(h.Width, h.Height) < lim.MinSide {
		return refuse(CodeTooSmall, fmt.Sprintf("the image is %dx%d; each side must be at least %d", h.Width, h.Height, lim.MinSide))
	}
	if lim.MaxAspect > 0 {
		// both sides are positive (checked above), so the ratio is a finite number
		long, short := float64(max(h.Width, h.Height)), float64(min(h.Width, h.Height))
		if r := long / short; r > lim.MaxAspect {
			return refuse(CodeAspect, fmt.Sprintf("the image is %dx%d, aspect ratio %.4g over the limit of %g", h.Width, h.Height, r, lim.MaxAspect))
		}
	}
	return nil
}

// Stored is h for a reader that ignores EXIF orientation (PIL's Image.open without
// exif_transpose): the stored width and height, orientation 1.
func (h Header) Stored() Header {
	if h.Orientation >= 5 {
		h.Width, h.Height = h.Height, h.Width
	}
	h.Orientation = 1
	return h
}

// orient sets Width and Height from the stored size and the orientation.
func (h *Header) orient(w, ht, orientation int) {
	h.Orientation = orientation
	if orientation >= 5 {
		w, ht = ht, w
	}
	h.Width, h.Height = w, ht
}
