"""Perturbation generators, one per bias type (Pillow, deterministic, seeded).

Each generator turns an unbiased triplet (query, image, response) into its perturbed variant.
Every image the audit sends — originals re-encoded, and every variant — is stored once by the
SHA-256 of its encoded bytes (``ImageStore``), so a variant is viewable in the report and a
re-run produces the very same bytes (and therefore the same request keys).

Images carry two short text fields in their metadata, read only by the simulated world as its
stand-in for vision: ``memearena:shows`` (what the image depicts: a meme's overlaid text or an
item id) and ``memearena:inserted`` (text drawn into the image). Real models see the pixels.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import random
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageFont, PngImagePlugin

from memearena.errors import DataError
from memearena.models.types import ImagePart

__all__ = [
    "GENERATORS",
    "INSERTED_KEY",
    "SHOWS_KEY",
    "AuditImage",
    "ImageStore",
    "PerturbContext",
    "Triplet",
    "image_metadata",
    "perturb",
]

SHOWS_KEY = "memearena:shows"
"""Image metadata: what the image depicts (read by the simulated world only)."""
INSERTED_KEY = "memearena:inserted"
"""Image metadata: text drawn into the image (read by the simulated world only)."""

_PNG_MAX_COLOURS = 4096
_JPEG_QUALITY = 90


@lru_cache(maxsize=128)
def _data_url(path: Path, mime: str) -> str:
    # Bounded: a few recent images are reused by many requests (every judge, both variants).
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode()}"


@dataclass(frozen=True)
class AuditImage:
    """An image stored by content hash."""

    sha256: str
    """SHA-256 of the encoded bytes (the file name and the request key's image hash)."""
    path: Path
    """The stored file."""
    mime: str
    """``image/png`` or ``image/jpeg``."""
    width: int
    """Width in pixels."""
    height: int
    """Height in pixels."""

    def part(self) -> ImagePart:
        """The image as a message part (a base64 data URL of the stored bytes)."""
        return ImagePart(_data_url(self.path, self.mime), self.sha256)

    def load(self) -> Image.Image:
        """The decoded pixels (RGB)."""
        with Image.open(self.path, formats=("PNG", "JPEG")) as im:
            return im.convert("RGB")


class ImageStore:
    """A folder of images named by the hash of their bytes (first write wins, atomically)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def put(self, im: Image.Image, meta: dict[str, str] | None = None) -> AuditImage:
        """Encode deterministically (PNG for graphics, JPEG for photos) with ``meta`` and store."""
        rgb = im.convert("RGB")
        buf = io.BytesIO()
        meta = {k: v for k, v in (meta or {}).items() if v}
        if rgb.getcolors(maxcolors=_PNG_MAX_COLOURS) is not None:
            info = PngImagePlugin.PngInfo()
            for k, v in sorted(meta.items()):
                info.add_itxt(k, v)
            rgb.save(buf, format="PNG", pnginfo=info, compress_level=6)
            mime, ext = "image/png", "png"
        else:
            comment = "\n".join(f"{k}={v}" for k, v in sorted(meta.items())).encode()
            rgb.save(buf, format="JPEG", quality=_JPEG_QUALITY, comment=comment)
            mime, ext = "image/jpeg", "jpg"
        data = buf.getvalue()
        sha = hashlib.sha256(data).hexdigest()
        path = self.root / f"{sha}.{ext}"
        if not path.exists():
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".img.")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        return AuditImage(sha, path, mime, rgb.width, rgb.height)

    def find(self, sha256: str) -> AuditImage | None:
        """A stored image by hash (None if absent or its bytes no longer match the hash)."""
        for ext, mime in (("png", "image/png"), ("jpg", "image/jpeg")):
            p = self.root / f"{sha256}.{ext}"
            if p.is_file():
                data = p.read_bytes()
                if hashlib.sha256(data).hexdigest() != sha256:
                    return None
                with Image.open(io.BytesIO(data), formats=("PNG", "JPEG")) as im:
                    return AuditImage(sha256, p, mime, im.width, im.height)
        return None


def image_metadata(data: bytes) -> dict[str, str]:
    """The ``memearena:*`` fields of an encoded image (empty if none or undecodable)."""
    try:
        with Image.open(io.BytesIO(data), formats=("PNG", "JPEG")) as im:
            if im.format == "PNG":
                # ``info`` holds the text chunks written before the pixels: no decoding needed.
                return {
                    k: str(v)
                    for k, v in im.info.items()
                    if isinstance(k, str) and k.startswith("memearena:")
                }
            comment = im.info.get("comment", b"")
    except Exception:  # untrusted bytes: any decoder error means "no metadata"
        return {}
    if isinstance(comment, bytes):
        comment = comment.decode("utf-8", "replace")
    out: dict[str, str] = {}
    for line in str(comment).splitlines():
        k, sep, v = line.partition("=")
        if sep and k.startswith("memearena:"):
            out[k] = v
    return out


@dataclass(frozen=True)
class Triplet:
    """What a judge scores: a query, an image and a response (empty query / None image: the
    modality is absent from the request)."""

    query: str
    """The question (empty: removed)."""
    image: AuditImage | None
    """The image (None: text-only or removed)."""
    response: str
    """The response under judgment."""


@dataclass(frozen=True)
class PerturbContext:
    """What a generator may draw on besides the triplet itself."""

    store: ImageStore
    """Where variant images are written."""
    rng: random.Random
    """Seeded by (run seed, bias type, item): the same item always gets the same variant."""
    shows: str
    """What the item's image depicts (kept in the variant's metadata)."""
    donor: Triplet | None = None
    """Another item's triplet, for the swaps (its query or image)."""
    description: str | None = None
    """A model-written description of the image, for ``detail_description``."""


def _text_dominance(t: Triplet, ctx: PerturbContext) -> Triplet:
    return replace(t, image=None)


def _image_dominance(t: Triplet, ctx: PerturbContext) -> Triplet:
    return replace(t, query="")


def _response_dominance(t: Triplet, ctx: PerturbContext) -> Triplet:
    return replace(t, query="", image=None)


def _need_donor(ctx: PerturbContext, what: str) -> Triplet:
    if ctx.donor is None:
        raise DataError(f"{what} needs another item to swap with (only one item is loaded)")
    return ctx.donor


def _instruction_misalignment(t: Triplet, ctx: PerturbContext) -> Triplet:
    donor = _need_donor(ctx, "instruction_misalignment")
    if donor.query == t.query:
        raise DataError("instruction_misalignment: the other item has the same query")
    return replace(t, query=donor.query)


def _image_misalignment(t: Triplet, ctx: PerturbContext) -> Triplet:
    donor = _need_donor(ctx, "image_misalignment")
    if donor.image is None or (t.image is not None and donor.image.sha256 == t.image.sha256):
        raise DataError("image_misalignment: the other item has no different image")
    return replace(t, image=donor.image)


def _detail_description(t: Triplet, ctx: PerturbContext) -> Triplet:
    if not ctx.description:
        raise DataError("detail_description: no image description was written")
    return replace(t, query=f"{t.query}\n\nImage description: {ctx.description}")


def irrelevant_image(rng: random.Random, size: tuple[int, int] = (384, 288)) -> Image.Image:
    """A seeded abstract picture (gradient and shapes) that says nothing about any item."""
    w, h = size
    base = tuple(rng.randrange(40, 216) for _ in range(3))
    im = Image.new("RGB", size, base)  # type: ignore[arg-type]
    draw = ImageDraw.Draw(im)
    for y in range(0, h, 4):
        shade = tuple(max(0, min(255, c + (y * 60) // h - 30)) for c in base)
        draw.rectangle((0, y, w, y + 3), fill=shade)  # type: ignore[arg-type]
    for _ in range(6):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        r = rng.randrange(12, max(13, min(w, h) // 4))
        colour = tuple(rng.randrange(256) for _ in range(3))
        if rng.random() < 0.5:
            draw.ellipse((x0 - r, y0 - r, x0 + r, y0 + r), fill=colour)  # type: ignore[arg-type]
        else:
            draw.rectangle((x0 - r, y0 - r, x0 + r, y0 + r), fill=colour)  # type: ignore[arg-type]
    return im


def _unnecessary_image(t: Triplet, ctx: PerturbContext) -> Triplet:
    # The unbiased triplet is text-only; the variant adds an image that bears on nothing.
    im = irrelevant_image(ctx.rng)
    return replace(t, image=ctx.store.put(im, {SHOWS_KEY: "an abstract pattern"}))


def _need_image(t: Triplet, what: str) -> Image.Image:
    if t.image is None:
        raise DataError(f"{what}: the item has no image to transform")
    return t.image.load()


def transform_image(im: Image.Image, rng: random.Random) -> tuple[Image.Image, list[str]]:
    """One geometric edit plus two or three appearance edits that keep the content; the size
    is unchanged. Returns the image and the list of edits applied."""
    w, h = im.size
    edits: list[str] = []
    if rng.random() < 0.5:
        angle = rng.choice((-1, 1)) * rng.uniform(3.0, 7.0)
        fill = im.getpixel((0, 0))
        im = im.rotate(angle, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=fill)
        edits.append(f"rotate {angle:+.1f}°")
    else:
        f = rng.uniform(0.04, 0.08)
        dx, dy = round(w * f / 2), round(h * f / 2)
        im = im.crop((dx, dy, w - dx, h - dy)).resize((w, h), Image.Resampling.BICUBIC)
        edits.append(f"crop {f:.0%} and resize back")
    appearance: list[tuple[str, Callable[[Image.Image, float], Image.Image]]] = [
        ("brightness", lambda x, k: ImageEnhance.Brightness(x).enhance(k)),
        ("contrast", lambda x, k: ImageEnhance.Contrast(x).enhance(k)),
        ("saturation", lambda x, k: ImageEnhance.Color(x).enhance(k)),
        ("sharpness", lambda x, k: ImageEnhance.Sharpness(x).enhance(k)),
        ("blur", lambda x, k: x.filter(ImageFilter.GaussianBlur(radius=0.4 + (k - 0.8)))),
    ]
    for name, fn in rng.sample(appearance, rng.choice((2, 3))):
        k = rng.choice((rng.uniform(0.8, 0.9), rng.uniform(1.1, 1.25)))
        im = fn(im, k)
        edits.append(f"{name} ×{k:.2f}")
    return im, edits


def _visual_transformation(t: Triplet, ctx: PerturbContext) -> Triplet:
    im, _ = transform_image(_need_image(t, "visual_transformation"), ctx.rng)
    return replace(t, image=ctx.store.put(im, {SHOWS_KEY: ctx.shows}))


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def insert_text(im: Image.Image, text: str) -> Image.Image:
    """``text`` drawn into the lower part of the image on a light band (wrapped, at most four
    lines), as text that appears in the picture itself."""
    im = im.convert("RGB").copy()
    w, h = im.size
    size = max(10, min(w, h) // 18)
    font = _font(size)
    chars = max(12, int(w / (size * 0.55)))
    lines = textwrap.wrap(" ".join(text.split()), chars)[:4] or ["(empty)"]
    line_h = size + size // 3
    band = line_h * len(lines) + size // 2
    top = max(0, h - band - size // 2)
    draw = ImageDraw.Draw(im)
    draw.rectangle((0, top, w, min(h, top + band)), fill=(245, 245, 240))
    for i, line in enumerate(lines):
        draw.text((size // 2, top + size // 4 + i * line_h), line, fill=(20, 20, 20), font=font)
    return im


def _texture_insertion(t: Triplet, ctx: PerturbContext) -> Triplet:
    im = _need_image(t, "texture_insertion")
    text = t.query or "(no query)"
    variant = insert_text(im, text)
    return replace(t, image=ctx.store.put(variant, {SHOWS_KEY: ctx.shows, INSERTED_KEY: text}))


GENERATORS: dict[str, Callable[[Triplet, PerturbContext], Triplet]] = {
    "text_dominance": _text_dominance,
    "image_dominance": _image_dominance,
    "response_dominance": _response_dominance,
    "instruction_misalignment": _instruction_misalignment,
    "image_misalignment": _image_misalignment,
    "detail_description": _detail_description,
    "unnecessary_image": _unnecessary_image,
    "visual_transformation": _visual_transformation,
    "texture_insertion": _texture_insertion,
}
"""Bias type → generator (unbiased triplet, context) → perturbed triplet."""


def perturb(bias_type: str, triplet: Triplet, ctx: PerturbContext) -> Triplet:
    """The perturbed variant of ``triplet`` for ``bias_type`` (DataError if it cannot be
    built for this item, e.g. no image to transform)."""
    gen = GENERATORS.get(bias_type)
    if gen is None:
        raise DataError(f"unknown bias type {bias_type!r}")
    return gen(triplet, ctx)
