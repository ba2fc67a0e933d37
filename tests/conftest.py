"""Suite-wide test settings, and the demo run directory the viewer and export tests read."""

import io
from pathlib import Path

import pytest
from hypothesis import settings

# Shared 2-core CI machines stall at times: property tests check behaviour, not speed.
settings.register_profile("memearena", deadline=None)
settings.load_profile("memearena")


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``memearena demo`` (Arena, Adapt, Judge audit on the bundled memes), once a session."""
    from rich.console import Console

    from memearena.demo import run_demo

    run = tmp_path_factory.mktemp("view-demo") / "demo"
    run_demo(run, console=Console(file=io.StringIO()), show_progress=False)
    return run
