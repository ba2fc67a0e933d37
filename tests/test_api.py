"""The notebook surface of the top-level package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import memearena


def test_top_level_api_runs_a_small_arena(tmp_path: Path) -> None:
    cfg = memearena.demo_config(bootstrap=10)
    cfg = cfg.model_copy(
        update={
            "data": [cfg.data[0].model_copy(update={"limit": 2})],
            "arena": cfg.arena.model_copy(  # type: ignore[union-attr]
                update={"targets": ["sim-aurora", "sim-ember"], "fusion_rounds": 4}
            ),
        }
    )
    assert memearena.plan_arena(cfg).calls > 0
    result = memearena.run_arena(cfg, tmp_path / "run", show_progress=False)
    assert result.new_calls > 0
    assert [r["model"] for r in result.leaderboard["arena"]["overall"]] == [
        "sim-aurora",
        "sim-ember",
    ]


def test_import_stays_light() -> None:
    code = (
        "import sys, memearena; print(any(m.startswith(('numpy', 'openai')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
