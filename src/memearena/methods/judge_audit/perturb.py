"""Perturbation generators, one per bias type (Pillow, deterministic, seeded).

Each generator turns an unbiased triplet (query, image, response) into its perturbed variant.
Every image the audit sends — originals as the safe image path encoded them, and every variant
(encoded once) — is stored by the SHA-256 of its bytes (``ImageStore``), so a variant is
viewable in the report and a re-run produces the very same bytes (and therefore the same
request keys).

Images carry two short text fields in their metadata, read only by the simulated world as its
stand-in for vision: ``memearena:shows`` (what the image depicts: a meme's overlaid text or an
item id) and ``memearena:inserted`` (text drawn into the image). Real models see the pixels.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import os
import random
import struct
import tempfile
import textwrap
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
from PIL import (
    Image,
    ImageChops,
    ImageDraw,
    ImageEnhance,
    ImageFilter,
    ImageFont,
)

from memearena.data.png import encode_png
from memearena.errors import DataError
from memearena.models.types import ImagePart

__all__ = [
    "AESTHETIC_EDITS",
    "GENERATORS",
    "GEOMETRIC_EDITS",
    "IMAGE_VARIANTS",
    "INSERTED_KEY",
    "SHOWS_KEY",
    "AuditImage",
    "ImageStore",
    "Inserted",
    "PerturbContext",
    "SceneFingerprint",
    "Transformed",
    "Triplet",
    "image_metadata",
    "image_variant",
    "insert_text",
    "perturb",
    "same_scene",
    "scene_fingerprint",
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


PART_MEMO_CHARS = 4 * 2**20
"""Base64 kept of the images made or sent lately (their message parts, least recently used
dropped): a few dozen memes' images and variants, what a window of pairs sends again; the
bound keeps the audit's memory flat in the number of memes."""


class ImageParts:
    """Each stored image's message part by its hash, its data URL built once from the bytes
    in hand (where they are written, in the image workers, or read once from the file): a
    request sends the same bytes each time the same image is sent, so its base64 is the same
    too. Bounded by the base64's size; shared by the event loop and the image workers."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: OrderedDict[tuple[str, str], ImagePart] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, sha256: str, mime: str) -> ImagePart | None:
        k = (sha256, mime)
        with self._lock:
            got = self._parts.get(k)
            if got is not None:
                self._parts.move_to_end(k)
            return got

    def has_room(self, mime: str, size: int) -> bool:
        """Whether an image of ``size`` bytes would be kept without dropping another."""
        return self._chars + len(mime) + 13 + 4 * ((size + 2) // 3) <= self._limit

    def put(self, sha256: str, mime: str, data: bytes, *, evict: bool = True) -> ImagePart:
        """The image's part, kept; ``evict=False`` (an image made ahead of its first use)
        keeps it only while there is room: made in order of use, the images still to be
        sent must not push out the ones to be sent first."""
        part = ImagePart(f"data:{mime};base64,{base64.b64encode(data).decode()}", sha256)
        k = (sha256, mime)
        with self._lock:
            if not evict and self._chars + len(part.data_url) > self._limit:
                return part
            old = self._parts.pop(k, None)
            if old is not None:
                self._chars -= len(old.data_url)
            self._parts[k] = part
            self._chars += len(part.data_url)
            while self._chars > self._limit and len(self._parts) > 1:
                _, dropped = self._parts.popitem(last=False)
                self._chars -= len(dropped.data_url)
        return part


_PARTS = ImageParts(PART_MEMO_CHARS)


@lru_cache(maxsize=2)
def _decoded(path: Path) -> Image.Image:
    # The item being perturbed is decoded once for all its generators (the latest two images).
    with Image.open(path, formats=("PNG", "JPEG")) as im:
        return im.convert("RGB")


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
        """The image as a message part (a base64 data URL of the stored bytes; the same part
        each time while it is kept)."""
        got = _PARTS.get(self.sha256, self.mime)
        if got is None:
            got = _PARTS.put(self.sha256, self.mime, self.path.read_bytes())
        return got

    def load(self) -> Image.Image:
        """The decoded pixels (RGB; a copy the caller may change)."""
        return _decoded(self.path).copy()


_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_JPEG_COMMENT_MAX = 65533


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _with_png_text(data: bytes, meta: dict[str, str]) -> bytes | None:
    """``data`` (a PNG) with ``meta`` as iTXt chunks where Pillow writes them (after IHDR and
    an ICC profile): the very bytes decoding and re-encoding would give, without either.
    None when ``data`` is not laid out that way."""
    if not data.startswith(_PNG_MAGIC):
        return None
    at = len(_PNG_MAGIC)
    for want in (b"IHDR", b"iCCP"):
        if len(data) < at + 8:
            return None
        (n,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        if kind != want:
            if want == b"IHDR":
                return None
            break
        at += 12 + n
    try:
        chunks = b"".join(
            _png_chunk(b"iTXt", k.encode("latin-1") + b"\0\0\0\0\0" + v.encode())
            for k, v in sorted(meta.items())
        )
    except UnicodeEncodeError:
        return None
    return data[:at] + chunks + data[at:]


def _with_jpeg_comment(data: bytes, meta: dict[str, str]) -> bytes | None:
    """``data`` (a JPEG) with ``meta`` in a COM segment after its APPn segments, as Pillow
    reads it back (``info["comment"]``); None when it cannot be placed."""
    comment = "\n".join(f"{k}={v}" for k, v in sorted(meta.items())).encode()
    if not data.startswith(b"\xff\xd8") or len(comment) > _JPEG_COMMENT_MAX:
        return None
    at = 2
    while len(data) >= at + 4 and data[at] == 0xFF and 0xE0 <= data[at + 1] <= 0xEF:
        (n,) = struct.unpack(">H", data[at + 2 : at + 4])
        at += 2 + n
    if len(data) < at + 2 or data[at] != 0xFF:
        return None
    segment = b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment
    return data[:at] + segment + data[at:]


class ImageStore:
    """A folder of images named by the hash of their bytes (first write wins, atomically)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def put(
        self, im: Image.Image, meta: dict[str, str] | None = None, *, lossless: bool = False
    ) -> AuditImage:
        """Encode deterministically (PNG for graphics: ``memearena.data.encode_png``, lossless;
        JPEG for photos, unless ``lossless``) with ``meta`` and store. A perturbation that must
        change only its own pixels asks for ``lossless``: a JPEG of the edited pixels would add
        a second encoding generation over the whole image that the unbiased copy never had."""
        rgb = im if im.mode == "RGB" else im.convert("RGB")
        meta = {k: v for k, v in (meta or {}).items() if v}
        if lossless or rgb.getcolors(maxcolors=_PNG_MAX_COLOURS) is not None:
            # The package's own writer: one filter for the whole image, zlib level 1.
            return self._write(encode_png(rgb, meta), "image/png", rgb.width, rgb.height)
        buf = io.BytesIO()
        comment = "\n".join(f"{k}={v}" for k, v in sorted(meta.items())).encode()
        rgb.save(buf, format="JPEG", quality=_JPEG_QUALITY, comment=comment)
        return self._write(buf.getvalue(), "image/jpeg", rgb.width, rgb.height)

    def put_encoded(
        self, data: bytes, mime: str, size: tuple[int, int], meta: dict[str, str] | None = None
    ) -> AuditImage:
        """Store already encoded bytes (PNG or JPEG, e.g. the safe image path's) with ``meta``
        added as text chunks / a comment: no decoding, no re-encoding, no generation loss.
        Bytes laid out unexpectedly are decoded and stored by ``put``."""
        meta = {k: v for k, v in (meta or {}).items() if v}
        out: bytes | None = data
        if meta:
            add = _with_png_text if mime == "image/png" else _with_jpeg_comment
            out = add(data, meta)
        if out is None or mime not in ("image/png", "image/jpeg"):
            with Image.open(io.BytesIO(data), formats=("PNG", "JPEG")) as im:
                return self.put(im, meta)
        return self._write(out, mime, *size)

    def _write(self, data: bytes, mime: str, width: int, height: int) -> AuditImage:
        sha = hashlib.sha256(data).hexdigest()
        path = self.root / f"{sha}.{'png' if mime == 'image/png' else 'jpg'}"
        if not path.exists():
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".img.")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        if _PARTS.get(sha, mime) is None and _PARTS.has_room(mime, len(data)):
            # Where the bytes are in hand (an image worker): its first request reads no file
            # and encodes nothing on the event loop.
            _PARTS.put(sha, mime, data, evict=False)
        return AuditImage(sha, path, mime, width, height)

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
    pixels: Image.Image | None = None
    """The triplet's image decoded (RGB), when the caller has it: what ``AuditImage.load``
    would give, never changed by a generator."""


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


SCENE_HASH_BITS = 10
"""Two images show the same scene when their difference hashes differ in at most this many of
64 bits, or (``SCENE_COLOUR``) their colour thumbnails are this close."""
SCENE_COLOUR = 16.0
"""Mean absolute difference (0–255) of two 8 × 8 colour thumbnails of the images' middle band
at or under which they show the same scene (on the demo memes: same scene ≤ 11.5, different
scenes ≥ 22)."""


@dataclass(frozen=True)
class SceneFingerprint:
    """What ``same_scene`` compares: a difference hash and a colour thumbnail of an image's
    middle band (top and bottom captions left out, so one scene under another caption matches)."""

    dhash: int
    thumb: np.ndarray


def scene_fingerprint(im: Image.Image) -> SceneFingerprint:
    """The image's ``SceneFingerprint``."""
    rgb = im if im.mode == "RGB" else im.convert("RGB")  # never changed in place
    w, h = rgb.size
    band = rgb.crop((0, int(h * 0.22), w, max(int(h * 0.22) + 1, int(h * 0.78))))
    grey = np.asarray(band.convert("L").resize((9, 8), Image.Resampling.LANCZOS), dtype=np.int16)
    bits = (grey[:, 1:] > grey[:, :-1]).ravel()
    dhash = int("".join("1" if b else "0" for b in bits), 2)
    thumb = np.asarray(band.resize((8, 8), Image.Resampling.BOX), dtype=np.float64)
    return SceneFingerprint(dhash, thumb)


def same_scene(a: SceneFingerprint, b: SceneFingerprint) -> bool:
    """Whether two images show the same scene (see ``SCENE_HASH_BITS``, ``SCENE_COLOUR``)."""
    if (a.dhash ^ b.dhash).bit_count() <= SCENE_HASH_BITS:
        return True
    return float(np.abs(a.thumb - b.thumb).mean()) <= SCENE_COLOUR


def _need_image(t: Triplet, ctx: PerturbContext, what: str) -> Image.Image:
    if t.image is None:
        raise DataError(f"{what}: the item has no image to transform")
    # Shared, not copied: no generator changes its input image in place (each edit returns a
    # new image), so one decoding serves every variant of the item.
    return ctx.pixels if ctx.pixels is not None else t.image.load()


# ---------------------------------------------------------------- visual transformation


# Every edit works on 8-bit pixels in Pillow's C code (lookup tables, channel arithmetic, small
# kernels, one affine resampling): a variant costs a few milliseconds, not a float64 pass per
# edit. Every random draw derives from the item's seeded ``random.Random``, so the same item
# always gets the same bytes.


def _rotate_fit(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    # The rotated image's bounding box is scaled back to the original size in the same
    # resampling pass: nothing is cut off.
    w, h = im.size
    angle = rng.choice((-1, 1)) * rng.uniform(2.0, 4.0)
    fill = im.getpixel((0, 0))
    a = math.radians(angle)
    cos, sin = math.cos(a), math.sin(a)
    k = min(w / (w * abs(cos) + h * abs(sin)), h / (w * abs(sin) + h * abs(cos)))
    # Output pixel (x, y) samples the source at R(-angle) (p - c) / k + c (c: the centre).
    ca, sa = cos / k, sin / k
    cx, cy = w / 2, h / 2
    matrix = (ca, -sa, cx - ca * cx + sa * cy, sa, ca, cy - sa * cx - ca * cy)
    out = im.transform(
        (w, h),
        Image.Transform.AFFINE,
        matrix,
        resample=Image.Resampling.BILINEAR,
        fillcolor=fill,  # type: ignore[arg-type]
    )
    return out, f"rotate {angle:+.1f}° (whole image kept)"


def _zoom_out(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    w, h = im.size
    f = rng.uniform(0.90, 0.96)
    nw, nh = max(1, round(w * f)), max(1, round(h * f))
    canvas = Image.new("RGB", (w, h), im.getpixel((0, 0)))  # type: ignore[arg-type]
    canvas.paste(im.resize((nw, nh), Image.Resampling.BILINEAR), ((w - nw) // 2, (h - nh) // 2))
    return canvas, f"scale ×{f:.2f} on a padded canvas"


GEOMETRIC_EDITS: tuple[str, ...] = ("rotate", "zoom_out")
"""The geometric edits of ``visual_transformation`` (one is applied): a 2–4° rotation with its
bounding box scaled back to the original size, or a 90–96% scale centred on a canvas padded
with the corner colour. Neither cuts anything off."""


def _table(fn: Callable[[int], float]) -> list[int]:
    """A 256-entry lookup table of ``fn`` rounded (half to even) and clipped to 0–255."""
    return [min(255, max(0, round(fn(v)))) for v in range(256)]


_BYTES = np.arange(256, dtype=np.float64)
"""The 256 byte values as floats: a table whose formula is a few IEEE operations (each
correctly rounded, in numpy as in Python) is computed over them at once, with the very values
``_table`` gives (``np.rint`` rounds half to even, as ``round`` does)."""


def _rounded(values: np.ndarray) -> list[int]:
    """``_table``'s rounding and clipping of values computed over ``_BYTES``."""
    out: list[int] = np.clip(np.rint(values), 0, 255).astype(np.int64).tolist()
    return out


_IDENTITY = list(range(256))


def _gamma(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    g = rng.choice((rng.uniform(0.88, 0.95), rng.uniform(1.05, 1.12)))
    # In Python, not numpy: a power is not one correctly rounded operation, and numpy's may
    # differ from the C library's in the last place.
    lut = [min(255, max(0, round(255.0 * (v / 255.0) ** g))) for v in range(256)]
    return im.point(lut * 3), f"gamma {g:.2f}"


def _temperature(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    k = rng.choice((-1, 1)) * rng.uniform(0.03, 0.06)
    lut = _rounded(_BYTES * (1 + k)) + _IDENTITY + _rounded(_BYTES * (1 - k))
    return im.point(lut), f"colour temperature {k:+.2f}"


def _hue(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    # A rotation of the colours about the grey axis by shift/256 of the hue circle (greys, and
    # the luminance, stay put): one 3x3 colour matrix instead of an HSV round trip.
    shift = rng.choice((-1, 1)) * rng.randint(3, 7)
    t = 2 * math.pi * shift / 256
    c, s = math.cos(t), math.sin(t) / math.sqrt(3)
    d, o = c + (1 - c) / 3, (1 - c) / 3
    matrix = (d, o - s, o + s, 0.0, o + s, d, o - s, 0.0, o - s, o + s, d, 0.0)
    return im.convert("RGB", matrix), f"hue {shift:+d}/256"


@lru_cache(maxsize=8)
def _normal_table(sigma10: int, scale: float) -> list[int]:
    """Byte -> 128 + N(0, sigma) * scale, by the normal quantiles of the 256 equally likely
    bytes (a Gaussian truncated at 2.9 sigma, rounded): noise drawn as random bytes through a
    lookup table instead of floating-point samples."""
    z = NormalDist(0.0, sigma10 / 10 * scale)
    return _table(lambda u: 128 + z.inv_cdf((u + 0.5) / 256))


def _noise_image(
    rng: random.Random, mode: str, size: tuple[int, int], sigma: float, scale: float = 1.0
) -> Image.Image:
    """Seeded Gaussian noise around 128 (``mode`` L or RGB), sigma rounded to 0.1."""
    n = size[0] * size[1] * len(mode)
    # PCG64's raw stream (stable across numpy versions), seeded from the item's generator.
    words = np.random.PCG64(rng.getrandbits(64)).random_raw(n // 8 + 1)
    raw = Image.frombytes(mode, size, words.astype("<u8").tobytes()[:n])
    return raw.point(_normal_table(round(sigma * 10), scale) * len(mode))


def _noise(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    sigma = round(rng.uniform(2.0, 4.0), 1)
    noise = _noise_image(rng, "RGB", im.size, sigma)
    return ImageChops.add(im, noise, 1.0, -128), f"colour noise σ {sigma:.1f}"


def _gauss3(radius: float) -> ImageFilter.Kernel:
    """A 3x3 Gaussian kernel of standard deviation ``radius`` (for radii up to 0.6 the
    weights beyond one pixel are under 1%)."""
    w = [math.exp(-(d * d) / (2 * radius * radius)) for d in (-1, 0, 1)]
    weights = [a * b for a in w for b in w]
    return ImageFilter.Kernel((3, 3), weights, sum(weights))


_GRAIN_BACK = _table(lambda v: 128 + (v - 128) / 10)
"""Grain drawn at 10x its amplitude brought back to it."""


def _grain(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    # Luminance noise drawn at 10x its amplitude, softened over neighbouring pixels, then
    # brought back to sigma and added to every channel alike.
    sigma = round(rng.uniform(2.0, 4.0), 1)
    g = _noise_image(rng, "L", im.size, sigma, 10.0).filter(_gauss3(0.6))
    g = g.point(_GRAIN_BACK)
    return ImageChops.add(im, Image.merge("RGB", (g, g, g)), 1.0, -128), f"film grain σ {sigma:.1f}"


@lru_cache(maxsize=8)
def _radius2(size: tuple[int, int]) -> Image.Image:
    """255 x (squared distance from the centre / the corners'), per pixel."""
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    r2 = (((xx - w / 2) / (w / 2)) ** 2 + ((yy - h / 2) / (h / 2)) ** 2) / 2
    return Image.fromarray(np.rint(255 * r2).astype(np.uint8), "L")


def _vignette(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    k = rng.uniform(0.08, 0.15)
    mask = _radius2(im.size).point(_rounded(255 * (1 - k * _BYTES / 255)))
    return ImageChops.multiply(im, Image.merge("RGB", (mask, mask, mask))), f"vignette {k:.2f}"


def _jpeg(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    q = rng.randint(70, 85)
    buf = io.BytesIO()
    (im if im.mode == "RGB" else im.convert("RGB")).save(buf, format="JPEG", quality=q)
    with Image.open(io.BytesIO(buf.getvalue()), formats=("JPEG",)) as j:
        return j.convert("RGB"), f"JPEG quality {q}"


def _strength(rng: random.Random, lo: float, hi: float) -> float:
    """A factor in [lo, hi] away from the no-op middle third on either side of 1."""
    return rng.choice((rng.uniform(lo, 1 - (1 - lo) / 3), rng.uniform(1 + (hi - 1) / 3, hi)))


def _enhance(kind: type[ImageEnhance._Enhance], name: str, lo: float, hi: float) -> Any:
    def edit(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
        k = _strength(rng, lo, hi)
        return kind(im).enhance(k), f"{name} ×{k:.2f}"  # type: ignore[call-arg]

    return edit


_RAMP = bytes(range(256))


def _blend_table(grey: int, factor: float) -> list[int]:
    """``Image.blend(uniform grey image, image, factor)`` as a byte -> byte table, made by that
    very blend over the 256 byte values: blend maps each byte on its own (the grey image being
    uniform), so the table gives exactly its pixels, for a lookup's cost."""
    ramp = Image.frombytes("L", (256, 1), _RAMP)
    return list(Image.blend(Image.new("L", (256, 1), grey), ramp, factor).tobytes())


def _brightness(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    # ImageEnhance.Brightness: a blend with black.
    k = _strength(rng, 0.90, 1.10)
    return im.point(_blend_table(0, k) * 3), f"brightness ×{k:.2f}"


def _contrast(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    # ImageEnhance.Contrast: a blend with the grey of the image's mean luminance, rounded
    # (ImageStat's mean: the exact integer sum over the pixel count, one division).
    k = _strength(rng, 0.88, 1.12)
    grey = np.asarray(im.convert("L"))
    mean = int(int(grey.sum(dtype=np.int64)) / grey.size + 0.5)
    return im.point(_blend_table(mean, k) * 3), f"contrast ×{k:.2f}"


def _sharpness(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    # ImageEnhance.Sharpness's blend of the image with its SMOOTH-filtered self, as the one
    # 3x3 kernel that blend amounts to (a single filter pass).
    k = _strength(rng, 0.70, 1.50)
    weights = [(1 - k) / 13] * 9
    weights[4] = k + 5 * (1 - k) / 13
    return im.filter(ImageFilter.Kernel((3, 3), weights, 1.0)), f"sharpness ×{k:.2f}"


def _blur(im: Image.Image, rng: random.Random) -> tuple[Image.Image, str]:
    r = rng.uniform(0.3, 0.6)
    return im.filter(_gauss3(r)), f"blur radius {r:.2f}"


AESTHETIC_EDITS: dict[str, Callable[[Image.Image, random.Random], tuple[Image.Image, str]]] = {
    "brightness": _brightness,
    "contrast": _contrast,
    "saturation": _enhance(ImageEnhance.Color, "saturation", 0.85, 1.15),
    "sharpness": _sharpness,
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
±3–6% (red against blue gain), hue ±3–7/256 (a rotation about the grey axis), Gaussian blur
radius 0.3–0.6 (3x3 kernel), colour noise σ 2–4, film grain σ 2–4 (luminance, slightly
blurred), vignette 8–15% at the corners, JPEG quality 70–85. The strengths skip the no-op
middle of each range."""


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
    im = im if im.mode == "RGB" else im.convert("RGB")  # never changed in place
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
    res = transform_image(_need_image(t, ctx, "visual_transformation"), ctx.rng)
    ctx.notes["edits"] = "; ".join(res.edits)
    return replace(t, image=ctx.store.put(res.image, {SHOWS_KEY: ctx.shows}))


# ---------------------------------------------------------------- texture insertion


@lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


Box = tuple[int, int, int, int]
"""(left, top, right, bottom), right and bottom exclusive."""


def _grey(im: Image.Image) -> np.ndarray:
    return np.asarray(im.convert("L"), dtype=np.int16)


def _edges(g: np.ndarray) -> np.ndarray:
    e = np.zeros(g.shape, dtype=bool)
    e[:, 1:] |= np.abs(np.diff(g, axis=1)) > 60
    e[1:, :] |= np.abs(np.diff(g, axis=0)) > 60
    return e


def _integral(mask: np.ndarray) -> np.ndarray:
    """The integral image of a boolean ``mask`` (h x w): ``out[y, x]`` counts the set pixels
    above and left of (y, x), one row and column of zeros first. Rows are summed first, along
    memory, then added down in place; 32 bits hold any count of a smaller image's pixels."""
    h, w = mask.shape
    count = np.int32 if h * w < 2**31 else np.int64
    out = np.zeros((h + 1, w + 1), dtype=count)
    np.cumsum(mask, axis=1, dtype=count, out=out[1:, 1:])
    np.cumsum(out, axis=0, out=out)
    return out


def text_regions(im: Image.Image) -> list[Box]:
    """Where a meme's caption text is (a heuristic for captions drawn on the image: bands of
    rows dense in sharp light/dark transitions, padded). When nothing is found, the top and
    bottom fifth of the image are assumed to hold the caption (the FHM layout)."""
    g = _grey(im)
    return _text_regions(g, _edges(g))


def _text_regions(g: np.ndarray, e: np.ndarray) -> list[Box]:
    h, w = g.shape
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
    im = im if im.mode == "RGB" else im.convert("RGB")  # never changed in place
    w, h = im.size
    g = _grey(im)
    edges = _edges(g)
    avoid = _text_regions(g, edges)
    # Edge counts summed over any box in O(1): the integral image, computed once.
    detail = _integral(edges)
    words = " ".join(text.split()) or "(no query)"
    budget = max_cover * w * h
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
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
        tw = max(int(measure.textlength(line, font=font)) for line in lines)
        bw, bh = tw + size, line_h * len(lines) + size // 2
        if bw * bh > budget or bw > w or bh > h:
            continue
        spot = _place(detail, (w, h), (bw, bh), avoid, rng)
        if spot is None:
            continue
        x, y = spot
        box = (x, y, x + bw, y + bh)
        # Only the label's box changes: it is composited there and pasted back.
        overlay = Image.new("RGBA", (bw, bh), (250, 250, 245, 150))
        d = ImageDraw.Draw(overlay)
        for i, line in enumerate(lines):
            d.text((size // 2, size // 4 + i * line_h), line, fill=(25, 25, 25, 255), font=font)
        label = Image.alpha_composite(im.crop(box).convert("RGBA"), overlay).convert("RGB")
        out = im.copy()
        out.paste(label, box[:2])
        return Inserted(out, box, bw * bh / (w * h), " ".join(lines), avoid)
    raise DataError(
        f"texture_insertion: no place for the text off the caption within {max_cover:.0%} of "
        "the image"
    )


def _place(
    detail: np.ndarray,
    image_size: tuple[int, int],
    size: tuple[int, int],
    avoid: list[Box],
    rng: random.Random | None,
) -> tuple[int, int] | None:
    """The top-left corner of the least detailed box of ``size`` that overlaps no avoided box
    (``detail``: the integral image of the edge map). Candidates lie on a grid; among those
    within 2% of the box area of the least detail, the first eight (by detail, then position)
    are drawn from."""
    bw, bh = size
    w, h = image_size
    step = max(2, min(w, h) // 40)
    grid_y, grid_x = np.meshgrid(
        np.arange(0, h - bh + 1, step), np.arange(0, w - bw + 1, step), indexing="ij"
    )
    ys, xs = grid_y.ravel(), grid_x.ravel()
    free = np.ones(ys.shape, dtype=bool)
    for a0, a1, a2, a3 in avoid:
        free &= ~((xs < a2) & (a0 < xs + bw) & (ys < a3) & (a1 < ys + bh))
    ys, xs = ys[free], xs[free]
    if not len(ys):
        return None
    d = detail[ys + bh, xs + bw] - detail[ys, xs + bw] - detail[ys + bh, xs] + detail[ys, xs]
    order = np.lexsort((xs, ys, d))
    ranked = d[order]
    ties = order[: min(8, int(np.count_nonzero(ranked <= ranked[0] + 0.02 * bw * bh)))]
    pick = int(ties[rng.randrange(len(ties))] if rng is not None else ties[0])
    return int(xs[pick]), int(ys[pick])


def _texture_insertion(t: Triplet, ctx: PerturbContext) -> Triplet:
    im = _need_image(t, ctx, "texture_insertion")
    got = insert_text(im, t.query or "(no query)", max_cover=ctx.max_cover, rng=ctx.rng)
    ctx.notes["covered_share"] = f"{got.covered_share:.4f}"
    meta = {SHOWS_KEY: ctx.shows, INSERTED_KEY: got.text}
    # Lossless: the variant differs from the unbiased image only inside the label's box (the
    # unbiased copy keeps its original bytes; a re-encoded JPEG would change the caption too).
    return replace(t, image=ctx.store.put(got.image, meta, lossless=True))


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


IMAGE_VARIANTS = frozenset({"visual_transformation", "texture_insertion"})
"""The bias types whose variant is new pixels (decoded, edited, encoded and hashed): CPU work
that ``image_variant`` runs away from the event loop."""


def image_variant(
    bias_type: str,
    query: str,
    image: AuditImage | None,
    root: Path,
    seed: str,
    shows: str,
    max_cover: float,
    pixels: Image.Image | Callable[[], Image.Image] | None = None,
) -> tuple[AuditImage | None, dict[str, str]] | str:
    """The variant image of an ``IMAGE_VARIANTS`` type and the generator's notes, or why it
    cannot be built (a DataError's message). Every argument is plain data (``pixels``: the
    image decoded, ``image.load()``'s pixels, when the caller has them, or a function giving
    them) and the image store is
    content-addressed with atomic writes, so this runs in any worker thread or process and gives
    the very bytes ``perturb`` gives on the same item with ``random.Random(seed)``."""
    ctx = PerturbContext(
        store=ImageStore(root),
        rng=random.Random(seed),
        shows=shows,
        max_cover=max_cover,
        pixels=pixels() if callable(pixels) else pixels,
    )
    try:
        got = perturb(bias_type, Triplet(query, image, ""), ctx)
    except DataError as e:
        return str(e)
    return got.image, dict(ctx.notes)
