// Package imageio turns an uploaded PNG or JPEG file into 8-bit RGB pixels exactly as the
// reference stack does: transformers' load_image (PIL.Image.open, ImageOps.exif_transpose,
// convert("RGB")) with Pillow 12.3 and its libjpeg-turbo.
//
// [Inspect] reads only the file's header and refuses what the limits exclude before any raster
// is allocated; [Decode] then produces the pixels. JPEG decoding follows libjpeg-turbo's default
// path bit for bit (the accurate integer IDCT, "fancy" triangle-filter chroma upsampling and its
// fixed-point YCbCr->RGB tables), which Go's image/jpeg does not. PNG decoding follows Pillow's
// acceptance rules (which checksums it verifies, where it stops reading), which image/png does
// not. Every refusal is an [*Error] with a stable code, and no error ever quotes the payload.
package imageio
