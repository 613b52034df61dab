package core

import (
	"bytes"
	"context"
	"errors"
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
	return hdr, nil
}

// decodeImage decodes the image into dst exactly as the reference processors see it.
func decodeImage(ctx context.Context, data []byte, hdr imageio.Header, dst *Image) error {
	img, err := imageio.Decode(ctx, data, hdr)
	if err != nil {
		return imageError(err)
	}
	dst.Width, dst.Height, dst.Pix = img.W, img.H, img.Pix
	dst.HasAlpha = hdr.HasAlpha
	return nil
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
