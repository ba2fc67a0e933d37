"""The viewer reads run.db and leaderboard.json only: it never imports a pipeline, a runner or
the simulated world (so it can show a run whatever those modules become). It reads the method
registry, a table of names loaded with the package (``memearena.engine.registry``)."""

from __future__ import annotations

import subprocess
import sys


def test_viewer_imports_no_pipeline_runner_or_simulator() -> None:
    code = (
        "import sys, memearena.view, memearena.view.app, memearena.view.queries\n"
        "names = {'memearena.engine', 'memearena.engine.registry', 'memearena.methods'}\n"
        "bad = [m for m in sys.modules if m.startswith(('memearena.engine', "
        "'memearena.sim', 'memearena.methods')) and m not in names]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""
