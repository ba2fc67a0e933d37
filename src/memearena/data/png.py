"""A small, fast, deterministic lossless PNG writer (zlib and numpy).

Pillow's PNG encoder chooses a filter for every row adaptively and cannot be told not to: at
any zlib level it spends most of its time on that choice (1.3 ms for a 320x320 RGB image whose
raw bytes take 0.06 ms to copy). The images the pipelines make need none of it. This writer
applies one filter to the whole image, chosen by a cheap rule measured on the demo images and
on photo-like pixels (``bench/png.py``):

* **graphics** (flat colours: most bytes equal the one a pixel to their left, on a sample of
  rows): no filter, zlib's default strategy. Long runs of equal bytes are what deflate's
  matches find; a filter would only turn each colour edge into two.
* **anything else** (photos, noise, gradients): the Up filter (each byte minus the one above)
  and zlib's run-length strategy, which on filtered photo rows compresses as well as the
  default strategy in about half the time.

zlib level 1 either way. The container is the standard one: signature, IHDR, the text
chunks (uncompressed iTXt, read back by Pillow into ``Image.info``), one IDAT, IEND, each
chunk with its CRC-32. The same pixels and text always give the same bytes (for a given zlib
build), so content hashes and request keys made from them are stable.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from typing import Literal

import numpy as np
from PIL import Image

__all__ = ["RowFilter", "encode_png"]

RowFilter = Literal["auto", "none", "up"]
"""The row filter: ``auto`` (the rule above), or one forced for the whole image."""

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOUR_TYPES: dict[int, int] = {1: 0, 2: 4, 3: 2, 4: 6}
"""Channels → PNG colour type (grey, grey + alpha, RGB, RGBA), 8 bits each."""
_MODE_CHANNELS: dict[str, int] = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}
_LEVEL = 1
_SAMPLE_ROWS = 32
_FLAT_SHARE = 0.8
"""A sampled byte equals the one a pixel to its left at least this often: a graphic. Measured
(``bench/png.py``): the audit's drawn variants 0.88-0.94, where no filter is both faster and
smaller; its transformed variants 0.06-0.67 and noisy photos 0.13, where Up wins on both."""
_IDAT_MAX = 1 << 30
"""An IDAT chunk's largest payload (PNG allows 2^31 - 1 bytes a chunk)."""


def _chunk(kind: bytes, data: bytes | memoryview) -> bytes:
    crc = zlib.crc32(data, zlib.crc32(kind))
    return b"".join((struct.pack(">I", len(data)), kind, data, struct.pack(">I", crc)))


def _itxt(key: str, value: str) -> bytes:
    """An uncompressed iTXt chunk: keyword, no compression, no language, no translated key."""
    try:
        keyword = key.encode("latin-1")
    except UnicodeEncodeError:
        keyword = b""
    if not 1 <= len(keyword) <= 79 or b"\0" in keyword:
        raise ValueError(f"PNG text key {key!r}: 1-79 Latin-1 characters, no NUL")
    return _chunk(b"iTXt", keyword + b"\0\0\0\0\0" + value.encode("utf-8"))


def _pixels(image: Image.Image | np.ndarray) -> np.ndarray:
    """The image as a C-contiguous (height, width, channels) uint8 array."""
    if isinstance(image, Image.Image):
        if image.mode not in _MODE_CHANNELS:
            raise ValueError(f"PNG writer: mode {image.mode!r} (convert to L, LA, RGB or RGBA)")
        a = np.asarray(image)
    else:
        a = np.ascontiguousarray(image)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in _COLOUR_TYPES:
        raise ValueError(f"PNG writer: want 8-bit pixels of 1-4 channels, got {a.dtype} {a.shape}")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"PNG writer: an image needs at least one pixel, got {a.shape[:2]}")
    return a


def _is_flat(a: np.ndarray) -> bool:
    """Whether most bytes of a sample of rows equal the byte one pixel to their left (a
    graphic): one comparison over about ``_SAMPLE_ROWS`` rows, a few microseconds."""
    h, w, c = a.shape
    if w < 2:
        return True
    rows = a[:: max(1, h // _SAMPLE_ROWS)].reshape(-1, w * c)
    same = np.count_nonzero(rows[:, c:] == rows[:, :-c])
    return same >= _FLAT_SHARE * rows.shape[0] * (w - 1) * c


def _filtered(a: np.ndarray, up: bool) -> np.ndarray:
    """Each row prefixed by its filter type byte (0 none, 2 Up), the rows' bytes filtered."""
    h, w, c = a.shape
    flat = a.reshape(h, w * c)
    out = np.empty((h, w * c + 1), dtype=np.uint8)
    out[:, 0] = 2 if up else 0
    if up:
        # Up: each byte minus the byte above it, modulo 256 (the first row: minus zero).
        out[0, 1:] = flat[0]
        np.subtract(flat[1:], flat[:-1], out=out[1:, 1:])
    else:
        out[:, 1:] = flat
    return out


def encode_png(
    image: Image.Image | np.ndarray,
    text: Mapping[str, str] | None = None,
    *,
    row_filter: RowFilter = "auto",
) -> bytes:
    """``image`` (a Pillow image in mode L, LA, RGB or RGBA, or an 8-bit array of shape
    (height, width[, channels])) as PNG bytes, losslessly, with ``text`` as iTXt chunks in
    key order (Pillow reads them back into ``Image.info``). Deterministic: the same pixels
    and text give the same bytes."""
    a = _pixels(image)
    h, w, c = a.shape
    if row_filter == "auto":
        up = not _is_flat(a)
    elif row_filter in ("none", "up"):
        up = row_filter == "up"
    else:
        raise ValueError(f"PNG writer: unknown row filter {row_filter!r}")
    strategy = zlib.Z_RLE if up else zlib.Z_DEFAULT_STRATEGY
    comp = zlib.compressobj(_LEVEL, zlib.DEFLATED, 15, 8, strategy)
    data = comp.compress(_filtered(a, up).data) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", w, h, 8, _COLOUR_TYPES[c], 0, 0, 0)
    view = memoryview(data)
    parts = [_SIGNATURE, _chunk(b"IHDR", ihdr)]
    parts.extend(_itxt(k, v) for k, v in sorted((text or {}).items()))
    parts.extend(_chunk(b"IDAT", view[i : i + _IDAT_MAX]) for i in range(0, len(data), _IDAT_MAX))
    parts.append(_chunk(b"IEND", b""))
    return b"".join(parts)
