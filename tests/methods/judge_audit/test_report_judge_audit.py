"""The report's Judge audit section: escaped, images only when their bytes match their hash."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from PIL import Image

from memearena.methods.judge_audit.view import attach_thumbnails
from memearena.report.html import render_report


def _section(sha: str) -> dict[str, object]:
    fig = {"metric": "bd", "value": 0.5, "ci_low": 0.4, "ci_high": 0.6, "pairs": 3, "excluded": 1}
    return {
        "items": 3,
        "prompt": "plain",
        "leaderboard": [
            {
                "rank": 1,
                "judge": "<script>alert(1)</script>",
                "overall": fig,
                "categories": {"integrality": fig},
                "types": {"text_dominance": fig},
                "flags": ["<b>text_dominance</b>"],
            }
        ],
        "examples": {
            "texture_insertion": [
                {
                    "item": "demo:1",
                    "unbiased": {"query": "<img src=x onerror=alert(1)>", "image": sha},
                    "biased": {"query": "q", "image": "f" * 64, "response": "Rating: [[10]]"},
                    "scores": {"judge": {"unbiased": 7, "biased": 3}},
                }
            ]
        },
    }


def _store_image(run_dir: Path) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (40, 30), "green").save(buf, format="PNG")
    data = buf.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    d = run_dir / "judge_audit" / "images"
    d.mkdir(parents=True)
    (d / f"{sha}.png").write_bytes(data)
    return sha


def _images(run_dir: Path) -> Path:
    return run_dir / "judge_audit" / "images"


def test_section_is_escaped_and_embeds_verified_images(tmp_path: Path) -> None:
    sha = _store_image(tmp_path)
    section = attach_thumbnails(_section(sha), _images(tmp_path))
    html = render_report({"judge_audit": section})
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x" in html
    assert "<b>text_dominance</b>" not in html
    assert html.count('src="data:image/jpeg;base64,') == 1  # the missing one is not embedded
    assert "(not available)" in html
    assert "0.50 [0.40, 0.60]" in html


def test_a_tampered_image_is_not_embedded(tmp_path: Path) -> None:
    sha = _store_image(tmp_path)
    (tmp_path / "judge_audit" / "images" / f"{sha}.png").write_bytes(b"\x89PNG not the same")
    section = attach_thumbnails(_section(sha), _images(tmp_path))
    html = render_report({"judge_audit": section})
    assert "data:image/jpeg;base64," not in html


def test_only_plain_base64_jpeg_thumbnails_reach_the_page(tmp_path: Path) -> None:
    section = _section("a" * 64)
    ex = section["examples"]["texture_insertion"][0]  # type: ignore[index]
    ex["unbiased"]["thumb"] = 'data:image/jpeg;base64,AAAA" onerror="alert(1)'
    ex["biased"]["thumb"] = "data:text/html;base64,PHNjcmlwdD4="
    html = render_report({"judge_audit": section})
    assert 'onerror="alert' not in html and "data:text/html" not in html
    assert 'src="data:image/jpeg' not in html


def test_the_evaluator_leaderboard_shows_trust_its_shortfalls_and_the_rank_range() -> None:
    section = _section("0" * 64)
    row = section["leaderboard"][0]  # type: ignore[index]
    row["rank_label"] = "1*"
    row["rank_ci"] = [1, 2]
    row["trust"] = {
        "value": 0.81,
        "ci_low": 0.75,
        "ci_high": 0.86,
        "components": {"bd_bc": 0.2, "position": 0.3, "verbosity": 0.0, "self_enhancement": None},
    }
    html = render_report({"judge_audit": section})
    assert "<th>Trust</th>" in html
    assert "0.81 [0.75, 0.86]" in html
    assert "bd/bc 0.2" in html and "pos 0.3" in html and "self —" in html
    assert "1*" in html and "1–2" in html


def test_without_a_reference_judge_the_report_names_the_baseline_it_used() -> None:
    # Without reference_judge every judge is compared with the mean of the other judges.
    section = _section("0" * 64)
    section["reference_judge"] = None
    html = render_report({"judge_audit": section})
    assert "the panel&#39;s best" not in html and "the panel's best" not in html
    assert "reference judge: none (each judge against the mean of the others)" in html
