"""The viewer reads run.db and leaderboard.json only: it never imports a pipeline, a runner or
the simulated world (so it can show a run whatever those modules become). It reads the method
registry, a table of names loaded with the package (``memearena.engine.registry``, which names
each method's part of the world in ``memearena.sim.parts`` without loading any), and each
method's own viewer pages (``methods/<name>/pages.py``), which read the run the same way."""

from __future__ import annotations

import subprocess
import sys


def test_viewer_imports_no_pipeline_runner_or_simulator() -> None:
    code = (
        "import sys, memearena.view, memearena.view.app, memearena.view.queries\n"
        "from memearena.engine.registry import method_names, method_pages\n"
        "pages = [method_pages(n) for n in method_names()]\n"
        "assert all(p is not None for p in pages), pages\n"
        "names = {'memearena.engine', 'memearena.engine.registry', 'memearena.methods',\n"
        "         'memearena.sim', 'memearena.sim.parts'}\n"
        "names |= {f'memearena.methods.{n}' for n in method_names()}\n"
        "names |= {f'memearena.methods.{n}.pages' for n in method_names()}\n"
        "bad = [m for m in sys.modules if m.startswith(('memearena.engine', "
        "'memearena.sim', 'memearena.methods')) and m not in names]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""
