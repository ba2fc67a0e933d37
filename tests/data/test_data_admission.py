"""Image admission: a thin strip (40000x1, 1x40000) is refused from its header, per item.

A strip of a few hundred bytes passes any pixel cap, and every later stage that rescales it
(resizing to ``max_side``, OCR's detector scaling the short side up) turns it into arrays of
gigabytes. So width, height and aspect ratio are bounded before any decoder runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from data_helpers import png_bomb, write_image, write_jsonl
from PIL import Image
from typer.testing import CliRunner

from memearena.cli.data import check_command
from memearena.config import DatasetConfig, ImageConfig
from memearena.data import ImageError, load_dataset, prepare_image, verify_image


def _strip(path: Path, size: tuple[int, int]) -> Path:
    """A real, decodable, tiny PNG of ``size`` (a few hundred bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", size, 255).save(path)
    return path


@pytest.mark.parametrize("size", [(40_000, 1), (1, 40_000)])
def test_a_thin_strip_is_refused_naming_the_limit_and_the_file(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    path = _strip(tmp_path / "strip.png", size)
    assert path.stat().st_size < 2_000
    for check in (verify_image, prepare_image):
        with pytest.raises(ImageError) as e:
            check(path, None)
        msg = str(e.value)
        assert str(path) in msg
        assert "image.max_dimension" in msg and "40000" in msg


def test_the_aspect_ratio_is_bounded_below_the_dimension_limit(tmp_path: Path) -> None:
    path = _strip(tmp_path / "wide.png", (2_000, 10))
    with pytest.raises(ImageError) as e:
        verify_image(path, ImageConfig())
    assert e.value.kind == "extreme aspect ratio"
    assert "image.max_aspect" in str(e.value) and "200" in str(e.value)
    # A configured bound admits it; a shape within the default bound always passes.
    assert verify_image(path, ImageConfig(max_aspect=250)) == (2_000, 10)
    assert prepare_image(_strip(tmp_path / "tall.png", (50, 900)), ImageConfig()).height == 900


def test_a_header_only_strip_is_refused_before_any_pixel_is_decoded(tmp_path: Path) -> None:
    # A header claiming 1 x 3,000,000: no pixel data to decode, so only the header can refuse it.
    path = png_bomb(tmp_path / "claims.png", 1, 3_000_000)
    with pytest.raises(ImageError) as e:
        verify_image(path, ImageConfig())
    assert e.value.kind == "image too large"
    assert "height 3000000" in str(e.value)


def test_a_strip_in_a_dataset_is_one_item_error_and_the_load_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _strip(root / "wide.png", (40_000, 1))
    _strip(root / "tall.png", (1, 40_000))
    write_image(root / "ok.png")
    rows = [
        {"id": 1, "img": "wide.png", "label": 1, "text": "a"},
        {"id": 2, "img": "tall.png", "label": 1, "text": "b"},
        {"id": 3, "img": "ok.png", "label": 0, "text": "c"},
    ]
    write_jsonl(root / "x.jsonl", rows)
    result = load_dataset(DatasetConfig(format="fhm", path=root / "x.jsonl"), ImageConfig())
    assert [m.id for m in result.memes] == ["00003"]
    assert sorted(e.item for e in result.errors) == ["00001", "00002"]
    assert all("image.max_dimension" in e.reason for e in result.errors)


def test_data_check_reports_a_strip_as_bad(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _strip(root / "wide.png", (40_000, 1))
    _strip(root / "tall.png", (1, 40_000))
    write_image(root / "ok.png")
    rows = [
        {"id": "wide", "img": "wide.png", "label": 1, "text": "a"},
        {"id": "tall", "img": "tall.png", "label": 1, "text": "b"},
        {"id": "ok", "img": "ok.png", "label": 0, "text": "c"},
    ]
    write_jsonl(root / "x.jsonl", rows)
    cfg = tmp_path / "run.yaml"
    cfg.write_text("models: {}\ndata:\n  - {format: fhm, path: ds/x.jsonl}\n", encoding="utf-8")
    app = typer.Typer()
    app.command()(check_command)
    result = CliRunner().invoke(app, [str(cfg)], terminal_width=200)
    assert result.exit_code == 1, result.output
    assert "2 item error(s)" in result.stdout
    assert "image too large" in result.stdout
    assert "all 3 items ok" not in result.stdout
