"""Safe image I/O: paths that stay inside the dataset root, and images that cannot hurt us.

Every image a dataset names is untrusted input. The threats guarded against here:

* path traversal: ``../../etc/passwd``, absolute paths, symlinks that point out of the root;
* decompression bombs: a few-KB PNG whose header claims 100,000 x 100,000 pixels;
* thin strips: a 40,000 x 1 PNG of a few hundred bytes passes any pixel cap, but resizing and
  OCR scale it into arrays of gigabytes, so width, height and aspect ratio are bounded too;
* corrupt, truncated, empty or mislabelled files;
* dangerous decoders: only the formats memes come in are opened (EPS, for one, runs Ghostscript).

Encoding (documented choice): after EXIF orientation, RGB conversion (transparency composited on
white) and resizing to ``max_side``, an image with at most 4,096 distinct colours — drawings,
screenshots, text-heavy memes — is encoded as lossless PNG; anything else is a photo and is encoded
as JPEG (quality 90), which is several times smaller and faster for the same pixels. The content
hash is the SHA-256 of those encoded bytes, i.e. of exactly what is sent to a model.
"""

from __future__ import annotations

import base64
import hashlib
import io
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from PIL import Image, ImageOps

from memearena.config import ImageConfig
from memearena.errors import DataError

IMAGE_EXTENSIONS: frozenset[str] = frozenset({".png", ".jpg", ".jpeg", ".webp", ".gif"})
"""File extensions the ``folder`` loader treats as images."""

_FORMATS: tuple[str, ...] = ("PNG", "JPEG", "WEBP", "GIF", "BMP")
# Only decoders for the formats memes come in; never EPS/PS (Ghostscript), never exotic plugins.

DEFAULT_IMAGE_CONFIG: ImageConfig = ImageConfig.model_validate({})
"""Image settings used when none are given (max_side 1024, max_pixels 40M, max_dimension
16,384, max_aspect 20)."""

_PNG_MAX_COLOURS = 4096
_FEW_VALUED = frozenset({"1", "L", "P"})
# Modes whose pixels take at most 256 values: RGB conversion (transparency composited on white
# included) maps each value to one colour, so the image has at most 256 colours (a graphic,
# PNG) unless resampling blends them.
_JPEG_QUALITY = 90


class ImageError(DataError):
    """An image cannot be used: the message names the file; ``kind`` classifies the problem.

    Kinds: ``path escapes root``, ``missing image``, ``empty image``, ``corrupt image``,
    ``decompression bomb``, ``image too large`` (a side past ``image.max_dimension``),
    ``extreme aspect ratio`` (past ``image.max_aspect``).
    """

    def __init__(self, kind: str, path: str | Path, detail: str = "") -> None:
        self.kind = kind
        self.path = str(path)
        self.detail = detail
        super().__init__(f"{self.path}: {kind}" + (f" ({detail})" if detail else ""))

    @property
    def reason(self) -> str:
        """The problem as an item-error reason: ``kind: path (detail)``."""
        return f"{self.kind}: {self.path}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class PreparedImage:
    """An image ready to send: a base64 data URL and the hash of its encoded bytes."""

    data_url: str
    """``data:<mime>;base64,...`` of the encoded image."""
    sha256: str
    """Hex SHA-256 of the encoded bytes (the cache key; never the base64 blob)."""
    width: int
    """Width in pixels after orientation and resizing."""
    height: int
    """Height in pixels after orientation and resizing."""
    mime: str
    """``image/png`` or ``image/jpeg``."""


def safe_join(root: Path, relative: str) -> Path:
    """Resolve ``relative`` under ``root``; raise DataError if the result would leave ``root``.

    Absolute paths, ``..`` components that climb out, and symlinks pointing outside the root are
    all rejected. The returned path is absolute and fully resolved.
    """
    if not isinstance(relative, str) or not relative.strip():
        raise ImageError("path escapes root", repr(relative), "empty image path")
    if "\x00" in relative:
        raise ImageError("path escapes root", repr(relative), "NUL byte in path")
    if PurePosixPath(relative).is_absolute() or PureWindowsPath(relative).drive:
        raise ImageError("path escapes root", relative, "absolute paths are not allowed")
    base = root.resolve()
    # resolve() follows symlinks, so a link inside the root that points outside is caught too.
    target = (base / relative).resolve()
    if not target.is_relative_to(base):
        raise ImageError("path escapes root", relative, f"outside dataset root {base}")
    return target


def _open_checked(
    path: Path, image_cfg: ImageConfig, draft_side: int
) -> tuple[Image.Image, tuple[int, int]]:
    """Open, verify and decode an image, refusing bombs before any pixel is decoded.

    JPEGs are decoded at a reduced scale when the result needs no more than ``draft_side``
    pixels a side: every byte is still read, so truncation is still caught, but faster.
    Returns the decoded image and its stored size.
    """
    try:
        st = path.stat()  # one stat: size and kind (it follows symlinks, as is_file does)
    except FileNotFoundError:
        raise ImageError("missing image", path, "no such file") from None
    except OSError as e:
        raise ImageError("missing image", path, e.strerror or str(e)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ImageError("missing image", path, "not a regular file")
    if st.st_size == 0:
        raise ImageError("empty image", path, "zero-byte file")
    try:
        with warnings.catch_warnings():
            # Our own pixel cap below decides; Pillow's global warning threshold must not.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path, formats=_FORMATS) as probe:
                _check_pixels(path, probe.size, image_cfg)
                probe.verify()
            im = Image.open(path, formats=_FORMATS)
        try:
            dims = im.size
            _check_pixels(path, dims, image_cfg)
            im.seek(0)  # first frame of an animated GIF / WebP
            if im.format == "JPEG":
                im.draft("RGB", (draft_side, draft_side))
            im.load()  # a truncated file fails here, not later in a worker
        except BaseException:
            im.close()
            raise
    except ImageError:
        raise
    except Image.DecompressionBombError as e:
        raise ImageError("decompression bomb", path, str(e)) from None
    except Exception as e:
        # Untrusted bytes: decoders raise OSError, SyntaxError, ValueError, struct.error, ...
        raise ImageError("corrupt image", path, f"{type(e).__name__}: {e}") from None
    return im, dims


def _check_pixels(path: Path, size: tuple[int, int], image_cfg: ImageConfig) -> None:
    """Admission from the header's size alone: called before any pixel is decoded."""
    w, h = size
    if w <= 0 or h <= 0:
        raise ImageError("corrupt image", path, f"invalid size {w}x{h}")
    for side, n in (("width", w), ("height", h)):
        if n > image_cfg.max_dimension:
            raise ImageError(
                "image too large",
                path,
                f"{w}x{h}: {side} {n} exceeds image.max_dimension {image_cfg.max_dimension}",
            )
    aspect = max(w, h) / min(w, h)
    if aspect > image_cfg.max_aspect:
        raise ImageError(
            "extreme aspect ratio",
            path,
            f"{w}x{h}: aspect ratio {aspect:.4g} exceeds image.max_aspect {image_cfg.max_aspect:g}",
        )
    if w * h > image_cfg.max_pixels:
        raise ImageError(
            "decompression bomb",
            path,
            f"{w}x{h} = {w * h} pixels exceeds max_pixels {image_cfg.max_pixels}",
        )


def verify_image(path: Path, image_cfg: ImageConfig | None = None) -> tuple[int, int]:
    """Check that ``path`` is a usable image (exists, decodes, under the pixel cap).

    Returns its stored (width, height); raises :class:`ImageError` (a DataError) naming the file.
    """
    cfg = image_cfg or DEFAULT_IMAGE_CONFIG
    im, size = _open_checked(path, cfg, draft_side=1)
    im.close()
    return size


class VerifiedImages:
    """Images verified before, by file identity, so that a resumed run does not decode them
    again: a file whose device, inode, size, modification and change times (ns) match its
    record is admitted from its recorded size (the pixel limits of the config in force are
    checked again); any other file is verified (decoded) and recorded. Rewriting a file changes
    its change time, which user code cannot set back. ``records`` is JSON-ready."""

    def __init__(self, records: dict[str, list[int]] | None = None) -> None:
        self.records: dict[str, list[int]] = dict(records or {})
        self.changed = False

    def verify(self, path: Path, image_cfg: ImageConfig | None = None) -> tuple[int, int]:
        """``verify_image``, answered from the record when the file is the one recorded."""
        cfg = image_cfg or DEFAULT_IMAGE_CONFIG
        try:
            st = path.stat()
        except OSError:
            return verify_image(path, cfg)  # its own error names the problem
        identity = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        key = str(path)
        known = self.records.get(key)
        if (
            stat.S_ISREG(st.st_mode)
            and isinstance(known, list)
            and len(known) == 7
            and known[:5] == identity
        ):
            size = (int(known[5]), int(known[6]))
            _check_pixels(path, size, cfg)
            return size
        size = verify_image(path, cfg)
        self.records[key] = [*identity, *size]
        self.changed = True
        return size


def _to_rgb(im: Image.Image) -> Image.Image:
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        canvas = Image.new("RGB", rgba.size, (255, 255, 255))
        canvas.paste(rgba, mask=rgba.getchannel("A"))
        return canvas
    if im.mode == "RGB":
        return im  # converting would only copy it
    if im.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        # High-bit-depth greyscale: scale to 8 bits instead of clipping to white.
        im = im.convert("I").point(lambda v: v / 256).convert("L")
    return im.convert("RGB")


@dataclass(frozen=True)
class EncodedImage:
    """An image as the safe path encodes it, before base64: the bytes a request sends."""

    data: bytes
    """The encoded bytes (PNG or JPEG)."""
    mime: str
    """``image/png`` or ``image/jpeg``."""
    width: int
    """Width in pixels after orientation and resizing."""
    height: int
    """Height in pixels after orientation and resizing."""


def encode_image(path: Path, image_cfg: ImageConfig | None = None) -> EncodedImage:
    """``prepare_image``'s bytes before base64 (for a caller that stores or changes them: no
    data URL built only to be decoded again). Raises :class:`ImageError` like it."""
    cfg = image_cfg or DEFAULT_IMAGE_CONFIG
    im, _ = _open_checked(path, cfg, draft_side=cfg.max_side)
    try:
        try:
            # In place: the decoded image is ours alone (closed below), so no copy is needed.
            ImageOps.exif_transpose(im, in_place=True)
            few = im.mode in _FEW_VALUED
            rgb = _to_rgb(im)
            if max(rgb.size) > cfg.max_side:
                rgb.thumbnail((cfg.max_side, cfg.max_side), Image.Resampling.LANCZOS)
                few = False  # resampling blends colours
            width, height = rgb.size
            buf = io.BytesIO()
            if few or rgb.getcolors(maxcolors=_PNG_MAX_COLOURS) is not None:
                mime = "image/png"
                rgb.save(buf, format="PNG", compress_level=6)
            else:
                mime = "image/jpeg"
                rgb.save(buf, format="JPEG", quality=_JPEG_QUALITY)
        except Exception as e:
            raise ImageError("corrupt image", path, f"{type(e).__name__}: {e}") from None
    finally:
        im.close()
    return EncodedImage(buf.getvalue(), mime, width, height)


def prepare_image(path: Path, image_cfg: ImageConfig | None = None) -> PreparedImage:
    """Load an image safely and return it as a data URL with its content hash.

    Steps: verify, pixel cap (before decoding), EXIF orientation, RGB, resize so the longest side
    is at most ``max_side`` (never upscaled, aspect kept), encode (PNG for graphics, JPEG for
    photos; see the module docstring), base64. Raises :class:`ImageError` (a DataError) naming the
    file on any problem.
    """
    enc = encode_image(path, image_cfg)
    data = enc.data
    b64 = base64.b64encode(data).decode("ascii")
    return PreparedImage(
        data_url=f"data:{enc.mime};base64,{b64}",
        sha256=hashlib.sha256(data).hexdigest(),
        width=enc.width,
        height=enc.height,
        mime=enc.mime,
    )
