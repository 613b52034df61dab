// Package pixels executes the pixel steps of a preprocessing plan bit for bit as the reference
// Python stack does: resize (ports of torch's uint8 antialiased CPU kernel, which transformers'
// torchvision backend uses, and of Pillow's ImagingResample), crop, pad, tile, and the fused
// normalise + patchify that yields a vision encoder's pixel_values.
//
// Every step works on [RGB], 8-bit interleaved pixels. Destinations are caller-provided and
// reused when their capacity allows, and large scratch buffers come from a pool, so a steady
// request stream allocates no large buffers. Work on big images is split into row bands over
// GOMAXPROCS goroutines; results never depend on the split.
package pixels
