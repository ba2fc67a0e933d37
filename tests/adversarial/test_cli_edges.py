"""Config and CLI edges: each is a one-line error with exit 2 (no traceback), found before any
call; plus --version, ``python -m memearena`` and console tables that fit 80 columns."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from memearena.cli import app
from memearena.config import looks_like_key

runner = CliRunner()

BASE: dict[str, Any] = {
    "run": "edges",
    "models": {
        "t1": {"provider": "sim", "skill": 0.9},
        "t2": {"provider": "sim", "skill": 0.3},
        "j": {"provider": "sim", "skill": 0.8},
    },
    "data": [{"format": "demo", "limit": 2}],
    "arena": {
        "targets": ["t1", "t2"],
        "judges": ["j"],
        "context_model": "j",
        "fusion_rounds": 1,
        "bootstrap": 10,
    },
}


def _error_line(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ")
    return lines[0]


def _write(tmp_path: Path, cfg: dict[str, Any] | str | bytes, name: str = "cfg.yaml") -> Path:
    p = tmp_path / name
    if isinstance(cfg, bytes):
        p.write_bytes(cfg)
    else:
        p.write_text(cfg if isinstance(cfg, str) else yaml.safe_dump(cfg), encoding="utf-8")
    return p


def test_non_utf8_config(tmp_path: Path) -> None:
    p = _write(tmp_path, yaml.safe_dump(BASE).encode("utf-8") + b"# caf\xe9\n")
    line = _error_line(["arena", str(p), "--dry-run"])
    assert "not UTF-8" in line and str(p) in line


def test_a_bom_is_accepted(tmp_path: Path) -> None:
    p = _write(tmp_path, b"\xef\xbb\xbf" + yaml.safe_dump(BASE).encode("utf-8"))
    assert runner.invoke(app, ["arena", str(p), "--dry-run"]).exit_code == 0


@pytest.mark.parametrize(
    "url",
    ["http://[::1", "http://[::1]:notaport/v1", "http:///v1", "ftp://x", "http://a b/v1", ""],
)
def test_malformed_base_url(url: str, tmp_path: Path) -> None:
    cfg = copy.deepcopy(BASE)
    cfg["models"]["api"] = {"provider": "openai", "model": "m", "base_url": url}
    line = _error_line(["arena", str(_write(tmp_path, cfg)), "--dry-run"])
    assert "models.api.base_url" in line


def test_good_base_urls_are_accepted(tmp_path: Path) -> None:
    cfg = copy.deepcopy(BASE)
    cfg["models"]["api"] = {
        "provider": "openai",
        "model": "m",
        "base_url": ["http://[::1]:8000/v1", "https://gpu-1.example:443/v1", "http://localhost/v1"],
    }
    assert runner.invoke(app, ["arena", str(_write(tmp_path, cfg)), "--dry-run"]).exit_code == 0


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("run: a\nrun: b\n", ":2"),
        ("models:\n  t1: {provider: sim}\n  t1: {provider: sim, skill: 1}\n", ":3"),
        ("arena:\n  judges: [j]\n  judges: [k]\n", ":3"),
    ],
)
def test_yaml_duplicate_keys_are_errors_not_last_wins(
    text: str, where: str, tmp_path: Path
) -> None:
    p = _write(tmp_path, text)
    line = _error_line(["arena", str(p), "--dry-run"])
    assert "duplicate key" in line and f"{p}{where}" in line


@pytest.mark.parametrize(
    "run",
    ["../x", "/tmp/abs", "a/b", "..", ".", "a\\b", "C:evil", "", "x\x00y", "x" * 200],
)
def test_run_names_are_confined_to_out(run: str, tmp_path: Path) -> None:
    line = _error_line(["arena", str(_write(tmp_path, {**BASE, "run": run})), "--dry-run"])
    assert "run:" in line and "plain directory name" in line
    assert not (tmp_path / "x").exists()


# Shapes of keys of the major providers (made-up values in the real formats).
KEY_SHAPES = [
    "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH",  # OpenAI project key
    "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",  # OpenAI legacy
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789-ABCDEF",  # Anthropic
    "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",  # Google / Gemini
    "gsk_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL",  # Groq
    "xai-abcdefghijklmnopqrstuvwxyz0123456789",  # xAI
    "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",  # Hugging Face
    "r8_abcdefghijklmnopqrstuvwxyz0123456789",  # Replicate
    "pplx-abcdefghijklmnopqrstuvwxyz0123456789abcdef",  # Perplexity
    "nvapi-abcdefghijklmnopqrstuvwxyz0123456789",  # NVIDIA
    "sk-or-v1-0123456789abcdef0123456789abcdef",  # OpenRouter
    "AKIAIOSFODNN7EXAMPLE",  # AWS access key id
    "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6",  # Mistral-style 32 alphanumerics
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",  # Together-style hex
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",  # GitHub
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",  # a JWT
    "Bearer sk-abc",
]


@pytest.mark.parametrize("key", KEY_SHAPES)
def test_key_shaped_api_key_env_is_refused_and_never_echoed(key: str, tmp_path: Path) -> None:
    cfg = copy.deepcopy(BASE)
    cfg["models"]["api"] = {"provider": "openai", "model": "m", "api_key_env": key}
    line = _error_line(["arena", str(_write(tmp_path, cfg)), "--dry-run"])
    assert "models.api.api_key_env" in line and "NAME of an environment variable" in line
    assert key not in line and key[:12] not in line


@pytest.mark.parametrize(
    "name", ["OPENAI_API_KEY", "GEMINI_API_KEY", "ANTHROPIC_API_KEY", "MY_KEY_2", "TOGETHER_KEY"]
)
def test_ordinary_env_var_names_are_accepted(name: str) -> None:
    assert not looks_like_key(name)


def test_missing_human_guidelines_is_found_at_config_load(tmp_path: Path) -> None:
    cfg = copy.deepcopy(BASE)
    cfg["arena"].update(setting="human", human_guidelines="nope.jsonl")
    line = _error_line(["arena", str(_write(tmp_path, cfg)), "--out", str(tmp_path / "o")])
    assert "arena.human_guidelines" in line and "does not exist" in line
    assert not (tmp_path / "o").exists()  # nothing opened, nothing called


def test_malformed_human_guidelines_fail_before_any_call(tmp_path: Path) -> None:
    (tmp_path / "g.jsonl").write_text('{"meme": "m01", "guideline": "x"}\nnot json\n')
    cfg = copy.deepcopy(BASE)
    cfg["arena"].update(setting="human", human_guidelines="g.jsonl")
    line = _error_line(["arena", str(_write(tmp_path, cfg)), "--out", str(tmp_path / "o")])
    assert "g.jsonl:2" in line
    assert not (tmp_path / "o").exists()


def test_version_and_python_dash_m() -> None:
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"memearena {version('memearena')}"
    proc = subprocess.run(
        [sys.executable, "-m", "memearena", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == result.output.strip()


def test_console_tables_fit_80_columns_and_keep_long_judge_names(tmp_path: Path) -> None:
    long_judge = "provider-x/judge-model-with-a-rather-long-name-2025-06"
    cfg = copy.deepcopy(BASE)
    cfg["models"] = {
        "Qwen/Qwen2.5-VL-72B-Instruct-AWQ": {"provider": "sim", "skill": 0.9},
        "t2": {"provider": "sim", "skill": 0.3},
        long_judge: {"provider": "sim", "skill": 0.8},
        "j2": {"provider": "sim", "skill": 0.8},
    }
    cfg["arena"].update(
        targets=["Qwen/Qwen2.5-VL-72B-Instruct-AWQ", "t2"],
        judges=[long_judge, "j2"],
        context_model="j2",
        fusion_rounds=2,
    )
    result = runner.invoke(
        app, ["arena", str(_write(tmp_path, cfg)), "--out", str(tmp_path / "o"), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    rows = [ln for ln in lines if ln[:1] in "┏┃┡│└"]
    assert rows and all(ln[-1] in "┓┃┩│┘" for ln in rows)  # no table is cropped at the edge
    # A wrapped name is cut nowhere: its cells, read top to bottom, spell it whole.
    cells = "".join(
        m.group(1).strip() for ln in lines if (m := re.match(r"│(?: +\d*\s*│)? (\S[^│]*?)\s*│", ln))
    )
    assert long_judge in cells and "Qwen/Qwen2.5-VL-72B-Instruct-AWQ" in cells
    assert "…" not in "".join(ln for ln in lines if ln.startswith("│"))


@pytest.mark.parametrize("n_cols", [1, 4, 9, 20])
def test_wide_tables_split_rather_than_cut_names(n_cols: int) -> None:
    import io

    from rich.console import Console

    from memearena.report.console import fitted_tables

    names = ["a-judge-with-a-name-longer-than-the-cap-of-24", "j2", "m"]
    headers = [f"figure {i}" for i in range(n_cols)]
    cells = [[f"0.{i}0±0.01" for i in range(n_cols)] for _ in names]
    buf = io.StringIO()
    out = Console(file=buf, width=80, color_system=None)
    tables = fitted_tables("T", "judge", names, headers, cells, 80, caption="c")
    for t in tables:
        out.print(t)
    lines = buf.getvalue().splitlines()
    assert max(len(ln) for ln in lines) <= 80 and "…" not in buf.getvalue()
    assert sum(ln.count("figure") for ln in lines) == n_cols  # every column shown once
    first = [m.group(1).strip() for ln in lines if (m := re.match(r"│ ([^│]*)│", ln))]
    assert "".join(first).startswith(names[0])  # folded, never cut
    # Name column 24 + 4, each figure column 10 + 3: four figure columns fit in 80.
    assert len(tables) == -(-n_cols // 4)
