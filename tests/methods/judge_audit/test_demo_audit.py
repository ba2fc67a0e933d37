"""The demo's audit: every injected bias is flagged on the judge that has it (its interval
excludes the clean judge's value) and the clean judge is flagged on none."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from memearena.demo import demo_config, run_demo_audit
from memearena.methods.judge_audit.sim import DEMO_AUDIT_REFERENCE
from memearena.methods.judge_audit.view import demo_check


def test_demo_audit_recovers_every_injected_bias(tmp_path: Path) -> None:
    console = Console(file=open(tmp_path / "out.txt", "w"), width=160)  # noqa: SIM115
    cfg = run_demo_audit(demo_config(bootstrap=300), tmp_path, console=console, show_progress=False)
    console.file.close()
    printed = (tmp_path / "out.txt").read_text()
    assert "every injected bias is flagged on its judge and the clean judge on none" in printed
    import json

    section = json.loads((tmp_path / "leaderboard.json").read_text())["judge_audit"]
    lines, ok = demo_check(section)
    assert ok, lines
    rows = {r["judge"]: r for r in section["leaderboard"]}
    assert rows[DEMO_AUDIT_REFERENCE]["flags"] == []
    injected = section["simulated"]["injected"]
    assert sum(len(v) for v in injected.values()) >= 8  # six failure modes, eight signatures
    for judge, expected in injected.items():
        for bias in expected:
            assert bias in rows[judge]["flags"]
            # Flagged relative to the clean judge: its interval excludes the clean judge's value.
            if bias in rows[judge]["types"]:
                mine = rows[judge]["types"][bias]
                clean = rows[DEMO_AUDIT_REFERENCE]["types"][bias]["value"]
                assert mine["ci_high"] < clean
    # A flagged judge carries the mark in its rank label.
    from memearena.methods.judge_audit.analysis import CLASSIC_FLAGS

    # Ordered by MM-JudgeBias's Overall (as the reference orders judges); the trust composite
    # beside it puts every judge with a flagged classic bias below the clean reference.
    assert section["order_by"] == "overall"
    overall = [r["overall"]["value"] for r in section["leaderboard"]]
    assert overall == sorted(overall, reverse=True)
    ref_trust = rows[DEMO_AUDIT_REFERENCE]["trust"]["value"]
    for r in section["leaderboard"]:
        if set(r["flags"]) & set(CLASSIC_FLAGS):
            assert r["trust"]["value"] < ref_trust, r["judge"]
        assert r["rank_label"].endswith("*") == bool(r["flags"])
        lo, hi = r["rank_ci"]
        assert 1 <= lo <= hi <= len(rows)
        assert set(r["trust"]["components"]) == {
            "bd_bc",
            "position",
            "verbosity",
            "self_enhancement",
        }
    # The construction as measured: the inserted text covers at most 10% of each image.
    tex = section["construction"]["texture_insertion"]
    assert tex["items"] == 24 and 0 < tex["covered_max"] <= 0.10
    # The Arena is then pointed at this audit.
    assert cfg.arena is not None and cfg.arena.judge_audit == tmp_path / "leaderboard.json"
