"""The echo method's console summary and report partial (``html/report.html.j2``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from memearena.report.html import Section, register_section


def print_summary(console: Console, section: Mapping[str, Any]) -> None:
    for r in section.get("leaderboard") or []:
        console.print(f"echo: {r['model']} quoted {r['value']:.0%} of {r['memes']} memes")


def _report(section: dict[str, Any], board: dict[str, Any]) -> dict[str, Any] | None:
    rows = [
        {"model": r["model"], "shown": f"{r['value']:.0%} [{r['ci_low']:.0%}, {r['ci_high']:.0%}]"}
        for r in section.get("leaderboard") or []
    ]
    return {"rows": rows, "nav": [("echo", "Echo")]}


register_section(
    Section(
        "echo", "Echo", "report.html.j2", _report, order=5, folder=Path(__file__).parent / "html"
    )
)
