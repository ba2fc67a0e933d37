"""The Judge audit's console output fits an 80-column terminal: no number or header cut off."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from memearena.cli import app
from memearena.cli.judge_audit import metrics_table
from memearena.stats.judge_bias import BIAS_TYPES, BiasPair, bias_table

runner = CliRunner()


def _rows() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i in range(30):
        for k, t in enumerate(BIAS_TYPES):
            rows.append(
                {
                    "id": f"item-{i}",
                    "bias_type": t,
                    "unbiased_score": 1 + (i + k) % 10,
                    "biased_score": 1 + (i * 3 + k) % 10,
                }
            )
    return rows


def _assert_fits(text: str) -> None:
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80, text


def test_metrics_table_fits_an_80_column_terminal() -> None:
    pairs = [
        BiasPair(str(r["id"]), str(r["bias_type"]), r["unbiased_score"], r["biased_score"])  # type: ignore[arg-type]
        for r in _rows()
    ]
    buf = io.StringIO()
    Console(file=buf, width=80, highlight=False).print(metrics_table(bias_table(pairs, n_boot=50)))
    out = buf.getvalue()
    _assert_fits(out)
    for t in BIAS_TYPES:
        assert t in out
    assert "95% CI" in out and "excluded" in out


def test_piped_metrics_output_uses_80_columns(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    res = runner.invoke(app, ["judge-audit", "metrics", str(path), "--bootstrap", "50"])
    assert res.exit_code == 0, res.output
    _assert_fits(res.output)
    assert "instruction_misalignment" in res.output


def test_piped_run_summary_uses_80_columns(tmp_path: Path) -> None:
    cfg = Path(__file__).parents[3] / "examples" / "judge-audit.yaml"
    res = runner.invoke(app, ["judge-audit", str(cfg), "--out", str(tmp_path), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in res.output.splitlines()) <= 80, res.output


def test_metrics_help_names_every_option_whole_on_80_columns() -> None:
    res = runner.invoke(app, ["judge-audit", "metrics", "--help"], terminal_width=80)
    assert res.exit_code == 0, res.output
    assert "…" not in res.output, res.output
    assert "--no-reference-compat" in res.output
    listing = runner.invoke(app, ["judge-audit", "--help"], terminal_width=80)
    assert "…" not in listing.output
    # The command list shows a sentence, not a docstring's lines broken where they were typed.
    words = " ".join(" ".join(ln.strip(" │").split()) for ln in listing.output.splitlines())
    assert "with intervals, from scored pairs." in words
    assert "intervals (bootstrap over items), from" not in words


def test_reference_compat_spelt_out_is_the_default(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    plain = runner.invoke(app, ["judge-audit", "metrics", str(path), "--json", "--bootstrap", "0"])
    spelt = runner.invoke(
        app,
        ["judge-audit", "metrics", str(path), "--json", "--bootstrap", "0", "--reference-compat"],
    )
    assert plain.exit_code == spelt.exit_code == 0, spelt.output
    assert plain.output == spelt.output
