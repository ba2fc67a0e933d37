"""Loading a run's memes: datasets that give no usable item say why, in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from memearena.config import parse_config
from memearena.engine.rundir import load_memes
from memearena.errors import DataError


def test_datasets_without_a_usable_item_name_the_count_and_the_first_reason(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "memes"
    folder.mkdir()
    (folder / "a.png").write_bytes(b"")  # empty
    (folder / "b.png").write_bytes(b"not an image at all")  # corrupt
    cfg = parse_config(
        {"models": {"a": {"provider": "sim"}}, "data": [{"format": "folder", "path": str(folder)}]}
    )
    with pytest.raises(DataError) as e:
        load_memes(cfg)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("no usable items in the configured datasets: 2 refused; the first, ")
    assert "empty image" in msg or "corrupt image" in msg
    assert msg.endswith("(memearena data check CONFIG lists every one)")
