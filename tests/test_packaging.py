"""Packaging and docs: the config reference is generated and up to date, the wheel ships the
examples and the licence, the licence is the Apache-2.0 text the metadata declares."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.resources import files
from pathlib import Path

import pytest

from memearena.config import RunConfig
from memearena.config.doc import field_docstrings, render_config_doc

REPO = Path(__file__).resolve().parents[1]


def test_config_doc_is_up_to_date() -> None:
    committed = (REPO / "docs" / "config.md").read_text(encoding="utf-8")
    assert committed == render_config_doc(), (
        "docs/config.md is stale: run `python -m memearena.config.doc > docs/config.md`"
    )


def test_config_doc_documents_every_option_of_every_section() -> None:
    doc = render_config_doc()
    from memearena.config.doc import _walk

    for cls, _ in _walk(RunConfig):
        docs = field_docstrings(cls)
        assert f"## {cls.__name__}" in doc
        for name in cls.model_fields:
            assert docs.get(name), f"{cls.__name__}.{name} has no docstring"
            assert f"| `{name}` |" in doc
    assert "| `strict` | boolean | `false` |" in doc and "| `fields` |" in doc


def test_license_is_the_apache_text_the_metadata_declares() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert meta["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_examples_are_package_data() -> None:
    shipped = {p.name for p in (files("memearena") / "examples").iterdir()}
    in_repo = {p.name for p in (REPO / "examples").glob("*.yaml")}
    assert in_repo and in_repo <= shipped


@pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("build", "wheel", "setuptools")),
    reason="building a wheel needs build, wheel and setuptools (the test extra)",
)
def test_the_wheel_ships_examples_licence_and_templates(tmp_path: Path) -> None:
    import setuptools

    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip("pyproject needs setuptools >= 77")
    src = tmp_path / "src-tree"
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(REPO / "src", src / "src", symlinks=True, ignore=ignore)
    shutil.copytree(REPO / "examples", src / "examples", ignore=ignore)
    out = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", str(tmp_path / "dist")],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("memearena-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for example in (REPO / "examples").glob("*.yaml"):
        assert f"memearena/examples/{example.name}" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "memearena/report/templates/report.html.j2" in names
    for method in ("arena", "adapt", "judge_audit"):  # a method's report partial, in its package
        assert f"memearena/methods/{method}/html/report.html.j2" in names
    assert "memearena/view/templates/base.html.j2" in names
    assert "memearena/view/static/view.css" in names
    assert "memearena/py.typed" in names
