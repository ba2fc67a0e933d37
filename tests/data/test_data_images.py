"""Safe image I/O: confinement to the dataset root, bombs, orientation, resizing, hashing."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
from pathlib import Path

import pytest
from data_helpers import png_bomb, write_image, write_noise
from PIL import Image, ImageOps

from memearena.config import DatasetConfig, ImageConfig
from memearena.data import (
    ImageError,
    load_dataset,
    prepare_image,
    safe_join,
    verify_image,
)
from memearena.errors import DataError


def _decode(data_url: str) -> Image.Image:
    header, b64 = data_url.split(",", 1)
    assert header.startswith("data:image/") and header.endswith(";base64")
    return Image.open(io.BytesIO(base64.b64decode(b64)))


# --- safe_join -------------------------------------------------------------------------------


def test_safe_join_resolves_inside_root(tmp_path: Path) -> None:
    assert safe_join(tmp_path, "img/a.png") == (tmp_path / "img" / "a.png").resolve()
    assert safe_join(tmp_path, "img/../b.png") == (tmp_path / "b.png").resolve()


@pytest.mark.parametrize("rel", ["../secret.png", "img/../../secret.png", "/etc/passwd", ""])
def test_safe_join_rejects_escapes(tmp_path: Path, rel: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(DataError):
        safe_join(root, rel)


def test_safe_join_rejects_symlink_pointing_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = write_image(tmp_path / "outside.png")
    os.symlink(outside, root / "link.png")
    with pytest.raises(ImageError) as e:
        safe_join(root, "link.png")
    assert e.value.kind == "path escapes root"


# --- checks ----------------------------------------------------------------------------------


def test_missing_empty_corrupt_truncated_images_raise_naming_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    corrupt = tmp_path / "corrupt.jpg"
    corrupt.write_bytes(b"\xff\xd8\xff garbage" * 20)
    truncated = write_noise(tmp_path / "trunc.png", (128, 128))
    truncated.write_bytes(truncated.read_bytes()[:2000])
    cases = {
        tmp_path / "nope.png": "missing image",
        empty: "empty image",
        corrupt: "corrupt image",
        truncated: "corrupt image",
    }
    for path, kind in cases.items():
        with pytest.raises(ImageError) as e:
            prepare_image(path)
        assert e.value.kind == kind
        assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_png_header_claiming_huge_size_is_a_decompression_bomb(tmp_path: Path) -> None:
    for w, h in [(100_000, 100_000), (8_000, 8_000)]:  # above Pillow's limit / above ours
        bomb = png_bomb(tmp_path / f"bomb{w}.png", w, h)
        with pytest.raises(ImageError) as e:
            verify_image(bomb)
        assert e.value.kind == "decompression bomb"


def test_real_image_above_max_pixels_is_rejected(tmp_path: Path) -> None:
    path = write_image(tmp_path / "big.png", (100, 50))
    with pytest.raises(ImageError, match="decompression bomb"):
        prepare_image(path, ImageConfig(max_pixels=4_999))
    assert prepare_image(path, ImageConfig(max_pixels=5_000)).width == 100


def test_unsupported_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.png"
    Image.new("RGB", (8, 8)).save(path, format="TIFF")
    with pytest.raises(ImageError, match="corrupt image"):
        prepare_image(path)


# --- preparation -----------------------------------------------------------------------------


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    path = tmp_path / "rotated.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise when displayed
    Image.new("RGB", (40, 20), "blue").save(path, exif=exif)
    prepared = prepare_image(path)
    assert (prepared.width, prepared.height) == (20, 40)
    assert _decode(prepared.data_url).size == (20, 40)


def test_resize_respects_max_side_keeps_aspect_and_never_upscales(tmp_path: Path) -> None:
    big = write_image(tmp_path / "big.png", (400, 100))
    p = prepare_image(big, ImageConfig(max_side=100))
    assert (p.width, p.height) == (100, 25)
    assert _decode(p.data_url).size == (100, 25)
    small = write_image(tmp_path / "small.png", (40, 30))
    p = prepare_image(small, ImageConfig(max_side=100))
    assert (p.width, p.height) == (40, 30)


def test_graphics_encode_as_png_and_photos_as_jpeg(tmp_path: Path) -> None:
    flat = prepare_image(write_image(tmp_path / "flat.png", (64, 64)))
    assert flat.mime == "image/png" and flat.data_url.startswith("data:image/png;base64,")
    photo = prepare_image(write_noise(tmp_path / "photo.png", (128, 128)))
    assert photo.mime == "image/jpeg" and _decode(photo.data_url).format == "JPEG"


def test_transparency_is_composited_on_white(tmp_path: Path) -> None:
    path = tmp_path / "alpha.png"
    Image.new("RGBA", (10, 10), (255, 0, 0, 0)).save(path)
    im = _decode(prepare_image(path).data_url).convert("RGB")
    assert im.getpixel((5, 5)) == (255, 255, 255)


def test_content_hash_is_stable_and_depends_on_content_only(tmp_path: Path) -> None:
    a = write_noise(tmp_path / "a.png", (96, 96), seed=1)
    copy = tmp_path / "sub" / "copy.png"
    copy.parent.mkdir()
    shutil.copy(a, copy)
    other = write_noise(tmp_path / "b.png", (96, 96), seed=2)
    h1, h2 = prepare_image(a).sha256, prepare_image(a).sha256
    assert h1 == h2 == prepare_image(copy).sha256
    assert len(h1) == 64 and h1 != prepare_image(other).sha256
    # The hash covers what is sent: a different max_side is a different image.
    assert prepare_image(a, ImageConfig(max_side=64)).sha256 != h1


def test_animated_gif_uses_first_frame(tmp_path: Path) -> None:
    path = tmp_path / "anim.gif"
    frames = [Image.new("RGB", (16, 16), c) for c in ("red", "green")]
    frames[0].save(path, save_all=True, append_images=frames[1:])
    im = _decode(prepare_image(path).data_url).convert("RGB")
    assert im.getpixel((8, 8)) == (255, 0, 0)


def test_verify_image_returns_the_stored_size(tmp_path: Path) -> None:
    path = write_image(tmp_path / "wide.jpg", (400, 100))
    assert verify_image(path) == (400, 100)


# --- encoded bytes stay what they were -------------------------------------------------------


def _reference_bytes(path: Path, max_side: int = 1024) -> bytes:
    """The encoding recipe as first written (decode, orient on a copy, RGB copy, resize, count
    colours, encode): the bytes every image hash and request key was made from."""
    with Image.open(path) as probe:
        probe.verify()
    with Image.open(path) as im:
        im.seek(0)
        if im.format == "JPEG":
            im.draft("RGB", (max_side, max_side))
        im.load()
        oriented = ImageOps.exif_transpose(im)
        if oriented.mode in ("RGBA", "LA", "PA") or (
            oriented.mode == "P" and "transparency" in oriented.info
        ):
            rgba = oriented.convert("RGBA")
            rgb = Image.new("RGB", rgba.size, (255, 255, 255))
            rgb.paste(rgba, mask=rgba.getchannel("A"))
        elif oriented.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
            rgb = oriented.convert("I").point(lambda v: v / 256).convert("L").convert("RGB")
        else:
            rgb = oriented.convert("RGB")
        if max(rgb.size) > max_side:
            rgb.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
        buf = io.BytesIO()
        if rgb.getcolors(maxcolors=4096) is not None:
            rgb.save(buf, format="PNG", compress_level=6)
        else:
            rgb.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _prepared_bytes(path: Path, max_side: int = 1024) -> bytes:
    p = prepare_image(path, ImageConfig(max_side=max_side))
    data = base64.b64decode(p.data_url.split(",", 1)[1])
    assert p.sha256 == hashlib.sha256(data).hexdigest()
    with Image.open(io.BytesIO(data)) as im:
        assert (p.width, p.height) == im.size
    return data


def test_demo_images_encode_to_the_same_bytes_as_ever() -> None:
    memes = [m for m in load_dataset(DatasetConfig(format="demo")).memes if m.image_path]
    paths = [m.image_path for m in memes] + [m.erased_image for m in memes if m.erased_image]
    assert len(memes) == 24 and len(paths) > 24
    for path in paths:
        assert path is not None
        assert _prepared_bytes(path) == _reference_bytes(path), path


def _exif_rotated(path: Path) -> Path:
    im = Image.effect_noise((120, 60), 60).convert("RGB")
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 270 to display
    im.save(path, exif=exif.tobytes(), quality=95)
    return path


def _sources(tmp: Path) -> list[Path]:
    noise = Image.effect_noise((300, 200), 80)
    graphic = Image.new("RGB", (1500, 900), (20, 120, 200))
    graphic.paste((250, 250, 0), (100, 100, 700, 500))
    palette = graphic.convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    transparent = palette.copy()
    transparent.info["transparency"] = 0
    rgba = noise.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(rgba.size))
    made = {
        "photo.jpg": noise.convert("RGB").resize((1800, 1200)),
        "photo_small.jpg": noise.convert("RGB"),
        "photo.png": Image.merge(
            "RGB", [noise, noise.transpose(Image.Transpose.ROTATE_180), noise]
        ),
        "graphic.png": graphic,
        "graphic_small.png": graphic.resize((400, 240)),
        "palette.png": palette,
        "palette_big.gif": palette,
        "palette_small.png": palette.resize((300, 180)),
        "transparent.png": transparent,
        "rgba.png": rgba,
        "grey.png": noise,
        "bilevel.png": noise.convert("1"),
        "deep.png": noise.convert("I").point(lambda v: v * 200).convert("I;16"),
        "photo.webp": noise.convert("RGB"),
    }
    paths = []
    for name, im in made.items():
        im.save(tmp / name)
        paths.append(tmp / name)
    return [*paths, _exif_rotated(tmp / "rotated.jpg")]


@pytest.mark.parametrize("max_side", [1024, 256])
def test_every_kind_of_source_encodes_to_the_same_bytes_as_ever(
    tmp_path: Path, max_side: int
) -> None:
    for path in _sources(tmp_path):
        assert _prepared_bytes(path, max_side) == _reference_bytes(path, max_side), path.name


@pytest.mark.parametrize("kind", ["graphic", "photo"])
def test_encoded_bytes_are_the_prepared_images(tmp_path: Path, kind: str) -> None:
    from memearena.data.images import encode_image

    path = (
        write_image(tmp_path / "g.png", (40, 30), "blue")
        if kind == "graphic"
        else write_noise(tmp_path / "p.png", (80, 80))
    )
    enc, prep = encode_image(path), prepare_image(path)
    assert enc.mime == ("image/png" if kind == "graphic" else "image/jpeg")
    assert f"data:{enc.mime};base64,{base64.b64encode(enc.data).decode()}" == prep.data_url
    assert hashlib.sha256(enc.data).hexdigest() == prep.sha256
    assert (enc.mime, enc.width, enc.height) == (prep.mime, prep.width, prep.height)
