"""Writing the report loads each method's view (its report section), never another method's
stages or simulated part: a run of one method pays only for its own imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

PROBE = """
import json, sys
from pathlib import Path
from memearena.engine.lifecycle import write_run_report
from memearena.engine.registry import method_names
from memearena.report.html import RUN_PARTS, SECTIONS
write_run_report(Path(sys.argv[1]), {})
print(json.dumps({
    "sections": [s.key for s in SECTIONS],
    "parts": sorted(RUN_PARTS),
    "methods": method_names(),
    "loaded": sorted(m for m in sys.modules if m.startswith("memearena.methods.")),
}))
"""


def test_the_report_registers_every_section_from_the_views_alone(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert (tmp_path / "report.html").is_file()
    assert set(got["methods"]) <= set(got["sections"])  # every method's section registered
    assert "profile" in got["parts"]
    for name in got["methods"]:
        assert f"memearena.methods.{name}.view" in got["loaded"]
        assert f"memearena.methods.{name}.stages" not in got["loaded"]
        assert f"memearena.methods.{name}.sim" not in got["loaded"]
