"""Every image a model was sent, on record: kept once by content hash in the run directory,
``DIR/images/<sha256[:2]>/<sha256>.<ext>``, so a stored request (which names its images by
hash) can be shown exactly as the model saw it.

Threats: a file is named by the sha256 of its own bytes (checked before it is written, so a
part whose hash does not name its bytes is never kept under that name), written whole under a
temporary name and renamed (a crash leaves no half-written image under a hash), owner-only
(``0600``: the images are the dataset's and the run's, as private as run.db); a reader checks
the bytes against the hash again before it serves them."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from pathlib import Path

__all__ = ["IMAGES_DIR", "ImageStore", "data_url_bytes", "find_image", "image_ext"]

IMAGES_DIR = "images"
"""The folder of kept images, under the run directory."""

_SHA = re.compile(r"^[0-9a-f]{64}$")
_EXTS = ("png", "jpg", "gif", "webp", "bin")


def image_ext(data: bytes) -> str:
    """The file extension of an encoded image by its first bytes (``bin`` when unknown)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return "bin"


def data_url_bytes(url: str) -> bytes | None:
    """The bytes of a base64 ``data:`` URL (None for anything else: a remote URL, a malformed
    one)."""
    if not url.startswith("data:"):
        return None
    head, sep, body = url.partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return None


def _folder(run_dir: Path, sha256: str) -> Path:
    return Path(run_dir) / IMAGES_DIR / sha256[:2]


def find_image(run_dir: Path, sha256: str) -> Path | None:
    """The kept file of the image with this hash under ``run_dir`` (None: not kept, or not a
    hash). The caller checks its bytes before trusting them."""
    if not _SHA.match(sha256):
        return None
    folder = _folder(run_dir, sha256)
    for ext in _EXTS:
        p = folder / f"{sha256}.{ext}"
        if p.is_file():
            return p
    return None


class ImageStore:
    """The kept images of one run directory; each hash is written at most once (a hash seen
    by this store, or already on disk, is not written again)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = Path(run_dir)
        # The file of each hash this store wrote or found on disk: an image sent in a thousand
        # calls costs one disk check, not one per call (a file removed behind the store's back
        # is not noticed by ``put_data_url``; ``put`` checks the disk again).
        self._known: dict[str, Path] = {}
        self._refused: set[str] = set()

    def has(self, sha256: str) -> bool:
        """Whether the image with this hash is kept (checked on disk once per hash)."""
        if sha256 in self._known:
            return True
        found = find_image(self.dir, sha256)
        if found is not None:
            self._known[sha256] = found
            return True
        return False

    def put(self, sha256: str, data: bytes) -> Path | None:
        """Keep ``data`` under its hash, ``sha256`` (None, nothing written, when the bytes do
        not hash to it). Returns the file."""
        if not _SHA.match(sha256) or hashlib.sha256(data).hexdigest() != sha256:
            return None
        found = find_image(self.dir, sha256) if sha256 in self._known else None
        if found is not None:
            return found
        folder = _folder(self.dir, sha256)
        path = folder / f"{sha256}.{image_ext(data)}"
        if not path.is_file():
            (self.dir / IMAGES_DIR).mkdir(mode=0o700, exist_ok=True)
            folder.mkdir(mode=0o700, exist_ok=True)
            tmp = folder / f".{sha256}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        self._known[sha256] = path
        return path

    def put_data_url(self, sha256: str, url: str) -> Path | None:
        """Keep the image a message part sends as ``url`` under its hash, unless it is kept
        already (decoded only then: an image sent in a thousand calls is decoded once)."""
        known = self._known.get(sha256)
        if known is not None:
            return known
        if sha256 in self._refused:
            return None
        if self.has(sha256):
            return self._known[sha256]
        data = data_url_bytes(url)
        kept = None if data is None else self.put(sha256, data)
        if kept is None:  # not a data URL, or its bytes are not the hash: never kept
            self._refused.add(sha256)
        return kept
