"""Untrusted text (model names, replies, dataset text, errors) reaches the console inert — no rich
markup, no control or escape sequences — and CSV exports never start a spreadsheet formula."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from memearena.cli import app
from memearena.report.safe import FORMULA_PREFIXES, console_safe, csv_safe, strip_control
from memearena.store import RunStore

runner = CliRunner()

EVIL_NAMES = [
    "[/bold]evil",
    "[link=http://x]click[/link]",
    "\x1b[31mred\x1b[0m",
    "\x1b]0;pwned\x07title",
    "bell\x07\x08back",
    "right\u202eto-left",
    "ends\\",
]


def _render(markup: str) -> str:
    buf = io.StringIO()
    Console(file=buf, width=80, force_terminal=False, color_system=None).print(markup)
    return buf.getvalue()


@pytest.mark.parametrize("name", EVIL_NAMES)
def test_console_safe_prints_literally_with_no_control_sequences(name: str) -> None:
    shown = _render(f"[bold]model:[/bold] {console_safe(name)}")
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert shown.startswith("model: ")
    assert strip_control(name).rstrip("\\") in shown


def test_console_safe_keeps_one_line_and_can_cut() -> None:
    assert console_safe("a\nb\r\tc") == "a b  c"
    assert strip_control("a\nb", multiline=True) == "a\nb"
    assert console_safe("x" * 50, max_chars=10) == "x" * 9 + "…"
    assert console_safe(3.5) == "3.5"


def test_csv_safe_neutralises_formula_prefixes_only_in_strings() -> None:
    for prefix in FORMULA_PREFIXES:
        assert csv_safe(f"{prefix}HYPERLINK(1)") == f"'{prefix}HYPERLINK(1)"
    assert csv_safe("plain") == "plain"
    assert csv_safe(-3) == -3 and csv_safe(-0.5) == -0.5 and csv_safe(None) is None


def _evil_config(tmp_path: Path) -> Path:
    evil_target, evil_judge = "[/bold]evil", "\x1b[2Jjudge\x1b]0;t\x07"
    cfg: dict[str, Any] = {
        "run": "evil",
        "models": {
            evil_target: {"provider": "sim", "skill": 0.9},
            "t2": {"provider": "sim", "skill": 0.2},
            evil_judge: {"provider": "sim", "skill": 0.8},
        },
        "data": [{"format": "demo", "limit": 2}],
        "arena": {
            "targets": [evil_target, "t2"],
            "judges": [evil_judge],
            "context_model": evil_judge,
            "fusion_rounds": 1,
            "bootstrap": 10,
        },
    }
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return p


def test_end_of_run_summary_survives_hostile_model_names(tmp_path: Path) -> None:
    p = _evil_config(tmp_path)
    result = runner.invoke(app, ["arena", str(p), "--out", str(tmp_path / "o"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "[/bold]evil" in result.output  # shown literally, not interpreted
    assert "\x1b" not in result.output and "\x07" not in result.output
    dry = runner.invoke(app, ["arena", str(p), "--dry-run"])
    assert dry.exit_code == 0 and "\x1b" not in dry.output and "[/bold]evil" in dry.output


def test_models_check_survives_a_hostile_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memearena.cli.models as mc

    class Hostile:
        def respond(self, model: str, role: str, messages: Any, params: Any) -> str:
            return "[/bold]oops \x1b[2J\x1b]0;owned\x07 done"

    monkeypatch.setattr(mc, "demo_world", lambda seed: Hostile())
    result = runner.invoke(app, ["models", "check", str(_evil_config(tmp_path))])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "\x1b" not in result.output
    assert "[/bold]oops" in result.output


def test_error_messages_holding_markup_or_escapes_stay_one_inert_line(tmp_path: Path) -> None:
    cfg = yaml.safe_load(_evil_config(tmp_path).read_text(encoding="utf-8"))
    cfg["arena"]["targets"] = ["[/red]ghost\x1b[2J", "t2"]
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    result = runner.invoke(app, ["arena", str(p)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "[/red]ghost" in lines[0] and "\x1b" not in lines[0]


def test_rank_survives_hostile_model_names_in_a_battle_file(tmp_path: Path) -> None:
    battles = tmp_path / "b.jsonl"
    rows = [
        {"model_a": "[/bold]evil", "model_b": "\x1b[31mred", "winner": w}
        for w in ("model_a", "model_b", "model_a", "tie")
    ]
    battles.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = runner.invoke(app, ["rank", str(battles), "--bootstrap", "5"])
    assert result.exit_code == 0, result.output
    assert "[/bold]evil" in result.output and "\x1b" not in result.output


def _store_with_formulas(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    with RunStore(run / "run.db") as store:
        store.record_error("answer", "=cmd|' /C calc'!A0", '=HYPERLINK("http://x","click")')
        store.record_error("answer", "k2", "+1+1", "@SUM(A1)")
        store.record_error("answer", "k3", "-2", "\tTAB")
        store.put_artifact("answer", "k4", {"text": "=1+1"})
    return run


def test_csv_export_neutralises_formula_cells(tmp_path: Path) -> None:
    run = _store_with_formulas(tmp_path)
    result = runner.invoke(app, ["export", str(run), "--table", "errors", "--format", "csv"])
    assert result.exit_code == 0, result.output
    with (run / "errors.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    cells = [v for r in rows for k, v in r.items() if k != "created_at"]
    assert not [c for c in cells if c.startswith(FORMULA_PREFIXES)]
    assert '\'=HYPERLINK("http://x","click")' in cells and "'-2" in cells


def test_export_to_stdout(tmp_path: Path) -> None:
    run = _store_with_formulas(tmp_path)
    result = runner.invoke(
        app, ["export", str(run), "--table", "artifacts", "--format", "jsonl", "--to", "-"]
    )
    assert result.exit_code == 0, result.output
    assert not (Path.cwd() / "-").exists() and not (run / "-").exists()
    rows = [json.loads(ln) for ln in result.stdout.splitlines() if ln.startswith("{")]
    assert [{k: v for k, v in r.items() if k != "created_at"} for r in rows] == [
        {"kind": "answer", "key": "k4", "value": {"text": "=1+1"}}
    ]
    csv_out = runner.invoke(
        app, ["export", str(run), "--table", "errors", "--format", "csv", "--to", "-"]
    )
    assert csv_out.exit_code == 0 and "'=HYPERLINK" in csv_out.stdout
