"""Fixtures for the data tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from data_helpers import png_bomb, write_image, write_jsonl, write_noise


@pytest.fixture
def image() -> Callable[..., Path]:
    """Factory: ``image(path, size=..., color=...)`` writes a small image."""
    return write_image


@pytest.fixture
def jsonl() -> Callable[..., Path]:
    """Factory: ``jsonl(path, rows)`` writes a JSONL file."""
    return write_jsonl


@pytest.fixture
def bad_images(tmp_path: Path) -> dict[str, str]:
    """Broken images inside ``tmp_path/ds``: name -> path relative to that root."""
    root = tmp_path / "ds"
    (root / "img").mkdir(parents=True)
    (root / "img" / "empty.png").write_bytes(b"")
    (root / "img" / "corrupt.png").write_bytes(b"this is not an image at all" * 10)
    noise = write_noise(root / "img" / "truncated.png", (128, 128))
    noise.write_bytes(noise.read_bytes()[: noise.stat().st_size // 2])
    png_bomb(root / "img" / "bomb.png", 100_000, 100_000)
    (tmp_path / "secret.png").write_bytes(b"outside")
    return {
        "missing": "img/missing.png",
        "empty": "img/empty.png",
        "corrupt": "img/corrupt.png",
        "truncated": "img/truncated.png",
        "bomb": "img/bomb.png",
        "traversal": "../secret.png",
        "absolute": str(tmp_path / "secret.png"),
    }
