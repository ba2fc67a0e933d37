"""The demo's claims, measured: the hidden weakness is found, and in the null world the loop's
increase is a selection artefact that the unconditional control does not show."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from memearena.demo import DEMO_WEAKNESS, run_adapt_demo


def test_the_demo_finds_the_weakness_and_measures_the_selection_artefact(tmp_path: Path) -> None:
    console = Console(file=open(tmp_path / "out.txt", "w"), width=200)  # noqa: SIM115
    got = run_adapt_demo(tmp_path / "demo", console=console, show_progress=False)
    console.file.close()
    world, null = got["world"], got["null_world"]
    target, category, _ = DEMO_WEAKNESS
    rows = {
        c: next(r for r in rs if r["model"] == target) for c, rs in world["by_category"].items()
    }
    worst = max(rows, key=lambda c: rows[c]["failure_rate"])
    assert worst == category
    # Its interval lies above the target's failure rate in its other categories.
    assert rows[worst]["failure_rate_ci"][0] > rows[worst]["others_failure_rate"]
    # Null world: refinement makes nothing harder, yet the loop reports increases ...
    loop = [m["refined_increase"] for m in null["models"]]
    assert sum(loop) / len(loop) > 0.05
    assert sum(1 for m in null["models"] if m["refined_increase_ci"][0] > 0) >= 3
    # ... which the unconditional control, comparing each rewrite with its own original, lacks:
    # its mean increase is a fraction of the loop's, and (four 95% intervals, one world) at
    # most one model's interval misses 0 by chance.
    control = [m["control_increase"] for m in null["models"]]
    assert abs(sum(control) / len(control)) < 0.5 * sum(loop) / len(loop)
    covering = [
        m for m in null["models"] if m["control_increase_ci"][0] <= 0 <= m["control_increase_ci"][1]
    ]
    assert len(covering) >= len(null["models"]) - 1
    printed = (tmp_path / "out.txt").read_text()
    assert "hidden weakness: sim-borealis fails most in Disability" in printed
    assert "null world: conditional loop raises the failure rate" in printed


def test_every_weakness_row_is_told_apart_by_its_chain(tmp_path: Path) -> None:
    # Two chains from different seeds can reach the same rewrite (the same meme, misbelief
    # and step): their rows differ by the chain's seed, so no two rows read the same.
    console = Console(file=open(tmp_path / "out.txt", "w"), width=200)  # noqa: SIM115
    got = run_adapt_demo(tmp_path / "demo", console=console, show_progress=False)
    console.file.close()
    rows = got["world"]["weaknesses"]
    assert rows and all(w["chain_seed"] for w in rows)
    keys = [tuple(sorted(w.items())) for w in rows]
    assert len(set(keys)) == len(keys)
    # As the method walks them, a group's chains are disjoint (a hop never reaches a seed or a
    # meme an earlier chain of the same target, category, repeat and mode used): every meme
    # is rewritten in one chain of its group at most.
    chains = [
        json.loads(line)
        for line in (tmp_path / "demo" / "adapt_chains.jsonl").read_text().splitlines()
    ]
    owner: dict[tuple[str, str, int, str, str], str] = {}
    for c in chains:
        for s in c["steps"]:
            key = (c["target"], c["category"], c["repeat"], c["mode"], s["meme"])
            assert owner.setdefault(key, c["seed"]) == c["seed"], key
    assert len({k[:4] for k in owner}) > 10
