"""The PNG writer: lossless for every mode and size, standard chunks, text, deterministic bytes."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, PngImagePlugin

from memearena.data import demo_dir, encode_png
from memearena.data import png as png_module

CHANNELS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, payload) of every chunk, each CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    out, at = [], 8
    while at < len(data):
        (n,) = struct.unpack(">I", data[at : at + 4])
        kind, payload = data[at + 4 : at + 8], data[at + 8 : at + 8 + n]
        (crc,) = struct.unpack(">I", data[at + 8 + n : at + 12 + n])
        assert crc == zlib.crc32(kind + payload), kind
        out.append((kind, payload))
        at += 12 + n
    assert at == len(data)
    return out


def _filters(data: bytes) -> set[int]:
    """The filter type bytes of every row."""
    chunks = _chunks(data)
    w, h, _depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    raw = zlib.decompress(b"".join(p for k, p in chunks if k == b"IDAT"))
    stride = w * {0: 1, 4: 2, 2: 3, 6: 4}[colour] + 1
    assert len(raw) == h * stride
    return {raw[i * stride] for i in range(h)}


def _decoded(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data), formats=("PNG",)) as im:
        im.load()
        return im


def _image(mode: str, size: tuple[int, int], flat: bool, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    w, h = size
    if flat:  # a graphic: a few solid blocks of colour
        a = np.zeros((h, w, CHANNELS[mode]), dtype=np.uint8)
        for _ in range(4):
            y0, x0 = rng.integers(0, h), rng.integers(0, w)
            a[y0:, x0:] = rng.integers(0, 256, CHANNELS[mode], dtype=np.uint8)
    else:
        a = rng.integers(0, 256, (h, w, CHANNELS[mode]), dtype=np.uint8)
    return Image.fromarray(a[:, :, 0] if mode == "L" else a, mode)


@settings(max_examples=150, deadline=None)
@given(
    mode=st.sampled_from(sorted(CHANNELS)),
    width=st.integers(1, 41),
    height=st.integers(1, 37),
    flat=st.booleans(),
    row_filter=st.sampled_from(["auto", "none", "up"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_pillow_decodes_the_very_pixels_for_every_mode_and_size(
    mode: str, width: int, height: int, flat: bool, row_filter: str, seed: int
) -> None:
    im = _image(mode, (width, height), flat, seed)
    data = encode_png(im, row_filter=row_filter)  # type: ignore[arg-type]
    out = _decoded(data)
    assert out.mode == mode and out.size == (width, height)
    assert out.tobytes() == im.tobytes()
    with Image.open(io.BytesIO(data)) as again:
        again.verify()  # Pillow's own check of the chunks and their CRCs


def test_one_pixel_and_odd_widths_in_both_filters() -> None:
    for size in ((1, 1), (1, 7), (7, 1), (3, 5), (321, 3)):
        im = _image("RGB", size, False, 1)
        for row_filter in ("none", "up"):
            data = encode_png(im, row_filter=row_filter)  # type: ignore[arg-type]
            assert _filters(data) == {0 if row_filter == "none" else 2}
            assert _decoded(data).tobytes() == im.tobytes()


def test_an_array_and_its_image_give_the_same_bytes() -> None:
    im = _image("RGB", (33, 17), True, 3)
    assert encode_png(np.asarray(im)) == encode_png(im)
    grey = _image("L", (9, 4), False, 4)
    assert encode_png(np.asarray(grey)) == encode_png(grey)  # (h, w): one channel


def test_text_is_read_back_by_pillow_as_pillow_writes_it() -> None:
    im = _image("RGB", (20, 10), True, 5)
    meta = {"memearena:shows": "“quoted” ünïcode = text", "memearena:inserted": "a\nb", "k": ""}
    data = encode_png(im, meta)
    info = PngImagePlugin.PngInfo()
    for k, v in sorted(meta.items()):
        info.add_itxt(k, v)
    buf = io.BytesIO()
    im.save(buf, format="PNG", pnginfo=info)
    with Image.open(io.BytesIO(data)) as ours, Image.open(buf) as pillows:
        assert ours.info == pillows.info
        assert {k: ours.info[k] for k in meta} == meta
    # The chunks: IHDR, the text in key order, IDAT, IEND.
    kinds = [k for k, _ in _chunks(data)]
    assert kinds == [b"IHDR", b"iTXt", b"iTXt", b"iTXt", b"IDAT", b"IEND"]
    keys = [p.split(b"\0", 1)[0] for k, p in _chunks(data) if k == b"iTXt"]
    assert keys == sorted(keys)


def test_the_same_pixels_and_text_give_the_same_bytes() -> None:
    im = _image("RGBA", (50, 40), False, 6)
    meta = {"b": "2", "a": "1"}
    assert encode_png(im, meta) == encode_png(im.copy(), dict(reversed(meta.items())))
    assert encode_png(im, meta) != encode_png(im, {"a": "1"})


def test_graphics_are_left_unfiltered_and_photos_get_the_up_filter() -> None:
    with Image.open(demo_dir() / "img" / "m01.png") as im:
        graphic = im.convert("RGB")
    assert _filters(encode_png(graphic)) == {0}
    y, x = np.mgrid[0:120, 0:160]
    smooth = np.stack([(x + y) % 256, (2 * x) % 256, (3 * y) % 256], -1).astype(np.uint8)
    noise = np.random.default_rng(0).integers(-3, 4, smooth.shape)
    photo = np.clip(smooth + noise, 0, 255).astype(np.uint8)
    assert _filters(encode_png(photo)) == {2}
    assert _decoded(encode_png(photo)).tobytes() == photo.tobytes()


def test_a_large_image_spreads_over_several_idat_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(png_module, "_IDAT_MAX", 100)
    im = _image("RGB", (64, 48), False, 7)
    data = encode_png(im)
    assert sum(k == b"IDAT" for k, _ in _chunks(data)) > 1
    assert _decoded(data).tobytes() == im.tobytes()


@pytest.mark.parametrize(
    ("image", "match"),
    [
        (Image.new("P", (4, 4)), "mode 'P'"),
        (Image.new("I;16", (4, 4)), "mode 'I;16'"),
        (np.zeros((4, 4, 3), dtype=np.float32), "8-bit"),
        (np.zeros((4, 4, 5), dtype=np.uint8), "1-4 channels"),
        (np.zeros((0, 4, 3), dtype=np.uint8), "at least one pixel"),
    ],
)
def test_what_it_cannot_write_is_refused(image: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        encode_png(image)  # type: ignore[arg-type]


def test_text_keys_follow_the_png_keyword_rules() -> None:
    im = Image.new("RGB", (2, 2))
    for key in ("", "x" * 80, "a\0b", "ключ"):
        with pytest.raises(ValueError, match="PNG text key"):
            encode_png(im, {key: "v"})
    with pytest.raises(ValueError, match="row filter"):
        encode_png(im, row_filter="paeth")  # type: ignore[arg-type]
