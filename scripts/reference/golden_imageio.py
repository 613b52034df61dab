"""Golden decode vectors for core/internal/imageio: small PNG and JPEG files, each with the
sha256 of the RGB pixels the reference gets from it (transformers' load_image: PIL.Image.open,
ImageOps.exif_transpose, convert("RGB"); Pillow 12.3 with its bundled libjpeg-turbo), or the
reason the reference refuses it.

    golden_imageio.py                 write core/internal/imageio/testdata/decode/ (committed)
    golden_imageio.py --sweep DIR N   write N more JPEGs and N/3 PNGs (not committed) for the sweep test:
                                      IRIS_DECODE_SWEEP=DIR go test ./core/internal/imageio -run DecodeSweep

Run with the reference stack: `just golden-imageio` / `just decode-sweep`.
"""

import hashlib
import io
import json
import pathlib
import random
import sys
import zlib

import numpy as np
import PIL
from PIL import Image, ImageFile, ImageOps

# Optimised and progressive encoding must hold the whole compressed image in Pillow's buffer,
# which it sizes at width*height bytes: too small for noise at high quality.
ImageFile.MAXBLOCK = 1 << 26

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "core/internal/imageio/testdata/decode"


def reference_rgb(data):
    """What transformers' load_image returns, as HWC bytes."""
    im = Image.open(io.BytesIO(data))
    im = ImageOps.exif_transpose(im)
    im = im.convert("RGB")
    return np.asarray(im), im.size


def content(w, h, rnd, kind):
    """Deterministic test content: gradients, noise, saturated edges."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    if kind == "smooth":
        r = 128 + 100 * np.sin(x / max(w, 1) * 6.1 + y / max(h, 1) * 2.3)
        g = 255 * x / max(w - 1, 1)
        b = 255 * y / max(h - 1, 1)
        img = np.stack([r, g, b], -1) + np.array(rnd.normal(0, 6, (h, w, 3)))
    elif kind == "noise":
        img = np.array(rnd.integers(0, 256, (h, w, 3)), dtype=np.float64)
    else:  # edges: saturated blocks and stripes, so IDCT outputs overshoot and clamp
        img = np.zeros((h, w, 3))
        img[..., 0] = np.where((x.astype(int) // 3 + y.astype(int) // 5) % 2 == 0, 255, 0)
        img[..., 1] = np.where(x > w / 2, 255, 10)
        img[..., 2] = np.where((x.astype(int) * 7 + y.astype(int) * 3) % 11 < 5, 250, 5)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def jpeg_bytes(im, **kw):
    buf = io.BytesIO()
    im.save(buf, "JPEG", **kw)
    return buf.getvalue()


def exif_with_orientation(o):
    e = Image.Exif()
    e[0x0112] = o
    return e.tobytes()


def record(rows, name, data, note, outdir):
    (outdir / name).write_bytes(data)
    row = {"file": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "note": note}
    try:
        arr, size = reference_rgb(data)
        row.update(width=size[0], height=size[1], rgb_sha256=hashlib.sha256(arr.tobytes()).hexdigest())
    except Exception as e:  # the reference refuses the file
        row.update(error=type(e).__name__)
    rows.append(row)


def jpeg_cases(rnd, count=None):
    """(name, bytes, note) for the committed JPEG set, or `count` random ones for the sweep."""
    sizes = [(1, 1), (1, 17), (17, 1), (2, 2), (3, 5), (7, 9), (8, 8), (9, 9), (15, 17), (16, 16),
             (17, 15), (23, 8), (31, 33), (33, 31), (48, 40), (63, 65), (64, 64), (100, 37), (37, 100)]
    subs = {"444": 0, "422": 1, "420": 2}
    if count is None:
        i = 0
        for (w, h) in sizes:
            for sub, sv in subs.items():
                kind = ["smooth", "noise", "edges"][i % 3]
                q = [95, 75, 50, 20, 100, 5][i % 6]
                prog = i % 2 == 1
                kw = dict(quality=q, subsampling=sv, progressive=prog)
                if i % 5 == 0:
                    kw["restart_marker_blocks"] = 1 + i % 3
                name = f"j{w}x{h}_{sub}_q{q}{'_prog' if prog else ''}{'_rst' if 'restart_marker_blocks' in kw else ''}_{kind}.jpg"
                yield name, jpeg_bytes(content(w, h, rnd, kind), **kw), "pil " + str(kw)
                i += 1
        for (w, h) in [(1, 1), (5, 3), (16, 9), (33, 17)]:
            for prog in (False, True):
                im = content(w, h, rnd, "smooth").convert("L")
                yield f"j{w}x{h}_gray{'_prog' if prog else ''}.jpg", jpeg_bytes(im, quality=80, progressive=prog), "grey"
        for (w, h) in [(9, 7), (40, 24)]:
            yield f"j{w}x{h}_rgb_adobe.jpg", jpeg_bytes(content(w, h, rnd, "noise"), quality=90, keep_rgb=True), "keep_rgb: Adobe transform 0"
        yield "j64x48_rst_rows.jpg", jpeg_bytes(content(64, 48, rnd, "smooth"), quality=85, restart_marker_rows=1), "restart every MCU row"
        yield "j64x48_prog_rst.jpg", jpeg_bytes(content(64, 48, rnd, "noise"), quality=85, progressive=True,
                                                restart_marker_blocks=2), "progressive with restarts"
        yield "j40x30_optimize.jpg", jpeg_bytes(content(40, 30, rnd, "smooth"), quality=70, optimize=True), "optimised tables"
        for o in range(1, 9):
            yield f"j20x12_exif{o}.jpg", jpeg_bytes(content(20, 12, rnd, "smooth"), quality=90,
                                                   exif=exif_with_orientation(o)), f"EXIF orientation {o}"
        # Benchmark inputs (BenchmarkInspectDecode): typical photo-like sizes.
        yield "bench_426x320.jpg", jpeg_bytes(content(426, 320, rnd, "smooth"), quality=85), "benchmark, 4:2:0"
        yield "bench_1024x768_prog.jpg", jpeg_bytes(content(1024, 768, rnd, "smooth"), quality=75,
                                                    progressive=True), "benchmark, progressive 4:2:0"
        cmyk = content(16, 16, rnd, "smooth").convert("CMYK")
        yield "j16x16_cmyk.jpg", jpeg_bytes(cmyk, quality=90), "CMYK: refused"
        base = jpeg_bytes(content(32, 32, rnd, "noise"), quality=90)
        yield "j32x32_truncated.jpg", base[: len(base) * 2 // 3], "truncated body"
        yield "j32x32_no_eoi.jpg", base[:-2], "missing EOI"
        return
    for i in range(count):
        w, h = int(rnd.integers(1, 400)), int(rnd.integers(1, 400))
        kind = ["smooth", "noise", "edges"][int(rnd.integers(0, 3))]
        kw = dict(quality=int(rnd.integers(1, 101)), subsampling=int(rnd.integers(0, 3)),
                  progressive=bool(rnd.integers(0, 2)), optimize=bool(rnd.integers(0, 2)))
        if rnd.integers(0, 4) == 0:
            kw["restart_marker_blocks"] = int(rnd.integers(1, 50))
        im = content(w, h, rnd, kind)
        if rnd.integers(0, 8) == 0:
            im = im.convert("L")
        if rnd.integers(0, 10) == 0:
            kw["exif"] = exif_with_orientation(int(rnd.integers(1, 9)))
        yield f"s{i:05d}_{w}x{h}.jpg", jpeg_bytes(im, **kw), str(kw)


ZIGZAG = [0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13,
          6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45,
          38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63]
STD_BITS = {("dc", 0): [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], ("dc", 1): [0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
            ("ac", 0): [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 125],
            ("ac", 1): [0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 119]}
STD_VALS = {("dc", 0): list(range(12)), ("dc", 1): list(range(12)),
            ("ac", 0): bytes.fromhex(
                "01020300041105122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a"
                "3435363738393a434445464748494a535455565758595a636465666768696a737475767778797a838485868788898a929394"
                "95969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8"
                "e9eaf1f2f3f4f5f6f7f8f9fa"),
            ("ac", 1): bytes.fromhex(
                "000102031104052131061241510761711322328108144291a1b1c109233352f0156272d10a162434e125f11718191a2627"
                "28292a35363738393a434445464748494a535455565758595a636465666768696a737475767778797a82838485868788898a"
                "92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6"
                "e7e8e9eaf2f3f4f5f6f7f8f9fa")}


def huff_codes(bits, vals):
    codes, code, k = {}, 0, 0
    for length in range(1, 17):
        for _ in range(bits[length - 1]):
            codes[vals[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return codes


class BitWriter:
    def __init__(self):
        self.out, self.acc, self.n = bytearray(), 0, 0

    def put(self, code, length):
        self.acc = (self.acc << length) | code
        self.n += length
        while self.n >= 8:
            b = (self.acc >> (self.n - 8)) & 0xFF
            self.out.append(b)
            if b == 0xFF:
                self.out.append(0)
            self.n -= 8

    def flush(self):
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)
        return bytes(self.out)


def tiny_jpeg(rgb, factors, quality_scale=1.0, interleaved=True, gray=False):
    """A minimal baseline encoder with arbitrary sampling factors [(h, v)] per component and the
    Annex K tables; Pillow cannot write 4:4:0, 4:1:1 and the like, libjpeg-turbo decodes them."""
    a = np.asarray(rgb).astype(np.float64)
    h, w = a.shape[:2]
    if gray:
        planes = [0.299 * a[..., 0] + 0.587 * a[..., 1] + 0.114 * a[..., 2]]
    else:
        y = 0.299 * a[..., 0] + 0.587 * a[..., 1] + 0.114 * a[..., 2]
        cb = 128 - 0.168736 * a[..., 0] - 0.331264 * a[..., 1] + 0.5 * a[..., 2]
        cr = 128 + 0.5 * a[..., 0] - 0.418688 * a[..., 1] - 0.081312 * a[..., 2]
        planes = [y, cb, cr]
    hmax, vmax = max(f[0] for f in factors), max(f[1] for f in factors)
    mx, my = -(-w // (8 * hmax)), -(-h // (8 * vmax))
    n = np.arange(8)
    dct = np.sqrt(2 / 8) * np.cos((2 * n[None, :] + 1) * n[:, None] * np.pi / 16)
    dct[0] /= np.sqrt(2)
    qt = [np.clip(np.round(np.array(t) * quality_scale), 1, 255).astype(int) for t in (
        [16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29,
         51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92, 49, 64, 78, 87, 103, 121,
         120, 101, 72, 92, 95, 98, 112, 100, 103, 99],
        [17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99, 99, 47, 66, 99, 99,
         99, 99, 99, 99] + [99] * 32)]
    comps = []
    for ci, (plane, (fh, fv)) in enumerate(zip(planes, factors)):
        sx, sy = hmax // fh, vmax // fv
        dw, dh = -(-w * fh // hmax), -(-h * fv // vmax)
        pad = np.pad(plane, ((0, dh * sy - h if dh * sy > h else 0), (0, dw * sx - w if dw * sx > w else 0)), mode="edge")
        down = pad[:dh * sy, :dw * sx].reshape(dh, sy, dw, sx).mean(axis=(1, 3))
        bw, bh = mx * fh, my * fv
        full = np.pad(down, ((0, bh * 8 - dh), (0, bw * 8 - dw)), mode="edge") - 128
        blocks = full.reshape(bh, 8, bw, 8).transpose(0, 2, 1, 3)
        coef = np.einsum("ij,abjk,lk->abil", dct, blocks, dct)
        # The tables are written (DQT) and read here in zig-zag order.
        q = np.array(qt[0 if ci == 0 else 1])[np.argsort(ZIGZAG)].reshape(8, 8)
        comps.append(dict(blocks=np.round(coef / q).astype(int), fh=fh, fv=fv, dw=dw, dh=dh, t=0 if ci == 0 else 1))
    out = bytearray(b"\xff\xd8")
    seg = lambda m, body: out.extend(bytes([0xFF, m]) + (len(body) + 2).to_bytes(2, "big") + body)
    seg(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
    for t in range(1 if gray else 2):
        seg(0xDB, bytes([t]) + bytes(int(v) for v in qt[t]))
    sof = bytes([8]) + h.to_bytes(2, "big") + w.to_bytes(2, "big") + bytes([len(comps)])
    for ci, c in enumerate(comps):
        sof += bytes([ci + 1, c["fh"] << 4 | c["fv"], c["t"]])
    seg(0xC0, sof)
    for cls, tc in (("dc", 0), ("ac", 1)):
        for t in range(1 if gray else 2):
            seg(0xC4, bytes([tc << 4 | t]) + bytes(STD_BITS[cls, t]) + bytes(STD_VALS[cls, t]))
    codes = {k: huff_codes(STD_BITS[k], STD_VALS[k]) for k in STD_BITS}

    def put_block(bwr, blk, c, pred):
        zz = blk.reshape(64)[ZIGZAG]
        diff = int(zz[0]) - pred[0]
        pred[0] = int(zz[0])
        for val, table in [(diff, "dc")]:
            size = abs(val).bit_length()
            code, ln = codes[table, c["t"]][size]
            bwr.put(code, ln)
            if size:
                bwr.put(val if val > 0 else val + (1 << size) - 1, size)
        run = 0
        for k in range(1, 64):
            v = int(zz[k])
            if v == 0:
                run += 1
                continue
            while run > 15:
                bwr.put(*codes["ac", c["t"]][0xF0])
                run -= 16
            size = abs(v).bit_length()
            bwr.put(*codes["ac", c["t"]][run << 4 | size])
            bwr.put(v if v > 0 else v + (1 << size) - 1, size)
            run = 0
        if run:
            bwr.put(*codes["ac", c["t"]][0x00])

    scans = [list(range(len(comps)))] if interleaved and len(comps) > 1 else [[i] for i in range(len(comps))]
    for scan in scans:
        sos = bytes([len(scan)]) + b"".join(bytes([ci + 1, comps[ci]["t"] << 4 | comps[ci]["t"]]) for ci in scan)
        seg(0xDA, sos + bytes([0, 63, 0]))
        bwr = BitWriter()
        preds = {ci: [0] for ci in scan}
        if len(scan) > 1:
            for yy in range(my):
                for xx in range(mx):
                    for ci in scan:
                        c = comps[ci]
                        for v in range(c["fv"]):
                            for u in range(c["fh"]):
                                put_block(bwr, c["blocks"][yy * c["fv"] + v, xx * c["fh"] + u], c, preds[ci])
        else:
            c = comps[scan[0]]
            for yy in range(-(-c["dh"] // 8)):
                for xx in range(-(-c["dw"] // 8)):
                    put_block(bwr, c["blocks"][yy, xx], c, preds[scan[0]])
        out.extend(bwr.flush())
    out.extend(b"\xff\xd9")
    return bytes(out)


def exotic_cases(rnd):
    """Sampling layouts only the hand encoder writes."""
    layouts = {
        "440": [(1, 2), (1, 1), (1, 1)], "411": [(4, 1), (1, 1), (1, 1)], "410": [(4, 2), (1, 1), (1, 1)],
        "mixed": [(2, 2), (1, 2), (2, 1)], "chroma_max": [(1, 1), (2, 2), (2, 2)], "h3": [(3, 1), (1, 1), (1, 1)],
        "v4": [(1, 4), (1, 1), (1, 1)], "420": [(2, 2), (1, 1), (1, 1)], "h2v1_in_h4": [(4, 1), (2, 1), (1, 1)],
    }
    for name, factors in layouts.items():
        for (w, h) in [(37, 29), (3, 5), (2, 9), (64, 48), (17, 33)]:
            yield f"x{w}x{h}_{name}.jpg", tiny_jpeg(content(w, h, rnd, "smooth"), factors), f"hand encoder {factors}"
    for (w, h) in [(37, 29), (5, 3)]:
        yield f"x{w}x{h}_420_scans.jpg", tiny_jpeg(content(w, h, rnd, "edges"), [(2, 2), (1, 1), (1, 1)], interleaved=False), \
            "hand encoder, one sequential scan per component"
        yield f"x{w}x{h}_gray22.jpg", tiny_jpeg(content(w, h, rnd, "smooth"), [(2, 2)], gray=True), "grey declared 2x2"


def png_bytes(im, **kw):
    buf = io.BytesIO()
    im.save(buf, "PNG", **kw)
    return buf.getvalue()


def png_chunk(typ, body):
    return len(body).to_bytes(4, "big") + typ + body + zlib.crc32(typ + body).to_bytes(4, "big")


def with_chunk(png, typ, body, before=b"IDAT"):
    i = png.index(before) - 4
    return png[:i] + png_chunk(typ, body) + png[i:]


def png_cases(rnd):
    rgb = content(13, 11, rnd, "smooth")
    yield "p13x11_rgb.png", png_bytes(rgb), "RGB"
    yield "p13x11_rgba.png", png_bytes(Image.merge("RGBA", (*rgb.split(), rgb.convert("L")))), "RGBA: alpha dropped"
    yield "p13x11_gray.png", png_bytes(rgb.convert("L")), "grey"
    yield "p13x11_la.png", png_bytes(rgb.convert("LA")), "grey+alpha"
    yield "p13x11_1bit.png", png_bytes(rgb.convert("1")), "1-bit"
    for bits in (2, 4):
        yield f"p13x11_gray{bits}.png", png_bytes(rgb.convert("L"), bits=bits), f"{bits}-bit grey"
    pal = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=200)
    yield "p13x11_palette.png", png_bytes(pal), "palette"
    yield "p13x11_palette_trns.png", png_bytes(pal, transparency=3), "palette + tRNS"
    pal4 = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    yield "p13x11_palette4.png", png_bytes(pal4, bits=4), "4-bit palette"
    yield "p13x11_gray_trns.png", png_bytes(rgb.convert("L"), transparency=40), "grey + tRNS"
    yield "p13x11_rgb_trns.png", png_bytes(rgb, transparency=(10, 20, 30)), "RGB + tRNS"
    yield "p40x30_interlaced.png", interlaced_png(content(40, 30, rnd, "noise")), "Adam7"
    base = png_bytes(content(10, 6, rnd, "smooth"))
    yield "p10x6_exif6.png", with_chunk(base, b"eXIf", exif_with_orientation(6)[6:]), "eXIf orientation 6"
    yield "p10x6_exif8_after_idat.png", with_chunk(base, b"eXIf", exif_with_orientation(8)[6:], before=b"IEND"), \
        "eXIf after IDAT"
    xmp = b'<x:xmpmeta><rdf:Description tiff:Orientation="3"/></x:xmpmeta>'
    yield "p10x6_xmp3.png", with_chunk(base, b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + xmp), "XMP orientation 3"
    arr16 = (np.arange(6 * 5 * 3).reshape(6, 5, 3) * 1000).astype(">u2")
    yield "p5x6_rgb16.png", rgb16_png(arr16), "16-bit: refused"
    yield "p10x6_truncated.png", base[: len(base) - 20], "truncated"
    bomb = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", (30000).to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00")
    yield "p30000_bomb.png", bomb + png_chunk(b"IDAT", zlib.compress(b"\x00" * 1000)) + png_chunk(b"IEND", b""), \
        "30000x30000 header: refused by limits"


def filtered_png(a, ctype, depth, interlace, rnd):
    """A hand-written PNG of raw samples a (HxWxC uint8, or HxW of sub-byte values), every row
    with a random filter type, optionally Adam7-interlaced."""
    h, w = a.shape[:2]
    ch = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ctype]
    bpp = max(1, depth * ch // 8)

    def pack(rows):
        if depth == 8:
            return rows.reshape(rows.shape[0], -1)
        per = 8 // depth
        pw = rows.shape[1]
        out = np.zeros((rows.shape[0], -(-pw // per)), dtype=np.uint8)
        for i in range(pw):
            out[:, i // per] |= (rows[:, i].astype(np.uint8) << (8 - depth * (i % per + 1))).astype(np.uint8)
        return out

    def encode(sub):
        raw = bytearray()
        prev = np.zeros(pack(sub[:1]).shape[1], dtype=np.int32)
        for row in pack(sub).astype(np.int32):
            ft = int(rnd.integers(0, 5))
            out = np.zeros_like(row)
            for i in range(len(row)):
                a_ = row[i - bpp] if i >= bpp else 0
                b_ = prev[i]
                c_ = prev[i - bpp] if i >= bpp else 0
                pred = [0, a_, b_, (a_ + b_) // 2, 0][ft]
                if ft == 4:
                    p_ = a_ + b_ - c_
                    pa, pb, pc = abs(p_ - a_), abs(p_ - b_), abs(p_ - c_)
                    pred = a_ if pa <= pb and pa <= pc else (b_ if pb <= pc else c_)
                out[i] = (row[i] - pred) & 0xFF
            raw += bytes([ft]) + bytes(out.astype(np.uint8))
            prev = row
        return bytes(raw)

    if interlace:
        data = b"".join(encode(a[y0::dy, x0::dx]) for x0, y0, dx, dy in
                        [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
                        if a[y0::dy, x0::dx].size)
    else:
        data = encode(a)
    ihdr = w.to_bytes(4, "big") + h.to_bytes(4, "big") + bytes([depth, ctype, 0, 0, int(interlace)])
    chunks = png_chunk(b"IHDR", ihdr)
    if ctype == 3:
        chunks += png_chunk(b"PLTE", bytes(rnd.integers(0, 256, 3 * int(rnd.integers(1, 2 ** depth + 1)), dtype=np.uint8)))
    return b"\x89PNG\r\n\x1a\n" + chunks + png_chunk(b"IDAT", zlib.compress(data)) + png_chunk(b"IEND", b"")


def png_sweep_cases(rnd, count):
    for i in range(count):
        w, h = int(rnd.integers(1, 70)), int(rnd.integers(1, 70))
        ctype = int(rnd.choice([0, 2, 3, 4, 6]))
        depth = int(rnd.choice([1, 2, 4, 8])) if ctype in (0, 3) else 8
        ch = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ctype]
        a = rnd.integers(0, 2 ** depth, (h, w, ch) if depth == 8 else (h, w), dtype=np.int64).astype(np.uint8)
        interlace = bool(rnd.integers(0, 2))
        yield f"t{i:05d}_{w}x{h}_c{ctype}d{depth}{'_i' if interlace else ''}.png", \
            filtered_png(a, ctype, depth, interlace, rnd), f"colour type {ctype}, depth {depth}"


def interlaced_png(im):
    """Pillow cannot write Adam7; build it by hand (filter type 0 everywhere)."""
    a = np.asarray(im)
    h, w, _ = a.shape
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = a[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        for row in sub:
            raw += b"\x00" + row.tobytes()
    ihdr = w.to_bytes(4, "big") + h.to_bytes(4, "big") + b"\x08\x02\x00\x00\x01"
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b"")


def rgb16_png(a):
    h, w, _ = a.shape
    raw = b"".join(b"\x00" + row.tobytes() for row in a)
    ihdr = w.to_bytes(4, "big") + h.to_bytes(4, "big") + b"\x10\x02\x00\x00\x00"
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b"")


def main():
    args = sys.argv[1:]
    if args and args[0] == "--sweep":
        outdir, n = pathlib.Path(args[1]), int(args[2])
        outdir.mkdir(parents=True, exist_ok=True)
        rows = []
        rnd = np.random.default_rng(99)
        for name, data, note in list(jpeg_cases(rnd, count=n)) + list(png_sweep_cases(rnd, n // 3)):
            record(rows, name, data, note, outdir)
    else:
        outdir = OUT
        outdir.mkdir(parents=True, exist_ok=True)
        for f in outdir.glob("*"):
            f.unlink()
        rows = []
        rnd = np.random.default_rng(7)
        for name, data, note in list(jpeg_cases(rnd)) + list(png_cases(rnd)) + list(exotic_cases(rnd)):
            record(rows, name, data, note, outdir)
    doc = {"generator": "scripts/reference/golden_imageio.py", "pillow": PIL.__version__,
           "libjpeg_turbo": PIL.features.version("libjpeg_turbo"), "cases": rows}
    with open(outdir / "golden.json", "w") as f:
        f.write("{\n" + ",\n".join(f' "{k}": {json.dumps(v)}' for k, v in doc.items() if k != "cases"))
        f.write(',\n "cases": [\n' + ",\n".join("  " + json.dumps(r) for r in rows) + "\n ]\n}\n")
    total = sum(r["bytes"] for r in rows)
    print(f"wrote {len(rows)} files ({total} bytes) to {outdir}", file=sys.stderr)


if __name__ == "__main__":
    import PIL.features  # noqa: F401
    main()
