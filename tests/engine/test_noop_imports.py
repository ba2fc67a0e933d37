"""A re-run that finds every step on record, as a command, imports only what it runs: no
statistics or numpy (its leaderboard is kept, its report is kept), no HTTP client (no call is
made), no other command's or method's command module; and it says that it kept the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

SRC = Path(__file__).resolve().parents[2] / "src"

PROBE = """
import runpy, sys, json
sys.argv = ["memearena", "arena", sys.argv[1], "--out", sys.argv[2], "--no-progress"]
try:
    runpy.run_module("memearena", run_name="__main__")
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _run(config: Path, out: Path) -> tuple[int, set[str], str]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(config), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.stderr.strip(), proc.stdout
    last = json.loads(proc.stderr.strip().splitlines()[-1])
    return int(last["code"] or 0), set(last["modules"]), proc.stdout


def test_a_noop_rerun_imports_no_statistics_client_or_other_command(tmp_path: Path) -> None:
    raw = {
        "run": "r",
        "models": {
            "t-a": {"provider": "sim", "skill": 0.9, "family": "a"},
            "t-b": {"provider": "sim", "skill": 0.4, "family": "b"},
            "j-one": {"provider": "sim", "skill": 0.85, "family": "one"},
            "j-two": {"provider": "sim", "skill": 0.8, "family": "two"},
        },
        "data": [{"format": "demo", "limit": 2}],
        "arena": {
            "targets": ["t-a", "t-b"],
            "judges": ["j-one", "j-two"],
            "context_model": "j-one",
            "fusion_rounds": 2,
        },
    }
    config = tmp_path / "arena.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    first, modules, out = _run(config, tmp_path / "runs")
    assert first == 0 and "numpy" in modules, out  # the fresh run analyses
    again, modules, out = _run(config, tmp_path / "runs")
    assert again == 0
    assert "report.html kept, not rendered again" in " ".join(out.split())
    loaded = {
        m
        for m in modules
        if m.split(".")[0] in ("numpy", "scipy", "aiohttp", "pandas")
        or m.startswith(("memearena.stats", "memearena.labels", "memearena.view"))
        or m in ("memearena.cli.rank", "memearena.cli.adapt", "memearena.cli.judge_audit")
        or m.startswith("memearena.methods.adapt")
    }
    assert loaded == set(), sorted(loaded)
