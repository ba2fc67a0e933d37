"""The bundled synthetic demo set and the truth lookup the simulated world uses."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from PIL import Image

from memearena.config import DatasetConfig
from memearena.data import (
    DEMO_CATEGORIES,
    demo_annotations,
    demo_dir,
    load_dataset,
    normalize_text,
    prepare_image,
)

FIELDS = ("category", "target", "facts", "false_facts", "misbelief", "harm")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_demo_set.py"


def test_demo_set_loads_with_every_annotation() -> None:
    result = load_dataset(DatasetConfig(format="demo"))
    assert result.errors == []
    memes = result.memes
    assert 20 <= len(memes) <= 30
    assert sum(m.harmful is True for m in memes) >= len(memes) * 2 // 3
    assert any(m.harmful is False for m in memes)
    assert {m.annotations["category"] for m in memes} == set(DEMO_CATEGORIES)
    for m in memes:
        assert m.source == "demo" and m.split == "demo" and m.text
        assert m.image_path is not None and m.image_path.is_relative_to(demo_dir())
        for field in FIELDS:
            assert m.annotations[field], (m.id, field)
        assert 3 <= len(m.annotations["facts"]) <= 4
        assert 2 <= len(m.annotations["false_facts"]) <= 3


def test_demo_images_prepare_and_stay_small() -> None:
    memes = load_dataset(DatasetConfig(format="demo")).memes
    hashes = {prepare_image(m.image_path).sha256 for m in memes if m.image_path}
    assert len(hashes) == len(memes)
    total = sum(p.stat().st_size for p in demo_dir().rglob("*") if p.is_file())
    assert total < 1_500_000


def test_demo_annotations_are_keyed_by_normalized_text() -> None:
    memes = load_dataset(DatasetConfig(format="demo")).memes
    table = demo_annotations(memes)
    assert len(table) == len(memes)
    m = memes[0]
    entry = table[normalize_text("  " + m.text.upper().replace(" ", "\n  "))]
    assert entry["id"] == m.id and entry["misbelief"] == m.annotations["misbelief"]
    assert {e["label"] for e in table.values()} == {0, 1}
    assert all(
        e["label"] == int(bool(x.harmful)) for x in memes for e in [table[normalize_text(x.text)]]
    )
    assert normalize_text("Hello \t WORLD\n") == "hello world"


def test_committed_demo_set_matches_the_generator(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_demo_set", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    committed = [json.loads(line) for line in (demo_dir() / "memes.jsonl").read_text().splitlines()]
    assert committed == [module.row(s) for s in module.SPECS]
    assert sorted(p.name for p in (demo_dir() / "img").iterdir()) == sorted(
        [f"{s.id}.png" for s in module.SPECS] + ["erased"]
    )
    assert sorted(p.name for p in (demo_dir() / "img" / "erased").iterdir()) == sorted(
        f"{s.id}.png" for s in module.SPECS
    )
    for s in module.SPECS:  # pixels, not bytes: PNG bytes may differ across zlib builds
        with Image.open(demo_dir() / "img" / f"{s.id}.png") as im:
            assert im.convert("RGB").tobytes() == module.render(s).convert("RGB").tobytes(), s.id
        # The erased image is the meme without its caption layer, pixel for pixel.
        with Image.open(demo_dir() / "img" / "erased" / f"{s.id}.png") as im:
            erased = im.convert("RGB").tobytes()
            assert erased == module.render_erased(s).convert("RGB").tobytes(), s.id
