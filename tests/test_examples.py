"""Every shipped example plans with ``--dry-run`` for every method it configures: exit 0, a
plan table, nothing called (real-endpoint examples only warn about unset keys)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from memearena.cli import app

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
COMMANDS = {"arena": "arena", "adapt": "adapt", "judge_audit": "judge-audit"}

runner = CliRunner()


def _cases() -> list[tuple[Path, str]]:
    cases = []
    for path in EXAMPLES:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        cases += [(path, COMMANDS[k]) for k in COMMANDS if raw.get(k)]
    return cases


def test_every_method_has_an_offline_and_a_real_endpoint_example() -> None:
    names = {p.name for p in EXAMPLES}
    assert {"adapt.yaml", "judge-audit.yaml", "demo-arena.yaml"} <= names
    assert {"real-endpoints.yaml", "adapt-real-endpoints.yaml"} <= names
    assert "judge-audit-real-endpoints.yaml" in names
    assert {c for _, c in _cases()} == set(COMMANDS.values())


@pytest.mark.parametrize(("path", "command"), _cases(), ids=lambda v: getattr(v, "name", v))
def test_an_example_plans_with_dry_run(path: Path, command: str, tmp_path: Path) -> None:
    result = runner.invoke(app, [command, str(path), "--dry-run", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "planned calls" in result.output and "total" in result.output
    assert not any(tmp_path.iterdir())  # a dry run writes nothing


def _readme_block(after: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("```", text.index(after)) + len("```\n")
    return text[start : text.index("```", start)]


def test_readme_shows_what_the_real_endpoint_dry_run_prints(tmp_path: Path) -> None:
    path = REPO / "examples" / "real-endpoints.yaml"
    assert _readme_block("# examples/real-endpoints.yaml").strip() in path.read_text("utf-8")
    result = runner.invoke(app, ["arena", str(path), "--dry-run", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    printed = [line.rstrip() for line in result.stdout.splitlines()]
    shown = _readme_block("It prints,\nfor this config:").splitlines()
    assert len(printed) == len(shown)
    for got, doc in zip(printed, shown, strict=True):
        if got.startswith("│"):  # token counts follow the prompt templates: pin the calls
            assert got.split("│")[1:4] == doc.split("│")[1:4]
        else:
            assert got == doc
