"""Where a meme's text-erased image comes from: the row's ``erased_image`` field, the dataset's
``erased_dir``, or AdamMeme's ``image/erased/`` beside ``image/ori/``; a bad one is an item error
naming the field, never a silent fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_helpers import write_image, write_jsonl

from memearena.config import DatasetConfig
from memearena.data import load_dataset
from memearena.errors import DataError


def _rows(*extra: dict) -> list[dict]:
    return [
        {"id": str(i), "img": f"img/{i}.png", "text": f"meme {i}", **e} for i, e in enumerate(extra)
    ]


def test_the_erased_image_field_is_resolved_under_the_root_and_not_kept_as_an_annotation(
    tmp_path: Path,
) -> None:
    for i in range(2):
        write_image(tmp_path / "img" / f"{i}.png")
    write_image(tmp_path / "clean" / "0.png")
    f = write_jsonl(tmp_path / "d.jsonl", _rows({"erased_image": "clean/0.png"}, {}))
    memes = load_dataset(DatasetConfig(format="fhm", path=f)).memes
    assert memes[0].erased_image == (tmp_path / "clean" / "0.png").resolve()
    assert "erased_image" not in memes[0].annotations
    assert memes[1].erased_image is None


def test_a_bad_erased_image_is_an_item_error_naming_the_field(tmp_path: Path) -> None:
    for i in range(3):
        write_image(tmp_path / "img" / f"{i}.png")
    f = write_jsonl(
        tmp_path / "d.jsonl",
        _rows({"erased_image": "clean/missing.png"}, {"erased_image": 7}, {}),
    )
    res = load_dataset(DatasetConfig(format="fhm", path=f))
    assert [m.id for m in res.memes] == ["00002"]
    reasons = {e.item: e.reason for e in res.errors}
    assert reasons["00000"].startswith("missing image:") and "missing.png" in reasons["00000"]
    assert "erased_image" in reasons["00001"]


def test_erased_dir_matches_by_name_or_stem(tmp_path: Path) -> None:
    for i in range(3):
        write_image(tmp_path / "img" / f"{i}.png")
    write_image(tmp_path / "erased" / "0.png")
    f = write_jsonl(tmp_path / "d.jsonl", _rows({}, {}, {}))
    memes = load_dataset(DatasetConfig(format="fhm", path=f, erased_dir=tmp_path / "erased")).memes
    assert memes[0].erased_image == (tmp_path / "erased" / "0.png").resolve()
    assert memes[1].erased_image is None  # none there: the eraser may fill in
    with pytest.raises(DataError, match="erased_dir is not a folder"):
        load_dataset(DatasetConfig(format="fhm", path=f, erased_dir=tmp_path / "nope"))


def test_adammeme_layout_is_found_beside_the_original(tmp_path: Path) -> None:
    write_image(tmp_path / "image" / "ori" / "01235.png")
    write_image(tmp_path / "image" / "ori" / "01236.png")
    write_image(tmp_path / "image" / "erased" / "01235.png")
    f = write_jsonl(
        tmp_path / "d.jsonl",
        [
            {"id": 1235, "img": "image/ori/01235.png", "text": "a"},
            {"id": 1236, "img": "image/ori/01236.png", "text": "b"},
        ],
    )
    memes = load_dataset(DatasetConfig(format="fhm", path=f)).memes
    assert memes[0].erased_image == (tmp_path / "image" / "erased" / "01235.png").resolve()
    assert memes[1].erased_image is None


def test_the_demo_set_ships_an_exact_erased_image_for_every_meme() -> None:
    memes = load_dataset(DatasetConfig(format="demo")).memes
    assert memes and all(m.erased_image is not None and m.erased_image.is_file() for m in memes)
    assert all(m.erased_image != m.image_path for m in memes)
