"""Cluster bootstrap: per-cluster counts, resampled tables, clustered intervals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memearena.cli import app
from memearena.stats import (
    Battle,
    ClusteredCountsBuilder,
    ClusterIndex,
    StatsError,
    Verdict,
    bradley_terry,
    clustered_counts,
    leaderboard,
    prefer_first_rate,
)


def b(a: str, c: str, w: str, **extra: str) -> Battle:
    return Battle(model_a=a, model_b=c, winner=w, **extra)  # type: ignore[arg-type]


# Meme m1: x beats y twice, y and x tie once. Meme m2: y beats x once (shown as y vs x).
HAND = [
    b("x", "y", "model_a", item="m1"),
    b("y", "x", "model_b", item="m1"),
    b("x", "y", "tie", item="m1"),
    b("y", "x", "model_a", item="m2"),
]


def test_per_cluster_counts_of_a_hand_made_example() -> None:
    counts = clustered_counts(HAND, "item")
    assert counts.models == ("x", "y") and counts.n_clusters == 2
    total = counts.total
    assert total.wins[0, 1] == 2 and total.wins[1, 0] == 1 and total.ties[0, 1] == 1
    # cells of the total, in order: x won (2), y won (1), tie (1)
    _i, _j, outcome, cell = total.cells()
    assert list(outcome) == [0, 1, 2] and list(cell) == [2, 1, 1]
    # Round 1 draws m1 twice; round 2 draws m2 twice; round 3 draws each once.
    weights = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    assert counts.tables(weights).tolist() == [[4, 0, 2], [0, 2, 0], [2, 1, 1]]


def test_resampled_tables_are_whole_clusters() -> None:
    counts = clustered_counts(HAND, "item")
    draws = counts.resample(500, seed=1)
    # Every round is a multiset of two memes: (m1, m1), (m2, m2) or (m1, m2).
    possible = {(4.0, 0.0, 2.0), (0.0, 2.0, 0.0), (2.0, 1.0, 1.0)}
    seen = {tuple(row) for row in draws}
    assert seen == possible
    assert np.array_equal(draws, counts.resample(500, seed=1))


def test_a_battle_without_the_cluster_field_is_an_error_naming_it() -> None:
    with pytest.raises(StatsError, match=r"battle 2 .*'item'"):
        clustered_counts([b("x", "y", "model_a", item="m"), b("x", "y", "tie")], "item")


def test_a_shared_index_resamples_several_tables_jointly() -> None:
    index = ClusterIndex()
    one, two = ClusteredCountsBuilder(["x", "y"], index), ClusteredCountsBuilder(["x", "y"], index)
    one.add("x", "y", "model_a", "m1")
    two.add("y", "x", "model_a", "m2")
    one.add("x", "y", "model_b", "m2")
    t1, t2 = one.build(), two.build()
    assert t1.n_clusters == t2.n_clusters == 2
    w = np.array([[0.0, 2.0]])  # only m2, twice
    assert t1.tables(w).tolist() == [[0.0, 2.0]]  # cells: x won (m1), y won (m2)
    assert t2.tables(w).tolist() == [[2.0]]


def _correlated_battles(rng: np.random.Generator, memes: int = 40) -> list[Battle]:
    """Two equal models; each meme has its own strong effect shared by all its battles."""
    out = []
    for m in range(memes):
        p = 1 / (1 + np.exp(-rng.normal(0, 2.0)))
        for _ in range(30):
            out.append(b("x", "y", "model_a" if rng.random() < p else "model_b", item=f"m{m}"))
    return out


def test_cluster_intervals_are_wider_than_battle_intervals_when_memes_are_correlated() -> None:
    battles = _correlated_battles(np.random.default_rng(0))
    plain = bradley_terry(battles, bootstrap=400, seed=0)
    clustered = bradley_terry(clustered_counts(battles, "item"), bootstrap=400, seed=0)
    assert plain.rating("x") == pytest.approx(clustered.rating("x"))
    assert plain.ci_low is not None and clustered.ci_low is not None
    assert plain.ci_high is not None and clustered.ci_high is not None
    width_plain = plain.ci_high[0] - plain.ci_low[0]
    width_cluster = clustered.ci_high[0] - clustered.ci_low[0]
    assert width_cluster > 2 * width_plain


def test_leaderboard_clusters_by_a_battle_field() -> None:
    battles = _correlated_battles(np.random.default_rng(1))
    rows = leaderboard(battles, bootstrap=200, seed=0, cluster="item")
    plain = leaderboard(battles, bootstrap=200, seed=0)
    assert [r.bt for r in rows] == pytest.approx([r.bt for r in plain])
    assert rows[0].ci_high - rows[0].ci_low > plain[0].ci_high - plain[0].ci_low


def test_verdict_rates_resample_clusters() -> None:
    # Meme m0..m9: a judge picks the first answer in every verdict of even memes, never in odd.
    verdicts = [
        Verdict("j", f"m{m}|{k}", "x", "y", "model_a" if m % 2 == 0 else "model_b", cluster=m)
        for m in range(10)
        for k in range(50)
    ]
    by_verdict = [
        Verdict(v.judge, v.item, v.model_a, v.model_b, v.winner, criterion=v.criterion)
        for v in verdicts
    ]
    clustered = prefer_first_rate(verdicts, n_boot=500)["j"]
    single = prefer_first_rate(by_verdict, n_boot=500)["j"]
    assert clustered.value == single.value == 0.5
    # 10 memes, half of each kind: the cluster interval is about ±0.3, the verdict one ±0.04.
    assert clustered.ci_high - clustered.ci_low > 0.4
    assert single.ci_high - single.ci_low < 0.1


def test_rank_cli_clusters_by_a_field_and_records_the_unit(tmp_path: Path) -> None:
    path = tmp_path / "battles.jsonl"
    battles = _correlated_battles(np.random.default_rng(2))
    path.write_text("".join(x.model_dump_json() + "\n" for x in battles))
    runner = CliRunner()
    args = ["rank", str(path), "--json", "--bootstrap", "200"]
    plain = json.loads(runner.invoke(app, args).stdout)
    clustered = json.loads(runner.invoke(app, [*args, "--cluster", "item"]).stdout)
    assert "bootstrap_unit" not in plain and clustered["bootstrap_unit"] == "cluster:item"
    width = [d["models"][0]["ci_high"] - d["models"][0]["ci_low"] for d in (plain, clustered)]
    assert width[1] > 2 * width[0]
    missing = runner.invoke(app, [*args, "--cluster", "conversation"])
    assert missing.exit_code == 2 and "'conversation'" in missing.stderr


def test_the_builder_counts_exactly_across_buffer_flushes_and_merges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Battles pass through a small buffer (many flushes and chunk merges): the per-cluster
    counts equal a plain tally of the battles, each cell once."""
    monkeypatch.setattr(ClusteredCountsBuilder, "_BUFFER", 7)
    rng = np.random.default_rng(3)
    models = ["p", "q", "r", "s"]
    builder = ClusteredCountsBuilder(models)
    tally: dict[tuple[str, int, int, int], float] = {}
    for _ in range(2000):
        a, c = rng.choice(4, size=2, replace=False)
        w = str(rng.choice(["model_a", "model_b", "tie", "tie (bothbad)"]))
        meme = f"m{rng.integers(25)}"
        builder.add(models[a], models[c], w, meme)
        kind = {"model_a": 0, "model_b": 1}.get(w, 2)
        if a > c:
            a, c, kind = c, a, {0: 1, 1: 0, 2: 2}[kind]
        key = (meme, int(a), int(c), kind)
        tally[key] = tally.get(key, 0.0) + 1.0
    built = builder.build()
    names = builder.index.keys()
    got = {
        (names[k], i, j, o): n
        for k, i, j, o, n in zip(
            built.cluster, built.i, built.j, built.outcome, built.count, strict=True
        )
    }
    assert got == tally
    assert len(built.count) == len(tally)  # one entry per cell: the chunks were merged
    builder.add("p", "q", "model_a", "m0")  # building does not end the stream
    assert builder.build().total.total == built.total.total + 1
