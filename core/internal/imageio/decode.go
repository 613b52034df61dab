package imageio

import (
	"context"
	"errors"
	"fmt"

	"github.com/iris-vlm/iris/core/internal/par"
	"github.com/iris-vlm/iris/core/internal/pixels"
)

// RGB is the decoded image: 8-bit RGB, rows top to bottom, HWC. It is the pixels package's
// image type, so decoded images feed the pixel steps directly.
type RGB = pixels.RGB

// Decode decodes data, whose header Inspect returned as hdr (it must be that header: a JPEG's
// frame layout travels in it), into RGB pixels: the stored image
// converted as PIL's convert("RGB") does (alpha dropped, palette looked up, grey replicated),
// then transposed by the EXIF orientation as ImageOps.exif_transpose does. A corrupt or
// truncated body is an *Error with CodeCorrupt; an unsupported coding feature one with
// CodeFormat.
func Decode(ctx context.Context, data []byte, hdr Header) (*RGB, error) {
	return DecodeWith(ctx, data, hdr, Options{})
}

// Options choose how a reference other than transformers' load_image reads an image file.
type Options struct {
	// OverWhite composites transparent pixels on white, as a loader that opens with PIL, converts
	// "P" to "RGBA" and pastes "RGBA" on a white "RGB" image with the alpha band as the mask
	// does (Lance's get_video_tensor_online): an 8-bit RGBA PNG, and a palette PNG with a tRNS
	// chunk (its alphas by index), become round((255*(255-a) + c*a) / 255) per channel in PIL's
	// integer arithmetic; other colour models convert as Decode does (grey+alpha drops it, a
	// tRNS colour key of RGB or grey images is ignored, as convert("RGB") does).
	OverWhite bool
}

// DecodeWith is Decode reading the file as opts say. The orientation applied is hdr's: a
// reference that ignores EXIF orientation takes Header.Stored's header.
func DecodeWith(ctx context.Context, data []byte, hdr Header, opts Options) (*RGB, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("decoding image: %w", err)
	}
	var (
		img *RGB
		err error
	)
	switch hdr.Format {
	case FormatJPEG:
		if hdr.jpeg == nil {
			return nil, errors.New("decoding image: the header did not come from Inspect")
		}
		img, err = decodeJPEGRGB(ctx, data, hdr.jpeg)
	case FormatPNG:
		img, err = decodePNG(ctx, data, opts.OverWhite)
	default:
		return nil, refuse(CodeFormat, "the image is neither PNG nor JPEG")
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("decoding image: %w", err)
		}
		return nil, err
	}
	if hdr.Orientation > 1 {
		img = orient(img, hdr.Orientation)
	}
	if img.W != hdr.Width || img.H != hdr.Height {
		return nil, refuse(CodeCorrupt, "the decoded size differs from the header")
	}
	return img, nil
}

// classify turns a decoder error into a refusal; context errors pass through.
func classify(err error, format string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("decoding image: %w", err)
	}
	var ue jpegUnsupportedError
	if errors.As(err, &ue) {
		return &Error{Code: CodeFormat, Message: "the " + format + " uses an unsupported feature: " + string(ue)}
	}
	return &Error{Code: CodeCorrupt, Message: "the " + format + " data is truncated or corrupt"}
}

func decodeJPEGRGB(ctx context.Context, data []byte, jh *jpegHeader) (img *RGB, err error) {
	d, err := decodeJPEG(ctx, data, jh)
	if err != nil {
		return nil, classify(err, "JPEG")
	}
	defer d.release()
	if d.smoothingApplies() {
		return nil, refuse(CodeFormat, "progressive JPEG whose scans leave low-frequency coefficients unrefined (libjpeg block smoothing) is not supported")
	}
	if d.outDone {
		// A baseline scan reconstructed and converted the image as it was decoded. A
		// cancellation during that work is reported, as reconstructAll reports one.
		if err := ctx.Err(); err != nil {
			return nil, classify(err, "JPEG")
		}
		return d.out, nil
	}
	if err := d.reconstructAll(); err != nil {
		return nil, classify(err, "JPEG")
	}
	img = pixels.NewRGB(d.width, d.height)
	// Rows convert independently; each band builds its own upsamplers.
	par.Bands(d.height, max(1, (64<<10)/(3*d.width)), func(lo, hi int) { d.toRGB(img.Pix, jh.rgb, lo, hi) })
	return img, nil
}

// orient applies an EXIF orientation as PIL's Image.transpose does for exif_transpose:
// 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270,
// 7 TRANSVERSE, 8 ROTATE_90.
func orient(src *RGB, o int) *RGB {
	w, h := src.W, src.H
	ow, oh := w, h
	if o >= 5 {
		ow, oh = h, w
	}
	dst := pixels.NewRGB(ow, oh)
	for y := range h {
		for x := range w {
			var X, Y int
			switch o {
			case 2:
				X, Y = w-1-x, y
			case 3:
				X, Y = w-1-x, h-1-y
			case 4:
				X, Y = x, h-1-y
			case 5:
				X, Y = y, x
			case 6:
				X, Y = h-1-y, x
			case 7:
				X, Y = h-1-y, w-1-x
			case 8:
				X, Y = y, w-1-x
			}
			copy(dst.Pix[3*(Y*ow+X):3*(Y*ow+X)+3], src.Pix[3*(y*w+x):3*(y*w+x)+3])
		}
	}
	return dst
}
