"""An exhaustive crawl of ``memearena view``: every page reachable from each run's overview.

The browser test (``tests/view/test_view_browser.py``) crawls a sample of each kind of page;
this follows every same-origin link, over HTTP against the viewer's aiohttp app in this process,
and counts per run directory what a page must never show:

- a page that does not answer 200;
- an image that is not served as an image (every ``<img src>`` is fetched once);
- a Python value in prose (``None``, ``False``, ``True``, ``nan``, a dict, list or tuple
  literal, an object repr) outside ``<pre>`` blocks (raw replies and JSON);
- a chain step without its image, or a rewrite's step without its answer.

With no directory it builds the demo (Arena, Adapt, Judge audit, the null world) and a
Judge-audit-only run of the bundled example, as the test does, and crawls the demo, its
null-world run and the audit run. Prints counts; exit status 1 when any is not 0.

    nice python bench/view_crawl.py [--run DIR ...] [--per-kind N] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import html
import io
import re
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

_REPR = re.compile(r"\b(None|False|True|nan)\b|\{'|\['|\('|<[a-z_]+ object at 0x")
_PRE = re.compile(r"<pre\b.*?</pre>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")
_HREF = re.compile(r'<a\b[^>]*\bhref="([^"]+)"', re.I)
_IMG = re.compile(r'<img\b[^>]*\bsrc="([^"]+)"', re.I)
_STEP = re.compile(r'<section class="step"[^>]*>(.*?)</section>', re.S)
_ANSWER = re.compile(r'<td class="answer">(.*?)</td>', re.S)
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def build_runs(root: Path) -> list[tuple[Path, str]]:
    """The demo and a Judge-audit-only run under ``root``: (directory to serve, start path)."""
    from importlib.resources import files

    from rich.console import Console

    from memearena.config import load_config
    from memearena.demo import run_demo
    from memearena.engine.lifecycle import run_method

    demo = root / "demo"
    run_demo(demo, console=Console(file=io.StringIO()), show_progress=False)
    cfg = load_config(Path(str(files("memearena") / "examples" / "judge-audit.yaml")))
    audit = root / "audit"
    run_method("judge_audit", cfg, audit, show_progress=False)
    return [(demo, "demo"), (demo, "adapt-null-world"), (audit, "audit")]


def kind(url: str) -> str:
    """A page's kind: its path with numbers as ``N``, and its query's parameter names."""
    p = urlparse(url)
    parts = p.path.split("/")
    parts[4:] = ["N" if x.isdigit() else x for x in parts[4:]]
    return "/".join(parts) + "?" + ",".join(sorted(parse_qs(p.query)))


def prose(page: str) -> str:
    """A page's text outside ``<pre>`` blocks, tags removed, entities decoded."""
    return html.unescape(_TAG.sub(" ", _PRE.sub(" ", page)))


def step_problems(page: str) -> list[str]:
    """Chain steps without their image, or a rewrite's step without its answer."""
    out = []
    for n, step in enumerate(_STEP.findall(page), start=1):
        has_rewrite = 'class="shown"' in step
        images = _IMG.findall(step)
        if "no image on record" in step or not images or (has_rewrite and len(images) < 2):
            out.append(f"step {n}: image")
        answer = prose(" ".join(_ANSWER.findall(step)))
        if has_rewrite and ("no answer on record" in answer or not answer.strip()):
            out.append(f"step {n}: answer")
    return out


async def crawl(client: Any, start: str, per_kind: int, concurrency: int) -> dict[str, Any]:
    """Every page reachable from ``start`` under the same run (``per_kind`` > 0: at most that
    many pages of a kind, in the order first linked)."""
    prefix = "/".join(start.split("/")[:3]) + "/"  # /r/N/
    seen: set[str] = {start}
    per: dict[str, int] = {}
    images: dict[str, bool] = {}
    found: dict[str, list[Any]] = {"status": [], "images": [], "reprs": [], "steps": []}
    queue = [start]
    sem = asyncio.Semaphore(concurrency)

    async def image_ok(src: str) -> bool:
        if src not in images:
            async with sem:
                resp = await client.get(src)
                body = await resp.read()
            images[src] = (
                resp.status == 200
                and bool(body)
                and (resp.headers.get("Content-Type", "").split(";")[0] in _IMAGE_TYPES)
            )
        return images[src]

    async def visit(url: str) -> list[str]:
        async with sem:
            resp = await client.get(url)
            text = await resp.text()
        if resp.status != 200:
            found["status"].append((url, resp.status))
            return []
        for src in dict.fromkeys(html.unescape(s) for s in _IMG.findall(text)):
            if not await image_ok(src):
                found["images"].append((url, src))
        words = prose(text)
        found["reprs"] += [
            (url, words[max(0, m.start() - 40) : m.end() + 40]) for m in _REPR.finditer(words)
        ]
        if "/adapt/chain/" in url:
            found["steps"] += [(url, p) for p in step_problems(text)]
        return [html.unescape(h).split("#")[0] for h in _HREF.findall(text)]

    while queue:
        batch, queue = queue, []
        for links in await asyncio.gather(*(visit(u) for u in batch)):
            for rel in links:
                if not rel.startswith(prefix) or rel in seen or "/reply" in rel:
                    continue
                if rel.endswith("/request"):
                    continue  # downloads, not pages
                k = kind(rel)
                if per_kind and per.get(k, 0) >= per_kind:
                    continue
                per[k] = per.get(k, 0) + 1
                seen.add(rel)
                queue.append(rel)
    found["pages"] = len(seen)
    found["kinds"] = len(per) + 1
    found["image_files"] = len(images)
    return found


async def crawl_runs(
    runs: Iterable[tuple[Path, str]], per_kind: int, concurrency: int
) -> list[tuple[str, dict[str, Any], float]]:
    from aiohttp.test_utils import TestClient, TestServer

    from memearena.view.app import make_app

    out = []
    for root, label in runs:
        async with TestClient(TestServer(make_app(root, warm=False))) as client:
            front = await (await client.get("/")).text()
            starts = dict(
                (name.strip(), f"/r/{n}/")
                for n, name in re.findall(r'href="/r/(\d+)/">([^<]+)</a>', front)
            )
            start = starts.get(label, "/r/0/")
            t0 = time.perf_counter()
            found = await crawl(client, start, per_kind, concurrency)
            out.append((f"{label} ({root})", found, time.perf_counter() - t0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, action="append", help="a run directory (repeatable)")
    ap.add_argument("--per-kind", type=int, default=0, help="pages per kind (0: every page)")
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="memearena-crawl-") as tmp:
        if args.run:
            runs = [(r, r.name) for r in args.run]
        else:
            t0 = time.perf_counter()
            runs = build_runs(Path(tmp))
            print(f"built the demo and an audit run in {time.perf_counter() - t0:.1f} s")
        results = asyncio.run(crawl_runs(runs, args.per_kind, args.concurrency))
    bad = 0
    print(
        f"{'run':<48} {'pages':>6} {'kinds':>5} {'images':>6} {'status':>6} "
        f"{'broken':>6} {'reprs':>5} {'steps':>5} {'s':>6}"
    )
    for label, f, secs in results:
        counts = [len(f[k]) for k in ("status", "images", "reprs", "steps")]
        bad += sum(counts)
        print(
            f"{label[:48]:<48} {f['pages']:>6} {f['kinds']:>5} {f['image_files']:>6} "
            f"{counts[0]:>6} {counts[1]:>6} {counts[2]:>5} {counts[3]:>5} {secs:>6.1f}"
        )
        for k in ("status", "images", "reprs", "steps"):
            for item in f[k][:5]:
                print(f"  {k}: {item}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
