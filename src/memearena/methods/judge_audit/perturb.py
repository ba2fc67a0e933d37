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
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageFont, PngImagePlugin

from memearena.errors import DataError
from memearena.models.types import ImagePart

__all__ = [
    "AESTHETIC_EDITS",
    "GENERATORS",
    "GEOMETRIC_EDITS",
    "INSERTED_KEY",
    "SHOWS_KEY",
    "AuditImage",
    "ImageStore",
    "Inserted",
    "PerturbContext",
    "Transformed",
    "Triplet",
    "image_metadata",
    "insert_text",
    "perturb",
    "structural_similarity",
    "text_regions",
    "transform_image",
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
    """Another item's triplet, for the swaps (its query or image) and ``unnecessary_image``."""
    description: str | None = None
    """A model-written description of the image, for ``detail_description``."""
    own_image: AuditImage | None = None
    """The item's own image (``unnecessary_image``: the attached image must differ from it)."""
    max_cover: float = 0.10
    """``texture_insertion``: the largest share of the image area the inserted text may cover."""
    notes: dict[str, str] = field(default_factory=dict)
    """Facts a generator records about the variant it built (e.g. ``covered_share``)."""


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


def _unnecessary_image(t: Triplet, ctx: PerturbContext) -> Triplet:
    # The unbiased triplet is text-only (a self-contained question and an answer written for
    # it); the variant attaches a real image of other content: another item's image, whose
    # bytes differ from this item's own image.
    if t.image is not None:
        raise DataError("unnecessary_image: the unbiased item must be text-only")
    donor = _need_donor(ctx, "unnecessary_image")
    if donor.image is None:
        raise DataError("unnecessary_image: the other item has no image")
    if ctx.own_image is not None and donor.image.sha256 == ctx.own_image.sha256:
        raise DataError("unnecessary_image: the other item's image is this item's own")
    ctx.notes["attached_image"] = donor.image.sha256
    return replace(t, image=donor.image)


def _need_image(t: Triplet, what: str) -> Image.Image:
    if t.image is None:
        raise DataError(f"{what}: the item has no image to transform")
    return t.image.load()


# ---------------------------------------------------------------- visual transformation


def _np_rng(rng: random.Random) -> np.random.Generator:
    return np.random.default_rng(rng.randrange(2**32))


def _rotate_fit(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    # The canvas grows with the rotation and is scaled back: nothing is cut off.
    w, h = im.size
    angle = rng.choice((-1, 1)) * rng.uniform(2.0, 4.0)
    fill = im.getpixel((0, 0))
    rot = im.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=fill)
    return _fit(rot, (w, h), fill), f"rotate {angle:+.1f}° (whole image kept)"


def _zoom_out(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    w, h = im.size
    f = rng.uniform(0.90, 0.96)
    small = im.resize((max(1, round(w * f)), max(1, round(h * f))), Image.Resampling.LANCZOS)
    return _fit(small, (w, h), im.getpixel((0, 0))), f"scale ×{f:.2f} on a padded canvas"


def _fit(im: Image.Image, size: tuple[int, int], fill: object) -> Image.Image:
    w, h = size
    k = min(w / im.width, h / im.height)
    nw, nh = max(1, round(im.width * k)), max(1, round(im.height * k))
    canvas = Image.new("RGB", size, fill)  # type: ignore[arg-type]
    canvas.paste(im.resize((nw, nh), Image.Resampling.LANCZOS), ((w - nw) // 2, (h - nh) // 2))
    return canvas


GEOMETRIC_EDITS: tuple[str, ...] = ("rotate", "zoom_out")
"""The geometric edits of ``visual_transformation`` (one is applied): a 2–4° rotation on an
expanded canvas scaled back, or a 90–96% scale on a padded canvas. Neither cuts anything off."""


def _arr(im: Image.Image) -> np.ndarray:
    return np.asarray(im.convert("RGB"), dtype=np.float64)


def _img(a: np.ndarray) -> Image.Image:
    return Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8), "RGB")


def _gamma(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    g = rng.choice((rng.uniform(0.88, 0.95), rng.uniform(1.05, 1.12)))
    return _img(255.0 * (_arr(im) / 255.0) ** g), f"gamma {g:.2f}"


def _temperature(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    k = rng.choice((-1, 1)) * rng.uniform(0.03, 0.06)
    a = _arr(im)
    a[..., 0] *= 1 + k
    a[..., 2] *= 1 - k
    return _img(a), f"colour temperature {k:+.2f}"


def _hue(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    shift = rng.choice((-1, 1)) * rng.randint(3, 7)
    hsv = np.asarray(im.convert("HSV"), dtype=np.int16).copy()
    hsv[..., 0] = (hsv[..., 0] + shift) % 256
    out = Image.fromarray(hsv.astype(np.uint8), "HSV").convert("RGB")
    return out, f"hue {shift:+d}/256"


def _noise(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    sigma = rng.uniform(2.0, 4.0)
    a = _arr(im)
    return _img(a + _np_rng(rng).normal(0.0, sigma, a.shape)), f"colour noise σ {sigma:.1f}"


def _grain(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    sigma = rng.uniform(2.0, 4.0)
    a = _arr(im)
    g = _np_rng(rng).normal(0.0, sigma, a.shape[:2])
    grain = np.asarray(
        Image.fromarray(np.clip(g * 10 + 128, 0, 255).astype(np.uint8)).filter(
            ImageFilter.GaussianBlur(0.6)
        ),
        dtype=np.float64,
    )
    return _img(a + ((grain - 128) / 10)[..., None]), f"film grain σ {sigma:.1f}"


def _vignette(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    k = rng.uniform(0.08, 0.15)
    a = _arr(im)
    h, w = a.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    r = np.hypot((xx - w / 2) / (w / 2), (yy - h / 2) / (h / 2)) / np.sqrt(2)
    return _img(a * (1 - k * r**2)[..., None]), f"vignette {k:.2f}"


def _jpeg(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    q = rng.randint(70, 85)
    buf = io.BytesIO()
    im.convert("RGB").save(buf, format="JPEG", quality=q)
    with Image.open(io.BytesIO(buf.getvalue()), formats=("JPEG",)) as j:
        return j.convert("RGB"), f"JPEG quality {q}"


def _enhance(kind: type[ImageEnhance._Enhance], name: str, lo: float, hi: float) -> Any:
    def edit(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
        k = rng.choice((rng.uniform(lo, 1 - (1 - lo) / 3), rng.uniform(1 + (hi - 1) / 3, hi)))
        return kind(im).enhance(k), f"{name} ×{k:.2f}"  # type: ignore[call-arg]

    return edit


def _blur(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    r = rng.uniform(0.3, 0.6)
    return im.filter(ImageFilter.GaussianBlur(radius=r)), f"blur radius {r:.2f}"


AESTHETIC_EDITS: dict[str, Callable[[Image.Image, random.Random], tuple[Image.Image, str]]] = {
    "brightness": _enhance(ImageEnhance.Brightness, "brightness", 0.90, 1.10),
    "contrast": _enhance(ImageEnhance.Contrast, "contrast", 0.88, 1.12),
    "saturation": _enhance(ImageEnhance.Color, "saturation", 0.85, 1.15),
    "sharpness": _enhance(ImageEnhance.Sharpness, "sharpness", 0.70, 1.50),
    "gamma": _gamma,
    "colour_temperature": _temperature,
    "hue": _hue,
    "blur": _blur,
    "noise": _noise,
    "grain": _grain,
    "vignette": _vignette,
    "jpeg": _jpeg,
}
"""The appearance edits of ``visual_transformation``, each at a strength that keeps the content
legible (7–9 of them are applied, in a seeded order): brightness ×0.90–1.10, contrast
×0.88–1.12, saturation ×0.85–1.15, sharpness ×0.70–1.50, gamma 0.88–1.12, colour temperature
±3–6% (red against blue gain), hue ±3–7/256, Gaussian blur radius 0.3–0.6, colour noise
σ 2–4, film grain σ 2–4 (luminance, slightly blurred), vignette 8–15% at the corners, JPEG
quality 70–85. The strengths skip the no-op middle of each range."""


@dataclass(frozen=True)
class Transformed:
    """A ``visual_transformation`` variant and how it was made."""

    image: Image.Image
    """The variant (the original's size)."""
    geometric: Image.Image
    """After the geometric edit only: the appearance edits are measured against this."""
    edits: list[str]
    """The edits applied with their strengths, geometric first."""
    names: list[str]
    """The names of the edits applied (a ``GEOMETRIC_EDITS`` entry, then ``AESTHETIC_EDITS``
    keys)."""


def transform_image(im: Image.Image, rng: random.Random) -> Transformed:
    """One geometric edit plus 7–9 appearance edits (MM-JudgeBias's construction: 1 geometric
    + 7–9 aesthetic operations preserving the semantics); the size is unchanged and nothing is
    cut off."""
    im = im.convert("RGB")
    geo_name = rng.choice(GEOMETRIC_EDITS)
    out, what = (_rotate_fit if geo_name == "rotate" else _zoom_out)(im, rng)
    edits, names = [what], [geo_name]
    geometric = out
    for name in rng.sample(list(AESTHETIC_EDITS), rng.randint(7, 9)):
        out, what = AESTHETIC_EDITS[name](out, rng)
        edits.append(what)
        names.append(name)
    return Transformed(out, geometric, edits, names)


def structural_similarity(a: Image.Image, b: Image.Image, window: int = 7) -> float:
    """Mean SSIM of two same-size images on luminance (uniform ``window``×``window`` windows,
    the usual constants K1 = 0.01, K2 = 0.03, L = 255)."""
    if a.size != b.size:
        raise ValueError(f"images differ in size ({a.size} vs {b.size})")
    x = np.asarray(a.convert("L"), dtype=np.float64)
    y = np.asarray(b.convert("L"), dtype=np.float64)

    def box(z: np.ndarray) -> np.ndarray:
        c = np.pad(z, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
        k = window
        return (c[k:, k:] - c[:-k, k:] - c[k:, :-k] + c[:-k, :-k]) / (k * k)

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mx, my = box(x), box(y)
    vx = box(x * x) - mx * mx
    vy = box(y * y) - my * my
    cxy = box(x * y) - mx * my
    n = window * window
    vx, vy, cxy = vx * n / (n - 1), vy * n / (n - 1), cxy * n / (n - 1)
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(s.mean())


def _visual_transformation(t: Triplet, ctx: PerturbContext) -> Triplet:
    res = transform_image(_need_image(t, "visual_transformation"), ctx.rng)
    ctx.notes["edits"] = "; ".join(res.edits)
    return replace(t, image=ctx.store.put(res.image, {SHOWS_KEY: ctx.shows}))


# ---------------------------------------------------------------- texture insertion


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


Box = tuple[int, int, int, int]
"""(left, top, right, bottom), right and bottom exclusive."""


def _edges(im: Image.Image) -> np.ndarray:
    g = np.asarray(im.convert("L"), dtype=np.int16)
    e = np.zeros(g.shape, dtype=bool)
    e[:, 1:] |= np.abs(np.diff(g, axis=1)) > 60
    e[1:, :] |= np.abs(np.diff(g, axis=0)) > 60
    return e


def text_regions(im: Image.Image) -> list[Box]:
    """Where a meme's caption text is (a heuristic for captions drawn on the image: bands of
    rows dense in sharp light/dark transitions, padded). When nothing is found, the top and
    bottom fifth of the image are assumed to hold the caption (the FHM layout)."""
    w, h = im.size
    e = _edges(im)
    g = np.asarray(im.convert("L"), dtype=np.int16)
    # Caption glyphs: sharp transitions between a very light and a very dark pixel.
    light, dark = g >= 200, g <= 60
    hard = np.zeros(g.shape, dtype=bool)
    hard[:, 1:] |= (light[:, 1:] & dark[:, :-1]) | (dark[:, 1:] & light[:, :-1])
    hard[:, 2:] |= (light[:, 2:] & dark[:, :-2]) | (dark[:, 2:] & light[:, :-2])
    density = hard.mean(axis=1)
    rows = density > max(0.02, 3 * float(np.median(density)))
    boxes: list[Box] = []
    pad = max(4, h // 40)
    y = 0
    while y < h:
        if not rows[y]:
            y += 1
            continue
        y0 = y
        gap = 0
        while y < h and gap <= max(3, h // 60):
            gap = 0 if rows[y] else gap + 1
            y += 1
        y1 = y - gap
        if y1 - y0 >= max(4, h // 60):
            cols = np.flatnonzero((hard[y0:y1] | e[y0:y1]).any(axis=0))
            x0, x1 = (int(cols[0]), int(cols[-1]) + 1) if len(cols) else (0, w)
            boxes.append((max(0, x0 - pad), max(0, y0 - pad), min(w, x1 + pad), min(h, y1 + pad)))
    if not boxes:
        band = max(1, h // 5)
        boxes = [(0, 0, w, band), (0, h - band, w, h)]
    return boxes


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@dataclass(frozen=True)
class Inserted:
    """A ``texture_insertion`` variant and where its text went."""

    image: Image.Image
    """The variant."""
    box: Box
    """The overlay's box."""
    covered_share: float
    """The overlay's share of the image area."""
    text: str
    """The text drawn (the query, shortened to fit the box)."""
    avoided: list[Box]
    """The caption/text regions the overlay was kept off."""


def insert_text(
    im: Image.Image, text: str, *, max_cover: float = 0.10, rng: random.Random | None = None
) -> Inserted:
    """``text`` drawn into the image as a translucent label covering at most ``max_cover`` of
    the area, placed off the meme's caption/text regions (``text_regions``) and where the image
    has least detail; the text is shortened to fit. DataError when no such place exists."""
    im = im.convert("RGB").copy()
    w, h = im.size
    avoid = text_regions(im)
    words = " ".join(text.split()) or "(no query)"
    budget = max_cover * w * h
    for size, max_lines in [(z, 3) for z in range(max(9, min(w, h) // 20), 7, -1)] + [
        (8, 2),
        (8, 1),
    ]:
        font = _font(size)
        line_h = size + size // 3
        max_chars = max(8, int(0.5 * w / (size * 0.55)))
        wrapped = textwrap.wrap(words, max_chars)
        lines = wrapped[:max_lines]
        if len(wrapped) > max_lines:
            lines[-1] = textwrap.shorten(lines[-1] + " …", max_chars, placeholder=" …")
        draw = ImageDraw.Draw(im)
        tw = max(int(draw.textlength(line, font=font)) for line in lines)
        bw, bh = tw + size, line_h * len(lines) + size // 2
        if bw * bh > budget or bw > w or bh > h:
            continue
        spot = _place(im, (bw, bh), avoid, rng)
        if spot is None:
            continue
        x, y = spot
        box = (x, y, x + bw, y + bh)
        overlay = Image.new("RGBA", im.size, (0, 0, 0, 0))
        d = ImageDraw.Draw(overlay)
        d.rectangle((box[0], box[1], box[2] - 1, box[3] - 1), fill=(250, 250, 245, 150))
        for i, line in enumerate(lines):
            d.text(
                (x + size // 2, y + size // 4 + i * line_h), line, fill=(25, 25, 25, 255), font=font
            )
        out = Image.alpha_composite(im.convert("RGBA"), overlay).convert("RGB")
        return Inserted(out, box, bw * bh / (w * h), " ".join(lines), avoid)
    raise DataError(
        f"texture_insertion: no place for the text off the caption within {max_cover:.0%} of "
        "the image"
    )


def _place(
    im: Image.Image, size: tuple[int, int], avoid: list[Box], rng: random.Random | None
) -> tuple[int, int] | None:
    """The top-left corner of the least detailed box of ``size`` that overlaps no avoided box."""
    bw, bh = size
    w, h = im.size
    e = _edges(im).astype(np.float64)
    c = np.pad(e, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    step = max(2, min(w, h) // 40)
    best: list[tuple[float, int, int]] = []
    for y in range(0, h - bh + 1, step):
        for x in range(0, w - bw + 1, step):
            box = (x, y, x + bw, y + bh)
            if any(_overlaps(box, a) for a in avoid):
                continue
            detail = c[y + bh, x + bw] - c[y, x + bw] - c[y + bh, x] + c[y, x]
            best.append((float(detail), y, x))
    if not best:
        return None
    best.sort()
    low = best[0][0]
    ties = [b for b in best if b[0] <= low + 0.02 * bw * bh][:8]
    _, y, x = ties[rng.randrange(len(ties))] if rng is not None else ties[0]
    return x, y


def _texture_insertion(t: Triplet, ctx: PerturbContext) -> Triplet:
    im = _need_image(t, "texture_insertion")
    got = insert_text(im, t.query or "(no query)", max_cover=ctx.max_cover, rng=ctx.rng)
    ctx.notes["covered_share"] = f"{got.covered_share:.4f}"
    meta = {SHOWS_KEY: ctx.shows, INSERTED_KEY: got.text}
    return replace(t, image=ctx.store.put(got.image, meta))


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
