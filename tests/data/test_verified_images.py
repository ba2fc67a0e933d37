"""Images verified by an earlier run are admitted from their record while the file is the one
recorded; a rewritten file, or a stricter config, is judged afresh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

import memearena.data.images as images
from memearena.config import ImageConfig
from memearena.data import ImageError, VerifiedImages
from memearena.engine.rundir import VERIFIED_IMAGES, load_memes
from memearena.store import RunStore


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files actually opened and decoded."""
    seen: list[Path] = []
    verify = images.verify_image

    def counting(path: Path, image_cfg: ImageConfig | None = None) -> tuple[int, int]:
        seen.append(path)
        return verify(path, image_cfg)

    monkeypatch.setattr(images, "verify_image", counting)
    return seen


def test_a_recorded_file_is_not_decoded_again_until_it_changes(
    tmp_path: Path, decoded: list[Path]
) -> None:
    path = tmp_path / "a.png"
    Image.new("RGB", (40, 20), (200, 10, 10)).save(path)
    first = VerifiedImages()
    assert first.verify(path) == (40, 20) and first.changed and decoded == [path]

    again = VerifiedImages(json.loads(json.dumps(first.records)))  # as stored in the run
    assert again.verify(path) == (40, 20) and not again.changed and decoded == [path]

    # A stricter config refuses the recorded file from its recorded size, undecoded.
    with pytest.raises(ImageError, match="max_pixels"):
        again.verify(path, ImageConfig(max_pixels=100))
    assert decoded == [path]

    # The same number of bytes, rewritten (corrupted): judged afresh, and refused.
    size = path.stat().st_size
    path.write_bytes(b"\x89PNG" + b"\0" * (size - 4))
    with pytest.raises(ImageError, match="corrupt"):
        again.verify(path)
    assert decoded == [path, path]


def test_a_run_store_keeps_the_record(tmp_path: Path, decoded: list[Path]) -> None:
    from memearena.demo import demo_config

    cfg = demo_config().model_copy(update={"run": "v"})
    with RunStore(tmp_path / "run.db") as store:
        first = load_memes(cfg, store)
        n = len(decoded)
        assert n >= len(first.memes) and store.get_meta(VERIFIED_IMAGES)
        again = load_memes(cfg, store)
        assert len(decoded) == n  # nothing decoded on the second load
        assert [m.uid for m in again.memes] == [m.uid for m in first.memes]
        store.set_meta(VERIFIED_IMAGES, "[damaged")  # only a cache: verified afresh
        load_memes(cfg, store)
        assert len(decoded) == 2 * n
