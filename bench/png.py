"""Bench: the package's PNG writer (``memearena.data.encode_png``) against Pillow's encoder.

Run: python bench/png.py [--repeats 9]

Image sets (RGB):

* ``graphics``: the demo memes' ``texture_insertion`` variants (320x320 flat colours with a
  translucent label: the PNGs the Judge audit stores);
* ``transformed``: the demo memes' ``visual_transformation`` variants (rotated or scaled, noise,
  grain, JPEG round trip: photo-like pixels; the audit stores these as JPEG, they stand here
  for a photo-like refined image);
* ``photo``: synthetic 512x339 photos (smooth colour fields plus Gaussian noise of sigma 2).

Per set and encoder: median CPU milliseconds per image over repeats (process time: other
processes on a shared machine do not count), mean KiB per image, and the ratio to Pillow at
zlib level 1 measured in the same run. Every output of the writer is decoded by Pillow and
compared with the input pixels, and the row filter its rule chose is shown.
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import struct
import time
import zlib
from collections.abc import Callable

import numpy as np
from PIL import Image

from memearena.data import demo_dir, encode_png
from memearena.methods.judge_audit.perturb import insert_text, transform_image


def _sets() -> dict[str, list[Image.Image]]:
    demo = []
    for p in sorted((demo_dir() / "img").glob("m*.png")):
        with Image.open(p) as im:
            demo.append(im.convert("RGB"))
    query = "Is this meme harmful? Refer to the image."
    inserted = [insert_text(im, query, rng=random.Random(i)).image for i, im in enumerate(demo)]
    transformed = [transform_image(im, random.Random(i)).image for i, im in enumerate(demo)]
    photos = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        y, x = np.mgrid[0:339, 0:512].astype(np.float64)
        field = np.stack(
            [
                128 + 60 * np.sin(x / 37 + c) * np.cos(y / 23 - c) + 40 * np.sin((x + y) / 71 + c)
                for c in range(3)
            ],
            -1,
        )
        field += rng.normal(0, 2, field.shape)
        photos.append(Image.fromarray(np.clip(field, 0, 255).astype(np.uint8), "RGB"))
    return {"graphics": inserted, "transformed": transformed, "photo": photos}


def _pillow(level: int) -> Callable[[Image.Image], bytes]:
    def enc(im: Image.Image) -> bytes:
        buf = io.BytesIO()
        im.save(buf, format="PNG", compress_level=level)
        return buf.getvalue()

    return enc


def _filter_of(data: bytes) -> str:
    """The first row's filter type (the writer uses one for the whole image)."""
    w = struct.unpack(">I", data[16:20])[0]
    at, idat = 8, b""
    while at < len(data):
        (n,) = struct.unpack(">I", data[at : at + 4])
        if data[at + 4 : at + 8] == b"IDAT":
            idat += data[at + 8 : at + 8 + n]
        at += 12 + n
    first = zlib.decompressobj().decompress(idat, 3 * w + 1)[0]
    return {0: "none", 2: "up"}.get(first, str(first))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    encoders: list[tuple[str, Callable[[Image.Image], bytes]]] = [
        ("Pillow level 1", _pillow(1)),
        ("Pillow level 6", _pillow(6)),
        ("writer (auto rule)", encode_png),
        ("writer, none+default", lambda im: encode_png(im, row_filter="none")),
        ("writer, Up+RLE", lambda im: encode_png(im, row_filter="up")),
    ]
    print(f"PNG encode, CPU ms per image (median of {args.repeats}) and KiB per image")
    for name, images in _sets().items():
        w, h = images[0].size
        print(f"  {name} ({len(images)} images, {w}x{h})")
        for im in images:  # lossless, or the figures below mean nothing
            back = Image.open(io.BytesIO(encode_png(im)))
            assert back.tobytes() == im.tobytes(), "the writer lost pixels"
        chosen = sorted({_filter_of(encode_png(im)) for im in images})
        base = 0.0
        for label, enc in encoders:
            times = []
            for _ in range(args.repeats):
                t0 = time.process_time()
                out = [enc(im) for im in images]
                times.append((time.process_time() - t0) / len(images))
            ms = 1000 * statistics.median(times)
            kib = sum(map(len, out)) / len(out) / 1024
            base = base or ms
            note = f"  (rule chose: {', '.join(chosen)})" if label.endswith("rule)") else ""
            print(f"    {label:<21} {ms:7.2f} ms {kib:7.1f} KiB  {ms / base:5.2f}x{note}")


if __name__ == "__main__":
    main()
