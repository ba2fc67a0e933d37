"""The image a refined meme is shown with: the meme's image with its text erased.

A rewrite shown on the original image hides nothing: the image still carries the original caption.
AdamMeme shows the target, the reference writers and the scorer a text-erased image with the
rewritten text (the refiner and the checker see the original). The erased image comes, in order,
from the dataset (``Meme.erased_image``: an ``erased_image`` field, the dataset's ``erased_dir``, or
AdamMeme's ``image/erased/`` layout) or from the built-in eraser: RapidOCR's text detector and
recogniser (their models ship in the ``rapidocr-onnxruntime`` wheel) find the text, a glyph mask
inside each box picks its letters' pixels (fill, outline, antialiasing), and only those pixels are
inpainted, by coherence transport (Bornemann and März, 2007: each pixel of the hole is a weighted
mean of the known pixels around it, weighted along the edge direction their structure tensor
gives, filled from the hole's border inwards): the picture between and around the letters is
kept, and edges and thin structures crossing a letter are carried through it where an isotropic
fill (Telea) blurs them. An image thinner than ``MAX_ASPECT`` or larger than ``MAX_PIXELS`` is
refused (a per-item error naming the limit) before it is decoded. The eraser is the ``erase``
extra; without it and without an erased image, refinement is refused before any model call
(``refine_image: none`` sends the rewrite with no image instead, and the report says so).

Every erased image is stored by content hash in the run folder (``erased/<sha256>.png``) with an
``adapt.erased`` artifact keyed by the eraser's identity and the original's hash, recording the
share of pixels inpainted: a re-run reads it back and erases nothing twice, and a changed image or
eraser is erased afresh. An erasure masking more than ``adapt.erase_max_mask`` of its image is
flagged on record and never shown: the meme's items are finished as ``EraseFlagged`` (counted and
reported, never scored or refined, nothing left pending; a higher limit or a dataset erased image
takes them up on a re-run). Request fingerprints carry
the image hash, so a rewrite's cached answers never stand in for the erased image's.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import importlib.util
import io
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memearena.data import Meme, encode_png, prepare_image
from memearena.errors import ConfigError, DataError
from memearena.models.types import ImagePart

if TYPE_CHECKING:
    from memearena.methods.adapt.common import AdaptContext

__all__ = [
    "ERASED_KIND",
    "ERASER_ID",
    "ERASE_EXTRA",
    "EraseFlagged",
    "Erased",
    "RefineImage",
    "TextEraser",
    "check_refine_images",
    "eraser_available",
    "refine_image",
    "render_caption",
]

ERASER_ID = "rapidocr-det-rec+glyph-mask+coherence-transport/4"
"""The built-in eraser's identity (part of every stored erasure's key: a change re-erases)."""

ERASED_KIND = "adapt.erased"
"""Artifact kind of an erased image's record."""

ERASE_EXTRA = "pip install 'memearena[erase]'"
"""What installs the built-in eraser."""

MAX_ASPECT = 20.0
"""Longest side over shortest side of an image the eraser takes, at most: the OCR letterboxes
and upscales a thin image (a 1,024x1 line becomes a 30,720x7,680 array, gigabytes as floats)."""

MAX_PIXELS = 40_000_000
"""Pixels of an image the eraser takes, at most (read from the header, before decoding)."""

OCR_PIXELS = 4_000_000
"""The OCR reads a copy downscaled to at most this many pixels; its boxes are scaled back."""

_OCR_ASPECT = 4.0
"""The OCR reads an image no thinner than this (a thinner one is padded)."""

_MAX_LINE = 0.25
"""A text line is at most this share of the image's height (a taller box is not a caption)."""

_TEXT_SCORE = 0.5
"""A detected box counts as text when the recogniser reads it with at least this confidence."""

_RESIDUAL = 0.6
"""A later pass's box is what is left of found text when this share of it lies where the
first pass found text."""

_INPAINT_RADIUS = 3
"""Neighbourhood (pixels) ``cv2.inpaint`` fills each masked pixel from (``telea``, ``ns``)."""

Inpaint = Literal["coherence", "telea", "ns"]
"""How masked pixels are filled: coherence transport (the default), or ``cv2.inpaint``'s Telea
or Navier-Stokes."""


@functools.cache
def eraser_available() -> bool:
    """Whether the built-in eraser's packages (RapidOCR, OpenCV) are installed and import (an
    OpenCV build can be installed yet miss a system library)."""
    if any(importlib.util.find_spec(m) is None for m in ("rapidocr_onnxruntime", "cv2")):
        return False
    try:
        import cv2  # noqa: F401
        import rapidocr_onnxruntime  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


def _require() -> None:
    if not eraser_available():
        raise ConfigError(f"the built-in text eraser needs the 'erase' extra: {ERASE_EXTRA}")


@dataclass(frozen=True)
class Erased:
    """One erased image: PNG bytes, their hash, and what was inpainted."""

    png: bytes
    sha256: str
    mask_area: float
    """Share of the image's pixels inpainted (0 when no text was found)."""
    boxes: int
    """Text boxes found, over every pass."""
    passes: int
    """Detection passes run (another runs while text is still found at what was erased, at
    most 3)."""


Box = tuple[Any, str, float]
"""One OCR find: its corner points (an (n, 2) float array, image pixels), text, confidence."""


class TextEraser:
    """Text detection + glyph masks + inpainting. One OCR engine per eraser; ``erase`` and
    ``read`` may be called from worker threads (a lock serialises the engine, which is not
    thread-safe).

    The OCR's boxes only say where text is. Inside each box the glyphs are the pixels that
    differ from the box's background (the box filled in from its surroundings): fill, outline
    and antialiasing, closed and grown by a pixel or two. Only those pixels are inpainted, so
    the picture between and around the letters is kept as it was. Text still read at what was
    erased gets a wider mask on the next pass, and the whole box on the last.
    """

    def __init__(
        self,
        *,
        max_passes: int = 3,
        radius: int = _INPAINT_RADIUS,
        inpaint: Inpaint = "coherence",
        max_pixels: int = MAX_PIXELS,
        max_aspect: float = MAX_ASPECT,
        ocr_pixels: int = OCR_PIXELS,
    ) -> None:
        _require()
        self.max_passes = max_passes
        self.radius = radius
        self.inpaint = inpaint
        self.max_pixels = max_pixels
        self.max_aspect = max_aspect
        self.ocr_pixels = ocr_pixels
        self._engine: Any = None
        self._lock = threading.Lock()

    # ---- bounded decoding and reading ----

    def decode(self, image: bytes) -> Any:
        """The image (encoded bytes) as a BGR array, refused with a DataError naming the limit
        when its header declares more than ``max_pixels`` or a thinner shape than
        ``max_aspect``: one image never allocates unbounded memory."""
        import cv2
        import numpy as np
        from PIL import Image

        try:
            with Image.open(io.BytesIO(image)) as im:
                w, h = im.size
        except Exception as e:  # Pillow names what it could not read
            raise DataError(f"the eraser could not read the image ({type(e).__name__})") from None
        if w < 1 or h < 1 or w * h > self.max_pixels:
            raise DataError(
                f"the eraser takes images of at most {self.max_pixels:,} pixels; this one is "
                f"{w}x{h}"
            )
        if max(w, h) > self.max_aspect * min(w, h):
            raise DataError(
                f"the eraser takes images no thinner than {self.max_aspect:g}:1 (longest side over "
                f"shortest); this one is {w}x{h}"
            )
        img = cv2.imdecode(np.frombuffer(image, dtype=np.uint8), cv2.IMREAD_COLOR)
        if img is None or img.shape[:2] != (h, w):
            raise DataError("the eraser could not decode the image")
        return img

    def ocr(self, img: Any) -> list[Box]:
        """The text boxes OCR finds in a BGR array (read from a copy of at most
        ``ocr_pixels`` pixels)."""
        import cv2
        import numpy as np

        if self._engine is None:
            from rapidocr_onnxruntime import RapidOCR

            self._engine = RapidOCR()
        h, w = img.shape[:2]
        scale = min(1.0, math.sqrt(self.ocr_pixels / float(h * w)))
        small = img
        if scale < 1.0:
            size = (max(1, int(w * scale)), max(1, int(h * scale)))
            small = cv2.resize(img, size, interpolation=cv2.INTER_AREA)
        sh, sw = small.shape[:2]
        if max(sh, sw) > _OCR_ASPECT * min(sh, sw):
            # The detector upscales the short side to 736 pixels: a thin strip becomes a huge
            # array (51x1,020 peaked at 1.8 GB). Padded below or to the right with its median
            # colour, the boxes keep their coordinates.
            fill = [float(v) for v in np.median(small.reshape(-1, 3), axis=0)]
            small = cv2.copyMakeBorder(
                small,
                0,
                max(0, math.ceil(sw / _OCR_ASPECT) - sh),
                0,
                max(0, math.ceil(sh / _OCR_ASPECT) - sw),
                cv2.BORDER_CONSTANT,
                value=fill,
            )
        with self._lock:
            res, _ = self._engine(small, use_det=True, use_cls=False, use_rec=True)
        return [
            (np.asarray(box, dtype=np.float32) / scale, str(text), float(score))
            for box, text, score in (res or [])
            if float(score) >= _TEXT_SCORE and str(text).strip()
        ]

    def read(self, image: bytes) -> list[str]:
        """The text OCR reads in an image (encoded bytes), one string per box."""
        return [text for _, text, _ in self.ocr(self.decode(image))]

    # ---- erasing ----

    def erase(self, image: bytes) -> Erased:
        """The image (encoded bytes) with the glyphs of every text box found inpainted."""
        import numpy as np

        img = self.decode(image)
        height, width = img.shape[:2]
        mask = np.zeros((height, width), dtype=np.uint8)
        found = np.zeros_like(mask)  # where the first pass found text (boxes with margins)
        boxes = 0
        passes = 0
        current = img
        for level in range(self.max_passes):
            passes += 1
            added = 0
            for pts, _, _ in self.ocr(current):
                line = float(min(np.ptp(pts[:, 1]), np.ptp(pts[:, 0])))
                if line > _MAX_LINE * height:
                    continue  # not a line of text: a texture the recogniser read as a glyph
                added += self._add_glyphs(current, mask, found, pts, line, level)
            if not added:
                break
            boxes += added
            # Unmasked pixels are the original's: the fill always starts from the original.
            current = self.fill(img, mask)
        area = float(np.count_nonzero(mask)) / float(mask.size)
        out = _png(current)
        return Erased(out, hashlib.sha256(out).hexdigest(), area, boxes, passes)

    def fill(self, img: Any, mask: Any) -> Any:
        """``img`` with the pixels of ``mask`` (non-zero) inpainted."""
        import cv2

        if not mask.any():
            return img
        if self.inpaint == "coherence":
            return coherence_fill(img, mask)
        flag = cv2.INPAINT_TELEA if self.inpaint == "telea" else cv2.INPAINT_NS
        return cv2.inpaint(img, mask, self.radius, flag)

    @staticmethod
    def _window(shape: tuple[int, ...], pts: Any, margin: int) -> tuple[int, int, int, int]:
        h, w = shape[:2]
        x0 = max(0, math.floor(float(pts[:, 0].min())) - margin)
        y0 = max(0, math.floor(float(pts[:, 1].min())) - margin)
        x1 = min(w, math.ceil(float(pts[:, 0].max())) + margin + 1)
        y1 = min(h, math.ceil(float(pts[:, 1].max())) + margin + 1)
        return x0, y0, x1, y1

    def _add_glyphs(
        self, img: Any, mask: Any, found: Any, pts: Any, line: float, level: int
    ) -> bool:
        """OR into ``mask`` the glyph pixels of one box (``level`` 0: the glyphs; 1: a lower
        threshold and a wider margin, for what the first pass left; 2+: the whole box). Later
        passes only clean up what is left of text the first found: a box mostly outside it is
        an artefact of the inpainting or the scene, and is left alone."""
        import cv2
        import numpy as np

        pad = max(2, round(line * 0.3))  # outline strokes and antialiasing reach past the box
        grow = max(1, round(line * 0.06)) * (1 + level)
        x0, y0, x1, y1 = self._window(img.shape, pts, pad + grow + 2)
        crop = img[y0:y1, x0:x1]
        box = np.zeros(crop.shape[:2], dtype=np.uint8)
        cv2.fillPoly(box, [np.round(pts - (x0, y0)).astype(np.int32)], 255)
        seen = found[y0:y1, x0:x1]
        if level:
            inside = int(np.count_nonzero(seen[box > 0]))
            if inside < _RESIDUAL * max(1, int(np.count_nonzero(box))):
                return False
        region = cv2.dilate(box, _disc(pad))
        if not level:
            np.bitwise_or(seen, region, out=seen)
        glyphs: Any
        if level >= 2:
            glyphs = cv2.dilate(region, _disc(grow))
        else:
            found_glyphs = _outlined_glyphs(crop, region, line) if level == 0 else None
            if found_glyphs is None:
                found_glyphs = _contrast_glyphs(crop, region, line, level)
            glyphs = cv2.dilate(found_glyphs, _disc(grow))
        if level:
            glyphs = cv2.bitwise_and(glyphs, cv2.dilate(seen, _disc(grow)))
        np.bitwise_or(mask[y0:y1, x0:x1], glyphs, out=mask[y0:y1, x0:x1])
        return True


_LIGHT = 180
"""A caption's fill: every channel at least this bright ..."""
_CHROMA = 50
"""... and the channels within this of each other (white, not a bright colour)."""
_DARK = 90
"""A caption's outline: every channel at most this bright."""
_RIM = 0.7
"""A light component is a glyph's fill when at least this share of its 2-pixel rim is dark
(glyphs of the demo and rendered memes: 0.74 and up; white sheep with a dark head: 0.65)."""


def _outlined_glyphs(crop: Any, region: Any, line: float) -> Any | None:
    """The meme caption's glyphs in a box: white fill with a dark outline (Impact-style).
    Fill is a light, colourless component whose rim is mostly dark; the outline is the dark
    pixels within a stroke of it. None when the box holds no such text."""
    import cv2
    import numpy as np

    lo, hi = crop.min(axis=2), crop.max(axis=2)
    inside = region > 0
    light = ((lo >= _LIGHT) & ((hi - lo) <= _CHROMA) & inside).astype(np.uint8)
    dark = (hi <= _DARK).astype(np.uint8)
    reach = max(2, round(line * 0.12))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(light, connectivity=8)
    keep = np.zeros(n, dtype=bool)
    rim = _disc(2)
    h, w = light.shape
    for i in range(1, n):
        x, y, bw, bh, _area = (int(v) for v in stats[i])
        x0, y0, x1, y1 = max(0, x - 3), max(0, y - 3), min(w, x + bw + 3), min(h, y + bh + 3)
        one = (labels[y0:y1, x0:x1] == i).astype(np.uint8)
        ring = (cv2.dilate(one, rim) > 0) & (one == 0)
        # A glyph's fill is ringed by its outline; a white shape of the scene is not.
        keep[i] = ring.any() and float(dark[y0:y1, x0:x1][ring].mean()) >= _RIM
    fill = keep[labels]
    if np.count_nonzero(fill) < 0.02 * np.count_nonzero(inside):
        return None
    near = cv2.dilate(fill.astype(np.uint8), _disc(reach)) > 0
    glyphs = np.where(fill | (near & (dark > 0)), 255, 0).astype(np.uint8)
    return cv2.morphologyEx(glyphs, cv2.MORPH_CLOSE, _disc(1))


def _contrast_glyphs(crop: Any, region: Any, line: float, level: int) -> Any:
    """Any other text's glyphs in a box: the pixels far from the box's background (the box
    filled in from around it), by an Otsu threshold (lower on a later pass)."""
    import cv2
    import numpy as np

    background = cv2.inpaint(crop, region, _INPAINT_RADIUS, cv2.INPAINT_TELEA)
    diff = cv2.absdiff(crop, background).max(axis=2)
    inside = diff[region > 0]
    otsu, _ = cv2.threshold(inside.reshape(-1, 1), 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
    threshold = float(np.clip(otsu, 30, 90)) * (0.6 if level else 1.0)
    glyphs = np.where((diff > threshold) & (region > 0), 255, 0).astype(np.uint8)
    return cv2.morphologyEx(glyphs, cv2.MORPH_CLOSE, _disc(max(1, round(line * 0.05))))


_CT_EPS = 5
"""Coherence transport: radius (pixels) of the known neighbourhood a pixel is filled from."""
_CT_MU = 25.0
"""... how sharply the weights favour pixels along the edge direction (Bornemann and März's
default) ..."""
_CT_SIGMA = 1.4
"""... the pre-smoothing of the gradients (noise, JPEG ringing) ..."""
_CT_RHO = 4.0
"""... and the scale (pixels) the structure tensor gathers edge directions over."""


def coherence_fill(img: Any, mask: Any) -> Any:
    """``img`` (H, W, C uint8) with the pixels of ``mask`` (non-zero) filled by coherence
    transport: layer by layer from the hole's border inwards (the ceiling of each pixel's
    distance to the known pixels), each pixel the mean of the known pixels within ``_CT_EPS``,
    weighted by 1/distance and, where the known pixels around show a coherent edge direction,
    by closeness to the line through the pixel along that edge. Unmasked pixels are returned
    unchanged. A layer is filled at once (vectorised), from the original and earlier layers
    only, so the result does not depend on any visiting order."""
    import cv2
    import numpy as np

    known = mask == 0
    if known.all():
        return img
    squeeze = img.ndim == 2
    u = img.astype(np.float32).reshape(img.shape[0], img.shape[1], -1).copy()
    height, width = known.shape
    dist = cv2.distanceTransform((~known).astype(np.uint8), cv2.DIST_L2, 5)
    layers = np.ceil(dist).astype(np.int32)
    layers[known] = 0
    offsets = [
        (dy, dx, math.hypot(dy, dx))
        for dy in range(-_CT_EPS, _CT_EPS + 1)
        for dx in range(-_CT_EPS, _CT_EPS + 1)
        if 0 < dy * dy + dx * dx <= _CT_EPS * _CT_EPS
    ]
    k_sigma = 2 * round(3 * _CT_SIGMA) + 1
    k_rho = 2 * round(3 * _CT_RHO) + 1
    sharp = _CT_MU * _CT_MU / (2 * _CT_EPS * _CT_EPS)
    have = known.copy()
    for level in range(1, int(layers.max()) + 1):
        ys, xs = np.nonzero(layers == level)
        if not ys.size:
            continue
        # Structure tensor of the known pixels only (normalised convolution): the hole's
        # own, still unknown pixels must not make edges of their own.
        kf = have.astype(np.float32)
        smooth = cv2.GaussianBlur(u * kf[..., None], (k_sigma, k_sigma), _CT_SIGMA)
        smooth /= np.maximum(cv2.GaussianBlur(kf, (k_sigma, k_sigma), _CT_SIGMA), 1e-6)[..., None]
        smooth = smooth.reshape(height, width, -1)
        gx = cv2.Sobel(smooth, cv2.CV_32F, 1, 0, ksize=3).reshape(smooth.shape) / 8
        gy = cv2.Sobel(smooth, cv2.CV_32F, 0, 1, ksize=3).reshape(smooth.shape) / 8
        valid = cv2.erode(have.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(np.float32)
        norm = np.maximum(cv2.GaussianBlur(valid, (k_rho, k_rho), _CT_RHO), 1e-6)

        def tensor(
            part: Any, valid: Any = valid, norm: Any = norm, ys: Any = ys, xs: Any = xs
        ) -> Any:
            blurred = cv2.GaussianBlur(part.sum(axis=2) * valid, (k_rho, k_rho), _CT_RHO)
            return (blurred / norm)[ys, xs]

        jxx, jxy, jyy = tensor(gx * gx), tensor(gx * gy), tensor(gy * gy)
        trace = jxx + jyy
        spread = np.sqrt((jxx - jyy) ** 2 + 4 * jxy * jxy)
        low = (trace - spread) / 2
        coherence = np.where(trace > 1e-6, (spread / np.maximum(trace, 1e-6)) ** 2, 0.0)
        # The edge runs along the eigenvector of the smaller eigenvalue.
        vx, vy = jxy, low - jxx
        flat = np.abs(vx) + np.abs(vy) < 1e-9
        vx, vy = np.where(flat, low - jyy, vx), np.where(flat, jxy, vy)
        length = np.sqrt(vx * vx + vy * vy) + 1e-12
        vx, vy = vx / length, vy / length
        acc = np.zeros((ys.size, u.shape[2]), dtype=np.float64)
        total = np.zeros(ys.size, dtype=np.float64)
        for dy, dx, r in offsets:
            ny, nx = ys + dy, xs + dx
            inside = (ny >= 0) & (ny < height) & (nx >= 0) & (nx < width)
            ny, nx = np.clip(ny, 0, height - 1), np.clip(nx, 0, width - 1)
            across = dx * vy - dy * vx  # distance from the line along the edge
            w = (inside & have[ny, nx]) * (np.exp(-sharp * coherence * across * across) + 1e-4) / r
            acc += w[:, None] * u[ny, nx]
            total += w
        done = total > 0
        u[ys[done], xs[done]] = acc[done] / total[done][:, None]
        have[ys[done], xs[done]] = True
    out = np.clip(u + 0.5, 0, 255).astype(np.uint8)
    out[known] = img.reshape(out.shape)[known]
    if not have.all():  # no known pixel within reach (cannot happen layer by layer): Telea
        out = cv2.inpaint(out, (~have).astype(np.uint8), _INPAINT_RADIUS, cv2.INPAINT_TELEA)
        out = out.reshape(u.shape)
    return out[..., 0] if squeeze else out


def _disc(radius: int) -> Any:
    import cv2

    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))


def _png(img: Any) -> bytes:
    import cv2

    ok, buf = cv2.imencode(".png", img)
    if not ok:  # pragma: no cover - OpenCV encodes any 8-bit BGR array
        raise DataError("the eraser could not encode the image")
    return bytes(buf)


def _decode_data_url(url: str) -> bytes:
    return base64.b64decode(url.split(",", 1)[1])


# ---- the refined item's image ------------------------------------------------------------


@dataclass(frozen=True)
class RefineImage:
    """The image a meme's rewrites are shown with, and where it came from."""

    part: ImagePart | None
    source: str
    """``dataset`` (the dataset's erased image), ``eraser`` (the built-in eraser), ``planned``
    (a dry run's stand-in for an erasure), ``original`` (``refine_image: original``), ``none``
    (``refine_image: none``) or ``no image`` (a text-only meme)."""
    mask_area: float | None = None
    """Share of pixels the eraser inpainted (``eraser`` only)."""
    path: str | None = None
    """Where the erased image is (the dataset's file, or ``erased/<sha256>.png`` in the run)."""

    def record(self) -> dict[str, Any]:
        """The JSON-able record kept with each refinement step."""
        return {
            "source": self.source,
            "sha256": self.part.sha256 if self.part is not None else None,
            "mask_area": self.mask_area,
            "path": self.path,
        }


@dataclass(frozen=True)
class EraseFlagged:
    """A meme whose erasure masked more than ``adapt.erase_max_mask`` of its image: never shown
    to a model. A finished per-item outcome (not a failure a re-run retries): the meme's items
    are counted and reported, not scored or refined."""

    meme: str
    mask_area: float
    limit: float
    path: str
    """The flagged erasure in the run folder (``erased/<sha256>.png``), for a look at it."""

    def record(self) -> dict[str, Any]:
        """The JSON-able record the outcome keeps."""
        return {
            "meme": self.meme,
            "mask_area": self.mask_area,
            "limit": self.limit,
            "path": self.path,
        }


def _needs_eraser(memes: Sequence[Meme]) -> list[Meme]:
    return [m for m in memes if m.image_path is not None and m.erased_image is None]


def check_refine_images(ctx: AdaptContext, memes: Sequence[Meme]) -> None:
    """Refuse, before any model call, a run whose refinement cannot hide the text: a meme has
    an image but no erased image, and the built-in eraser is not installed."""
    acfg = ctx.acfg
    if acfg.refine_image != "erased":
        return
    missing = _needs_eraser(memes)
    if missing and not eraser_available():  # imported only when a meme needs it
        raise ConfigError(
            f"adapt.refine_image: {len(missing)} of {len(memes)} memes have no text-erased image "
            f"(e.g. {missing[0].uid}; give an erased_image field, a dataset erased_dir or "
            f"AdamMeme's image/erased/ folder) and the built-in eraser is not installed "
            f"({ERASE_EXTRA}); or set adapt.refine_image: none to send rewrites without an image"
        )


class RefineImages:
    """Each meme's refine image, computed once per run (concurrent chains share one)."""

    def __init__(self) -> None:
        self._done: dict[str, asyncio.Future[RefineImage | EraseFlagged | None]] = {}
        self._eraser: TextEraser | None = None

    async def get(self, ctx: AdaptContext, meme: Meme) -> RefineImage | EraseFlagged | None:
        fut = self._done.get(meme.uid)
        if fut is None:
            fut = asyncio.ensure_future(self._make(ctx, meme))
            self._done[meme.uid] = fut
        return await asyncio.shield(fut)

    def _register(self, ctx: AdaptContext, part: ImagePart, meme: Meme) -> None:
        if ctx.on_image is not None:
            ctx.on_image(part.sha256, meme.text, "")  # shows no caption

    async def _make(self, ctx: AdaptContext, meme: Meme) -> RefineImage | EraseFlagged | None:
        mode = ctx.acfg.refine_image
        if mode == "none":
            return RefineImage(None, "none")
        if mode == "original" or meme.image_path is None:
            part = ctx.image(meme)
            return RefineImage(part, "original" if part is not None else "no image")
        if meme.erased_image is not None:
            try:
                part = ctx.prepared(meme.erased_image)
            except DataError as e:
                ctx.store.record_error(ERASED_KIND, meme.uid, f"erased image: {e}")
                return None
            self._register(ctx, part, meme)
            return RefineImage(part, "dataset", path=str(meme.erased_image))
        original = ctx.image(meme)
        assert original is not None
        if ctx.dry_run:
            # A dry run counts calls: it stands in for the erasure instead of running it.
            sha = hashlib.sha256(f"planned erasure|{original.sha256}".encode()).hexdigest()
            part = ImagePart(original.data_url, sha)
            self._register(ctx, part, meme)
            return RefineImage(part, "planned")
        return await self._erase(ctx, meme, original)

    async def _erase(
        self, ctx: AdaptContext, meme: Meme, original: ImagePart
    ) -> RefineImage | EraseFlagged | None:
        key = f"{ERASER_ID}|{original.sha256}"
        folder = Path(ctx.store.path).parent / "erased"
        rec = ctx.store.get_artifact(ERASED_KIND, key)
        path = folder / f"{rec['sha256']}.png" if rec else None
        if rec is None or path is None or not _intact(path, rec["sha256"]):
            _require()
            if self._eraser is None:
                self._eraser = TextEraser()
            try:
                # CPU work off the event loop; the eraser serialises its engine itself.
                erased = await asyncio.to_thread(
                    self._eraser.erase, _decode_data_url(original.data_url)
                )
            except DataError as e:
                ctx.store.record_error(ERASED_KIND, meme.uid, f"eraser: {e}")
                return None
            except Exception as e:  # the OCR or inpainting runtime failed: on record, retried
                reason = f"eraser failed ({type(e).__name__}: {str(e)[:200]})"
                ctx.store.record_error(ERASED_KIND, meme.uid, reason)
                return None
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{erased.sha256}.png"
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(erased.png)
            os.replace(tmp, path)  # durable before it is recorded
            rec = {
                "eraser": ERASER_ID,
                "original": original.sha256,
                "sha256": erased.sha256,
                "mask_area": erased.mask_area,
                "boxes": erased.boxes,
                "passes": erased.passes,
                "meme": meme.uid,
            }
            ctx.store.put_artifact(ERASED_KIND, key, rec)
        limit = ctx.acfg.erase_max_mask
        if float(rec["mask_area"]) > limit:
            # A mask that large has painted over the picture, not just its text: never shown.
            # On record as an error too, so every report's error block names it.
            ctx.store.record_error(
                ERASED_KIND,
                meme.uid,
                f"eraser mask covers {float(rec['mask_area']):.1%} of the image, over "
                f"adapt.erase_max_mask {limit:.1%}: not used (give the meme's erased image, or "
                f"raise adapt.erase_max_mask)",
            )
            return EraseFlagged(meme.uid, float(rec["mask_area"]), limit, f"erased/{path.name}")
        img = prepare_image(path, ctx.cfg.image)
        part = ImagePart(img.data_url, img.sha256)
        self._register(ctx, part, meme)
        return RefineImage(part, "eraser", float(rec["mask_area"]), f"erased/{path.name}")


def _intact(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


async def refine_image(ctx: AdaptContext, meme: Meme) -> RefineImage | EraseFlagged | None:
    """The image ``meme``'s rewrites are shown with (``EraseFlagged``: the erasure masked too
    much, a finished outcome; None: the erasure failed, on record in the store; the chain is left
    for a re-run)."""
    if ctx.refine_images is None:
        ctx.refine_images = RefineImages()
    images: RefineImages = ctx.refine_images
    return await images.get(ctx, meme)


# ---- drawing a rewrite into the caption region -------------------------------------------


def render_caption(base: ImagePart, text: str) -> ImagePart:
    """``text`` drawn as a meme caption (white, black outline, centred, wrapped) into the top
    caption region of ``base`` (the erased image), with Pillow."""
    from PIL import Image, ImageDraw, ImageFont

    with Image.open(io.BytesIO(_decode_data_url(base.data_url))) as im:
        out = im.convert("RGB")
    size = max(12, out.width // 15)
    font = ImageFont.load_default(size=size)
    draw = ImageDraw.Draw(out)
    lines: list[str] = []
    for word in text.split():
        if lines and draw.textlength(f"{lines[-1]} {word}", font=font) <= out.width - 16:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    y = 6
    for line in lines:
        w = draw.textlength(line, font=font)
        draw.text(
            ((out.width - w) / 2, y),
            line,
            font=font,
            fill=(255, 255, 255),
            stroke_width=max(1, size // 10),
            stroke_fill=(0, 0, 0),
        )
        y += size + 4
    data = encode_png(out)  # lossless, deterministic: the same rewrite gives the same hash
    sha = hashlib.sha256(data).hexdigest()
    return ImagePart("data:image/png;base64," + base64.b64encode(data).decode(), sha)
