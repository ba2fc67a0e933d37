"""The audit's image work in worker threads gives the very run it gives on the event loop."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from memearena.config import parse_config
from memearena.engine.lifecycle import run_method
from memearena.methods.judge_audit import stages
from memearena.methods.judge_audit.perturb import image_variant


def _raw() -> dict[str, Any]:
    return {
        "run": "ja",
        "models": {
            "sim-aurora": {"provider": "sim", "skill": 0.9, "family": "aurora"},
            "clean": {"provider": "sim", "noise": 0.1},
            "blind": {"provider": "sim", "noise": 0.1, "ignores_image": 0.95},
        },
        "data": [{"format": "demo", "limit": 6}],
        "judge_audit": {
            "judges": ["clean", "blind"],
            "responders": ["sim-aurora"],
            "reference_judge": "clean",
            "describer": "sim-aurora",
            "bootstrap": 50,
        },
    }


def _untimed(v: Any) -> Any:
    if isinstance(v, dict):
        return {
            k: _untimed(x)
            for k, x in v.items()
            if not any(t in k for t in ("seconds", "latency", "date"))
        }
    if isinstance(v, list):
        return [_untimed(x) for x in v]
    return v


def _run(tmp: Path, workers: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    made: list[str] = []

    def counted(*args: Any) -> Any:
        made.append(threading.current_thread().name)
        return image_variant(*args)

    monkeypatch.setattr(stages, "image_workers", lambda: workers)
    monkeypatch.setattr(stages, "image_variant", counted)
    run_dir = tmp / f"w{workers}"
    run_method("judge_audit", parse_config(_raw()), run_dir, show_progress=False)
    with sqlite3.connect(run_dir / "run.db") as con:
        keys = {r[0] for r in con.execute("SELECT request_hash FROM calls")}
    scores = sorted((run_dir / "judge_audit_scores.jsonl").read_text().splitlines())
    return {
        "made": made,
        "keys": keys,
        "images": sorted(p.name for p in (run_dir / "images").iterdir()),
        "board": _untimed(json.loads((run_dir / "leaderboard.json").read_text())),
        "scores": scores,
    }


def test_image_workers_on_and_off_give_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    off = _run(tmp_path, 0, monkeypatch)
    on = _run(tmp_path, 2, monkeypatch)
    # Off: every variant is built on the loop by ``perturb``; on: in the worker threads.
    assert off["made"] == []
    assert on["made"] and all(n.startswith("judge-audit-image") for n in on["made"])
    assert on["keys"] and on["keys"] == off["keys"]
    assert on["images"] == off["images"]
    assert on["scores"] == off["scores"]
    assert on["board"] == off["board"]
