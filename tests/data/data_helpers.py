"""Helpers for the data tests: tiny images and dataset files in the exact published formats."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from PIL import Image


def write_image(
    path: Path, size: tuple[int, int] = (32, 24), color: str | tuple[int, ...] = "red", **save: Any
) -> Path:
    """A small solid-colour image; the format follows the extension."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path, **save)
    return path


def write_noise(path: Path, size: tuple[int, int] = (64, 64), seed: int = 0) -> Path:
    """A photo-like image (random pixels)."""
    import random

    rng = random.Random(seed)
    im = Image.new("RGB", size)
    im.putdata(
        [
            (rng.randrange(256), rng.randrange(256), rng.randrange(256))
            for _ in range(size[0] * size[1])
        ]
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    im.save(path)
    return path


def png_bomb(path: Path, width: int, height: int) -> Path:
    """A few-byte PNG whose header claims ``width`` x ``height`` pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_jsonl(path: Path, rows: Iterable[dict[str, Any] | str]) -> Path:
    """One JSON object (or a raw string, for malformed lines) per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


BAD_KINDS = {
    "missing": "missing image",
    "empty": "empty image",
    "corrupt": "corrupt image",
    "truncated": "corrupt image",
    "bomb": "decompression bomb",
    "traversal": "path escapes root",
    "absolute": "path escapes root",
}
"""The error kind each of ``bad_images`` must produce."""
