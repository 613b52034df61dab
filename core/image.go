package core

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"time"

	"github.com/iris-vlm/iris/bundles"
)

type imageHeader struct {
	format        string
	width, height int
}

// inspectImage checks an image's header against the bundle's limits before any raster exists.
// (Replaced by core/internal/imageio once it lands.)
func inspectImage(data []byte, lim bundles.Image) (imageHeader, error) {
	if len(data) == 0 {
		return imageHeader{}, Errorf(KindInvalid, "image_empty", "image", "the image is empty")
	}
	if int64(len(data)) > lim.MaxBytes {
		return imageHeader{}, Errorf(KindInvalid, "image_too_large", "image", "the image has %d bytes; this model takes at most %d", len(data), lim.MaxBytes)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return imageHeader{}, Errorf(KindInvalid, "unsupported_image_format", "image", "the image is not a readable PNG or JPEG")
	}
	return imageHeader{format: format, width: cfg.Width, height: cfg.Height}, nil
}

func decodeImage(ctx context.Context, data []byte, hdr imageHeader, dst *Image) error {
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return Errorf(KindInvalid, "image_corrupt", "image", "the image could not be decoded")
	}
	b := img.Bounds()
	dst.Width, dst.Height = b.Dx(), b.Dy()
	dst.Pix = make([]byte, 3*dst.Width*dst.Height)
	i := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			dst.Pix[i], dst.Pix[i+1], dst.Pix[i+2] = c.R, c.G, c.B
			i += 3
		}
	}
	return ctx.Err()
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
