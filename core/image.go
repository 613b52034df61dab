package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"time"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/imageio"
)

// inspectImage checks an image's header against the bundle's limits before any raster exists.
func inspectImage(data []byte, lim bundles.Image) (imageio.Header, error) {
	hdr, err := imageio.Inspect(data, imageio.Limits{MaxBytes: lim.MaxBytes, MaxPixels: lim.MaxPixels, MinSide: lim.MinSide, MaxAspect: lim.MaxAspect})
	if err != nil {
		return hdr, imageError(err)
	}
	if lim.Read == bundles.ReadPILWhite {
		hdr = hdr.Stored() // PIL's Image.open: the stored orientation
	}
	return hdr, nil
}

// decodeOptions is how the bundle's reference reads an image file (bundles.Image.Read).
func decodeOptions(lim bundles.Image) imageio.Options {
	return imageio.Options{OverWhite: lim.Read == bundles.ReadPILWhite}
}

// newImage is the request image described by its header, its pixels not decoded yet.
func newImage(hdr imageio.Header) *Image {
	return &Image{Info: ImageInfo{Format: hdr.Format, Width: hdr.Width, Height: hdr.Height},
		Width: hdr.Width, Height: hdr.Height, HasAlpha: hdr.HasAlpha, decoded: make(chan struct{})}
}

// decodeImage decodes data into dst.Pix (or its error into dst.err) exactly as the reference
// processors see it; it touches no other field, so the task may read them meanwhile. The caller
// closes dst.decoded after it.
func decodeImage(ctx context.Context, data []byte, hdr imageio.Header, opts imageio.Options, dst *Image) {
	img, err := imageio.DecodeWith(ctx, data, hdr, opts)
	switch {
	case err != nil:
		dst.err = imageError(err)
	case img.W != dst.Width || img.H != dst.Height:
		dst.err = &Error{Kind: KindInternal, Code: "image_decode", Message: "internal error",
			Err: fmt.Errorf("decoded %dx%d pixels for a %dx%d header", img.W, img.H, dst.Width, dst.Height)}
	default:
		dst.Pix = img.Pix
	}
}

func imageError(err error) error {
	var ie *imageio.Error
	if !errors.As(err, &ie) {
		return err // context errors and the like
	}
	kind := KindInvalid
	if ie.Code.TooLarge() {
		kind = KindTooLarge
	}
	return &Error{Kind: kind, Code: string(ie.Code), Param: "image", Message: ie.Message, Err: err}
}

// warmupPNG is a small gradient image for warm-up requests.
func warmupPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			img.Set(x, y, color.RGBA{uint8(4 * x), uint8(5 * y), uint8(2 * (x + y)), 255})
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
}

func statTime(p string) (time.Time, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}
