"""`memearena rank`: table, --json contract, --group-by, --anchor, one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from memearena.cli.rank import rank_command

app = typer.Typer()
app.command("rank")(rank_command)
app.command("noop", hidden=True)(lambda: None)  # keeps `rank` a named sub-command, as in cli.py
runner = CliRunner()

ROWS = [
    ("x", "y", "model_a", "relevance"),
    ("y", "x", "model_b", "relevance"),
    ("x", "y", "tie", "accuracy"),
    ("y", "z", "model_a", "accuracy"),
    ("z", "y", "tie (bothbad)", "relevance"),
    ("x", "z", "model_a", "accuracy"),
    ("z", "x", "model_a", "relevance"),
    ("y", "z", "model_b", "accuracy"),
    ("x", "y", "model_b", "accuracy"),
    ("z", "x", "model_b", "relevance"),
]


@pytest.fixture
def battles(tmp_path: Path) -> Path:
    path = tmp_path / "battles.jsonl"
    lines = [
        json.dumps({"model_a": a, "model_b": b, "winner": w, "criterion": c, "judge": "j1"})
        for a, b, w, c in ROWS
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def rank(*args: str) -> typer.testing.Result:
    return runner.invoke(app, ["rank", *args])


def test_default_output_is_a_table_with_the_anchor_note(battles: Path) -> None:
    result = rank(str(battles), "--bootstrap", "50")
    assert result.exit_code == 0, result.output
    for text in ("model", "UB", "95% CI", "Elo", "win %", "battles", "x", "y", "z"):
        assert text in result.stdout
    assert "mean of all models = 1000" in result.stdout


def test_json_follows_the_contract(battles: Path) -> None:
    result = rank(str(battles), "--json", "--bootstrap", "50", "--seed", "3")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert list(payload) == ["models"]
    rows = payload["models"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert all(
        list(r)
        == [
            "model",
            "rank",
            "rank_ub",
            "elo",
            "bt",
            "ci_low",
            "ci_high",
            "win_rate",
            "battles",
            "mle",
        ]
        for r in rows
    )
    for r in rows:  # Chatbot Arena's CI-based rank, next to the ordinal one
        above = sum(o["ci_low"] > r["ci_high"] for o in rows)
        assert r["rank_ub"] == 1 + above and r["rank_ub"] <= r["rank"] and r["mle"] is True
    assert sum(r["battles"] for r in rows) == 2 * len(ROWS)
    again = json.loads(rank(str(battles), "--json", "--bootstrap", "50", "--seed", "3").stdout)
    assert again == payload  # seeded


def test_group_by_gives_one_leaderboard_per_value(battles: Path) -> None:
    result = rank(str(battles), "--json", "--bootstrap", "20", "--group-by", "criterion")
    assert result.exit_code == 0, result.output
    groups = json.loads(result.stdout)["groups"]
    assert set(groups) == {"accuracy", "relevance"}
    assert all(set(g) == {"models"} for g in groups.values())
    table = rank(str(battles), "--bootstrap", "20", "--group-by", "criterion")
    assert "criterion = accuracy" in table.stdout


def test_anchor_puts_that_model_at_1000(battles: Path) -> None:
    result = rank(str(battles), "--json", "--bootstrap", "20", "--anchor", "y")
    rows = {r["model"]: r for r in json.loads(result.stdout)["models"]}
    assert rows["y"]["bt"] == 1000.0
    assert "y = 1000" in rank(str(battles), "--bootstrap", "20", "--anchor", "y").stdout


def test_malformed_file_exits_2_with_one_line(battles: Path) -> None:
    battles.write_text(battles.read_text() + '{"model_a": "x", "model_b": "y", "winner": "A"}\n')
    result = rank(str(battles), "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert f"{battles}:11: field 'winner'" in lines[0]


def test_skip_bad_reports_skipped_lines_and_keeps_json_clean(battles: Path) -> None:
    battles.write_text(battles.read_text() + "not json\n")
    result = rank(str(battles), "--json", "--skip-bad", "--bootstrap", "20")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["models"]
    assert f"{battles}:11" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl"], "no such file"),
        (["{f}", "--anchor", "nobody"], "anchor model 'nobody'"),
    ],
)
def test_user_errors_exit_2(battles: Path, args: list[str], message: str) -> None:
    result = rank(*[a.format(f=battles) for a in args])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_disconnected_battles_fall_back_to_the_weak_prior_and_say_so(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    rows = [("a", "b", "tie"), ("a", "b", "model_a"), ("c", "d", "tie"), ("d", "c", "model_a")]
    path.write_text(
        "\n".join(
            json.dumps(dict(zip(("model_a", "model_b", "winner"), r, strict=True))) for r in rows
        )
    )
    result = rank(str(path), "--json", "--bootstrap", "20")
    assert result.exit_code == 0, result.output
    assert "{a, b}; {c, d}" in result.stderr and "weak prior of 1" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert all(r["mle"] is False for r in json.loads(result.stdout)["models"])
    table = rank(str(path), "--bootstrap", "10")
    assert table.exit_code == 0 and "no finite MLE" in " ".join(table.stdout.split())
    explicit = json.loads(rank(str(path), "--prior", "1", "--bootstrap", "10", "--json").stdout)
    assert all(r["mle"] is False for r in explicit["models"])


def test_a_group_without_an_mle_is_flagged_and_the_others_are_not(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    lines = [
        {"model_a": a, "model_b": b, "winner": w, "lang": lang}
        for lang, a, b, w in [
            ("en", "x", "y", "model_a"),
            ("en", "y", "x", "model_a"),
            ("en", "x", "y", "tie"),
            ("de", "x", "y", "model_a"),  # y never wins in German: no finite MLE
            ("de", "x", "y", "model_a"),
        ]
    ]
    path.write_text("\n".join(json.dumps(r) for r in lines))
    result = rank(str(path), "--json", "--bootstrap", "20", "--group-by", "lang")
    assert result.exit_code == 0, result.output
    groups = json.loads(result.stdout)["groups"]
    assert all(r["mle"] for r in groups["en"]["models"])
    assert not any(r["mle"] for r in groups["de"]["models"])
    assert result.stderr.startswith("warning: lang='de': the Bradley–Terry MLE does not exist")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--group-by", "nosuchfield"], "--group-by 'nosuchfield': no battle has this field"),
        (["--bootstrap", "-5"], "--bootstrap must be between 0 and 100,000; got -5"),
        (["--bootstrap", "100001"], "--bootstrap must be between 0 and 100,000; got 100001"),
        (["--prior", "-1"], "--prior must be a finite number >= 0"),
        (["--prior", "nan"], "--prior must be a finite number >= 0"),
    ],
)
def test_bad_options_exit_2_with_one_line(battles: Path, args: list[str], message: str) -> None:
    result = rank(str(battles), *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {message}")


def test_model_names_are_shown_never_interpreted(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    names = ["[/bold]evil", "\x1b[31mred\x1b[0m"]
    rows = [(names[0], names[1], "model_a"), (names[1], names[0], "model_a")] * 3
    path.write_text(
        "\n".join(json.dumps({"model_a": a, "model_b": b, "winner": w}) for a, b, w in rows)
    )
    result = rank(str(path), "--bootstrap", "10")
    assert result.exit_code == 0, result.output
    assert "[/bold]evil" in result.stdout
    assert "\x1b" not in result.stdout and "red" in result.stdout


def test_bootstrap_bound_is_the_configs() -> None:
    from memearena.config import MAX_BOOTSTRAP as CONFIG_MAX
    from memearena.stats.bt import MAX_BOOTSTRAP

    assert MAX_BOOTSTRAP == CONFIG_MAX


def test_cluster_counts_from_the_table_match_those_from_battles(tmp_path: Path) -> None:
    from memearena.stats import clustered_counts, load_battles, read_battle_table
    from memearena.stats.rank_table import clustered_counts as table_clusters

    path = tmp_path / "b.jsonl"
    rng = np.random.default_rng(0)
    names = ["x", "y", "z", "w"]
    lines = []
    for _ in range(300):
        a, b = rng.choice(4, 2, replace=False)
        winner = ["model_a", "model_b", "tie", "tie (bothbad)"][rng.integers(4)]
        lines.append(
            {
                "model_a": names[a],
                "model_b": names[b],
                "winner": winner,
                "item": f"m{rng.integers(20)}",
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in lines))
    ours = table_clusters(read_battle_table(path, fields=["item"]), "item")
    theirs = clustered_counts(load_battles(path).battles, "item")
    assert ours.models == theirs.models
    np.testing.assert_array_equal(ours.total.wins, theirs.total.wins)
    np.testing.assert_array_equal(ours.total.ties, theirs.total.ties)
    weights = np.random.default_rng(1).multinomial(20, np.full(20, 0.05), size=5).astype(float)
    # Same clusters (the table codes them in order of first appearance, as the builder does).
    np.testing.assert_allclose(ours.tables(weights), theirs.tables(weights))
    result = rank(str(path), "--json", "--bootstrap", "50", "--cluster", "item")
    assert result.exit_code == 0 and json.loads(result.stdout)["bootstrap_unit"] == "cluster:item"
    missing = rank(str(path), "--json", "--cluster", "nope")
    assert missing.exit_code == 2 and "'nope'" in missing.stderr


DATA = Path(__file__).parent / "stats" / "data"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--bootstrap", "300", "--seed", "3"], "rank_small.json"),
        (["--bootstrap", "200", "--group-by", "judge"], "rank_small_by_judge.json"),
        (
            ["--bootstrap", "200", "--cluster", "item", "--anchor", "model-2"],
            "rank_small_cluster.json",
        ),
    ],
)
def test_json_output_is_byte_identical_to_the_recorded_one(args: list[str], expected: str) -> None:
    # Recorded before the reader, Elo and bootstrap were reworked for speed: every figure
    # (the same draws, the same float arithmetic) must come out the same, to the last digit.
    result = rank(str(DATA / "battles_small.jsonl"), "--json", *args)
    assert result.exit_code == 0, result.output
    assert result.stdout == (DATA / expected).read_text()


@pytest.mark.parametrize(("given", "kept"), [(None, "1"), ("3", "3")])
def test_rank_pins_openblas_to_one_thread_unless_told(given: str | None, kept: str) -> None:
    """``memearena rank`` imports numpy with OpenBLAS on one thread (its small batched solves
    gain nothing from more); a value the user set is left as it is."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    code = (
        "import importlib, os, sys; importlib.import_module('memearena.cli.main')._rank(); "
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [kept, "True"]
