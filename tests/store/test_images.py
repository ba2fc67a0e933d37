"""Every image a model was sent is kept once, by the hash of its own bytes, owner-only, in the
run directory; bytes that do not hash to the name given are never kept under it."""

from __future__ import annotations

import base64
import hashlib
import stat
from pathlib import Path

import pytest

from memearena.store.images import ImageStore, data_url_bytes, find_image
from memearena.store.runstore import RunStore

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_an_image_is_kept_once_under_its_hash_owner_only(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    sha = _sha(PNG)
    path = store.put(sha, PNG)
    assert path == tmp_path / "images" / sha[:2] / f"{sha}.png"
    assert path.read_bytes() == PNG
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "images").stat().st_mode) == 0o700
    mtime = path.stat().st_mtime_ns
    assert ImageStore(tmp_path).put(sha, PNG) == path  # a second store finds it: not rewritten
    assert path.stat().st_mtime_ns == mtime
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    assert find_image(tmp_path, sha) == path


def test_bytes_that_do_not_hash_to_the_name_are_never_kept(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    assert store.put("0" * 64, PNG) is None
    assert store.put("../../etc/passwd", PNG) is None
    assert not (tmp_path / "images").exists()
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert store.put_data_url("f" * 64, url) is None
    assert store.put_data_url(_sha(PNG), "https://example.invalid/x.png") is None
    assert find_image(tmp_path, "f" * 64) is None


def test_a_data_url_is_decoded_and_kept(tmp_path: Path) -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert data_url_bytes(url) == PNG
    assert data_url_bytes("data:image/png;base64,@@@") is None
    assert data_url_bytes("data:text/plain,hello") is None
    kept = ImageStore(tmp_path).put_data_url(_sha(PNG), url)
    assert kept is not None and kept.read_bytes() == PNG


def test_the_run_store_keeps_images_beside_its_database(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run" / "run.db")
    try:
        store.put_image_bytes(_sha(PNG), PNG)
    finally:
        store.close()
    assert find_image(tmp_path / "run", _sha(PNG)) is not None


def test_an_image_already_kept_is_not_looked_up_on_disk_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    store = ImageStore(tmp_path)
    kept = store.put_data_url(_sha(PNG), url)
    assert kept is not None

    def no_disk(*_: object) -> None:
        raise AssertionError("looked up on disk again")

    monkeypatch.setattr("memearena.store.images.find_image", no_disk)
    monkeypatch.setattr("memearena.store.images.data_url_bytes", no_disk)
    assert store.put_data_url(_sha(PNG), url) == kept
    assert store.put_data_url(_sha(PNG), url) == kept
