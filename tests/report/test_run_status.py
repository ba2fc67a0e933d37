"""The end-of-run summary as a user reads it on an 80-column (piped) console."""

from __future__ import annotations

import io

from rich.console import Console

from memearena.engine.status import ModelStatus, RunStatus, print_run_status


def _render(status: RunStatus) -> str:
    buf = io.StringIO()
    print_run_status(Console(file=buf, width=80, color_system=None), status)
    return buf.getvalue()


def test_missing_table_never_cuts_a_header_name_or_reason_on_80_columns() -> None:
    status = RunStatus(
        complete=False,
        problems=["no battles were produced"],
        spent_usd=0.0,
        spent_upper_bound_usd=0.0,
        max_cost=None,
        models=[
            ModelStatus("judge-1", "context", 4, 4),
            ModelStatus(
                "dead-target-with-a-rather-long-name",
                "target",
                12,
                0,
                errors={"connection_refused": 3, "timeout": 12},
            ),
        ],
    )
    out = _render(status)
    assert "…" not in out
    table = out.split("problem:")[0]
    assert max(len(line) for line in table.splitlines()) <= 80
    columns: dict[int, str] = {}
    for line in table.splitlines():
        if line.startswith(("│", "┃")):
            for i, cell in enumerate(line.replace("┃", "│").split("│")[1:-1]):
                columns[i] = columns.get(i, "") + cell.strip()
    assert "unparsed" in columns[4]
    assert "dead-target-with-a-rather-long-name" in columns[0]
    assert "connection_refused3" in columns[5].replace(" ", "")
