"""bench/instructions.py without valgrind: its reading of callgrind's output, its windows, its
arguments and its one-line refusals. (The counting itself needs valgrind and is a bench.)"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
spec = importlib.util.spec_from_file_location("bench_instructions", BENCH / "instructions.py")
assert spec is not None and spec.loader is not None
instructions = importlib.util.module_from_spec(spec)
sys.modules["bench_instructions"] = instructions
spec.loader.exec_module(instructions)


def dump(path: Path, trigger: str, totals: str, events: str = "Ir") -> Path:
    """A callgrind output file as callgrind 3.19 writes one (header, one function, totals)."""
    path.write_text(
        "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 4242\n"
        "cmd:  python bench/instructions.py\npart: 1\n\n\n"
        "desc: I1 cache: \ndesc: D1 cache: \ndesc: LL cache: \n\n"
        "desc: Timerange: Basic block 0 - 100408798\n"
        f"desc: Trigger: {trigger}\n\npositions: line\nevents: {events}\n"
        f"summary: {totals}\n\n\nob=(1) python\nfl=(1) ceval.c\nfn=(1) eval\n0 7\n\n"
        f"totals: {totals}\n"
    )
    return path


def test_a_dump_gives_its_trigger_and_its_instructions(tmp_path: Path) -> None:
    path = dump(tmp_path / "callgrind.out.1", "dump pipeline", "491281105")
    assert instructions.read_dump(path) == ("dump pipeline", 491281105)


def test_instructions_are_the_ir_column_whatever_else_was_counted(tmp_path: Path) -> None:
    path = dump(tmp_path / "callgrind.out.1", "dump replay", "300 5000 17", events="Dr Ir Dw")
    assert instructions.read_dump(path) == ("dump replay", 5000)


def test_a_file_without_instruction_totals_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "callgrind.out.1"
    path.write_text("desc: Trigger: dump pipeline\nevents: Dr\ntotals: 12\n")
    with pytest.raises(ValueError, match="Ir totals"):
        instructions.read_dump(path)


def test_windows_are_read_by_their_dump_name_not_by_file_order(tmp_path: Path) -> None:
    dump(tmp_path / "callgrind.out.1", "dump replay", "2116000000")
    dump(tmp_path / "callgrind.out.2", "dump pipeline", "4897000000")
    # The dump at exit (instrumentation off since the last window): not a window.
    dump(tmp_path / "callgrind.out.3", "Program termination", "18446744072725297859")
    dump(tmp_path / "callgrind.out", "Program termination", "0")
    counts = instructions.window_counts(tmp_path)
    assert counts == {"pipeline": 4897000000, "replay": 2116000000}


@pytest.mark.parametrize(
    "windows", [["pipeline"], ["pipeline", "replay", "replay"], ["pipeline", "replay", "other"]]
)
def test_each_window_must_be_dumped_exactly_once(tmp_path: Path, windows: list[str]) -> None:
    for i, name in enumerate(windows, 1):
        dump(tmp_path / f"callgrind.out.{i}", f"dump {name}", "1000")
    with pytest.raises(RuntimeError, match="expected one each of pipeline, replay"):
        instructions.window_counts(tmp_path)


def test_a_window_zeroes_and_instruments_then_dumps_and_stops() -> None:
    sent: list[list[str]] = []
    windows = instructions.Windows(lambda commands: sent.append(list(commands)))
    windows.start("pipeline")
    assert windows.current == "pipeline"
    windows.stop("pipeline")
    windows.start("replay")
    windows.stop("replay")
    assert sent == [
        ["zero", "instrumentation on"],
        ["dump pipeline", "instrumentation off"],
        ["zero", "instrumentation on"],
        ["dump replay", "instrumentation off"],
    ]
    assert windows.done == ["pipeline", "replay"]


def test_windows_never_nest_or_repeat() -> None:
    windows = instructions.Windows(lambda commands: None)
    windows.start("pipeline")
    with pytest.raises(RuntimeError, match="inside 'pipeline'"):
        windows.start("replay")
    with pytest.raises(RuntimeError, match="closed while 'pipeline' is open"):
        windows.stop("replay")
    windows.stop("pipeline")
    with pytest.raises(RuntimeError, match="opened twice"):
        windows.start("pipeline")


@pytest.mark.parametrize("method", ["adapt", "judge_audit"])
def test_the_percall_child_opens_the_pipeline_window_then_the_replay_window(method: str) -> None:
    """The real percall child over two memes, with a sender that records instead of vgdb: each
    window once, the pipeline's first, and the measured checkout's memearena imported."""
    src = Path(__file__).resolve().parents[1] / "src"
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(BENCH)!r})\n"
        "import instructions as ins\n"
        "sent = []\n"
        "w = ins.Windows(lambda c: sent.append(list(c)))\n"
        f"r = ins.child({method!r}, 2, 0, w)\n"
        "print(json.dumps({'sent': sent, 'result': r}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert [c[0] for c in got["sent"]] == ["zero", "dump pipeline", "zero", "dump replay"]
    assert got["result"]["calls"] > 0
    assert Path(got["result"]["memearena"]).is_relative_to(src)


def test_without_valgrind_it_exits_naming_the_missing_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit, match="valgrind and vgdb not found on PATH") as exc:
        instructions.main(["adapt"])
    assert exc.value.code != 0


def test_a_baseline_without_a_memearena_source_tree_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="has no src/memearena"):
        instructions.checkout_src(tmp_path)


@pytest.mark.parametrize("argv", [["arena"], ["adapt", "--memes", "0"], ["adapt", "--seed", "x"]])
def test_bad_arguments_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        instructions.parse(argv)
    assert exc.value.code == 2


def test_the_report_gives_both_checkouts_and_the_change_in_percent() -> None:
    new = instructions.Counts(Path("/new"), 1000, 3_000_000_000, 2_000_000_000, 100.0)
    base = instructions.Counts(Path("/base"), 1000, 4_000_000_000, 2_000_000_000, 100.0)
    rows = instructions.report(new, base)
    text = "\n".join(rows)
    assert "pipeline     3,000M instr (3,000.0k/call)" in text
    assert "ratio 1.500x (target <= 1.5x)" in text
    assert "ratio 2.000x" in text
    assert rows[-1] == "  change: pipeline -25.00%, replay +0.00%, ratio -25.00%"
