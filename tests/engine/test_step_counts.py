"""The closing "reused N, new M" per stage: a fresh run directory reuses nothing, and its
resume reuses exactly the steps the first run made (a step reached again within one run,
one request shared by several items or chains, is neither)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memearena.cli import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _counts(output: str) -> dict[str, tuple[int, int]]:
    text = " ".join(output.split())
    found = re.findall(r"([a-z_.]+): reused ([\d,]+), new ([\d,]+)", text)
    return {k: (int(r.replace(",", "")), int(n.replace(",", ""))) for k, r, n in found}


@pytest.mark.parametrize(
    ("command", "config", "stages"),
    [
        ("adapt", "adapt.yaml", {"adapt.answer", "adapt.score", "adapt.rewrite"}),
        ("judge-audit", "judge-audit.yaml", {"ja_response", "ja_score", "ja_pairwise"}),
    ],
)
def test_a_fresh_folder_reuses_nothing(
    tmp_path: Path, command: str, config: str, stages: set[str]
) -> None:
    args = [command, str(EXAMPLES / config), "--limit", "3", "--out", str(tmp_path)]
    args.append("--no-progress")
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    made = _counts(first.output)
    assert stages <= set(made), first.output
    assert all(reused == 0 for reused, _ in made.values()), made
    assert all(new > 0 for _, new in made.values()), made

    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    resumed = _counts(again.output)
    assert resumed == {k: (new, 0) for k, (_, new) in made.items()}
