"""Labelling in the viewer over HTTP (the browser test drives a real browser): a write comes
only from this server's loopback origin with the session's token, or writes nothing; an item is
blind until the person answers it; labels go to labels.sqlite only, two annotators' at once,
and a label of an item gone from the run is kept and reported."""

from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from markupsafe import escape
from typer.testing import CliRunner

from memearena.labels import LabelStore, queue_items
from memearena.view import make_app

from .conftest import BEACON, HOSTILE_MODEL, PAYLOADS, make_hostile

_CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')
_ITEM = re.compile(r'name="item" value="([^"]+)"')


@pytest.fixture(scope="module")
def run(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the demo run (labels are written into it)."""
    dst = tmp_path_factory.mktemp("label-http") / "demo"
    shutil.copytree(
        demo_run,
        dst,
        ignore=shutil.ignore_patterns("run.lock", "cache.sqlite", "adapt-null-world"),
    )
    return dst


def _serve(root: Path, fn: Callable[..., Awaitable[Any]], clients: int = 1, **app: Any) -> Any:
    async def go() -> Any:
        server = TestServer(make_app(root, warm=False, **{"label": True, **app}))
        await server.start_server()
        opened = [TestClient(server) for _ in range(clients)]
        for c in opened:
            await c.start_server()
        try:
            return await fn(*opened)
        finally:
            for c in opened:
                await c.close()
            await server.close()

    return asyncio.run(go())


def _origin(client: TestClient) -> str:
    return str(client.make_url("/")).rstrip("/")


async def _token(client: TestClient) -> str:
    resp = await client.get("/r/0/label")
    assert resp.status == 200
    found = _CSRF.search(await resp.text())
    assert found is not None
    return found.group(1)


async def _sign_in(client: TestClient, name: str) -> str:
    token = await _token(client)
    resp = await client.post(
        "/r/0/label/annotator",
        data={"csrf": token, "name": name},
        headers={"Origin": _origin(client)},
        allow_redirects=False,
    )
    assert resp.status == 303, await resp.text()
    return token


def _rows(run: Path) -> list[Any]:
    with LabelStore(run, create=False) as store:
        return store.all_labels()


def test_a_cross_site_or_tokenless_post_is_refused_and_writes_nothing(run: Path) -> None:
    item = queue_items(run, "battles")[0].key
    answer = {"item": item, "f.overall": "A"}

    async def fn(client: TestClient) -> list[tuple[str, int, str]]:
        token = await _sign_in(client, "cross-site")
        own = _origin(client)
        port = client.make_url("/").port
        attempts: list[tuple[str, dict[str, str], dict[str, str]]] = [
            ("another site, no token", {"Origin": "http://evil.example"}, {}),
            ("another site, the token", {"Origin": "http://evil.example"}, {"csrf": token}),
            ("another port", {"Origin": f"http://127.0.0.1:{port + 1}"}, {"csrf": token}),
            ("a null origin", {"Origin": "null"}, {"csrf": token}),
            ("no origin at all", {}, {"csrf": token}),
            ("a referer elsewhere", {"Referer": "http://evil.example/x"}, {"csrf": token}),
            ("own origin, no token", {"Origin": own}, {}),
            ("own origin, a wrong token", {"Origin": own}, {"csrf": "0" * 64}),
        ]
        out = []
        for what, headers, extra in attempts:
            resp = await client.post(
                "/r/0/label/battles",
                data={**answer, **extra},
                headers=headers,
                allow_redirects=False,
            )
            out.append((what, resp.status, await resp.text()))
        # Positive control: the same write, from this origin with the token, is taken.
        ok = await client.post(
            "/r/0/label/battles",
            data={**answer, "csrf": token},
            headers={"Origin": own},
            allow_redirects=False,
        )
        out.append(("control", ok.status, ""))
        return out

    before = _rows(run)
    got = _serve(run, fn)
    refused, control = got[:-1], got[-1]
    for what, status, text in refused:
        assert status == 403, what
        assert text.startswith("label refused: ") and "\n" not in text.strip(), what
    assert control[1] == 303
    after = _rows(run)
    new = [lb for lb in after if lb.id not in {b.id for b in before}]
    assert [(lb.annotator, lb.item_key, lb.answer) for lb in new] == [
        ("cross-site", item, {"overall": "A"})
    ]


def test_view_label_serves_the_labelling_pages(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import memearena.view
    from memearena.cli import app

    served: list[dict[str, Any]] = []
    monkeypatch.setattr(memearena.view, "serve", lambda root, **kw: served.append(kw))
    for args, label in ((["--label"], True), ([], False)):
        out = CliRunner().invoke(app, ["view", str(run), "--port", "8799", *args])
        assert out.exit_code == 0, out.output
        assert served.pop()["label"] is label


def test_a_write_through_another_host_name_is_refused_and_writes_nothing(run: Path) -> None:
    item = queue_items(run, "battles")[0].key

    async def fn(client: TestClient) -> list[tuple[int, str]]:
        token = await _sign_in(client, "host-names")
        port = client.make_url("/").port
        out = []
        for host in ("evil.example", "lab.example"):  # not answered at all; answered, not loopback
            resp = await client.post(
                "/r/0/label/battles",
                data={"csrf": token, "item": item, "f.overall": "B"},
                headers={"Host": f"{host}:{port}", "Origin": f"http://{host}:{port}"},
                allow_redirects=False,
            )
            out.append((resp.status, await resp.text()))
        return out

    before = len(_rows(run))
    (foreign, named) = _serve(run, fn, allowed_hosts=("lab.example",))
    assert foreign == (421, "misdirected request")
    assert named[0] == 403 and "loopback" in named[1]
    assert len(_rows(run)) == before


def test_without_label_the_viewer_has_no_labelling_page_and_refuses_writes(run: Path) -> None:
    async def fn(client: TestClient) -> tuple[int, int, int]:
        page = await client.get("/r/0/label")
        script = await client.get("/static/label.js")
        post = await client.post(
            "/r/0/label/battles", data={"f.overall": "A"}, headers={"Origin": _origin(client)}
        )
        return page.status, script.status, post.status

    assert _serve(run, fn, label=False) == (404, 404, 405)


def test_an_item_is_blind_until_this_annotator_answers_it(run: Path) -> None:
    items = {it.key: it for it in queue_items(run, "battles")}

    async def fn(client: TestClient) -> tuple[str, str, str, str, str]:
        token = await _sign_in(client, "blind")
        first = await client.get("/r/0/label/battles")
        shown = await first.text()
        key = _ITEM.search(shown)
        assert key is not None
        # Asking for the reveal of an unanswered item reveals nothing.
        peek = await (await client.get(f"/r/0/label/battles?answered={key.group(1)}")).text()
        resp = await client.post(
            "/r/0/label/battles",
            data={"csrf": token, "item": key.group(1), "f.overall": "tie"},
            headers={"Origin": _origin(client)},
        )
        after = await resp.text()
        return key.group(1), shown, peek, after, first.headers["Content-Security-Policy"]

    key, shown, peek, after, csp = _serve(run, fn)
    item = items[key]
    names = {item.hidden["A"], item.hidden["B"], *item.hidden["judges"]}
    assert len(names) >= 3
    for name in names:
        assert name not in shown and name not in peek, name
    assert 'id="answered"' not in peek
    assert 'href="/r/0/battles"' not in shown  # no way to the verdicts but answering
    assert 'id="answered"' in after
    for name in names:
        assert name in after, name  # revealed once answered
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp


def test_a_label_of_an_item_gone_from_the_run_is_kept_and_reported(run: Path) -> None:
    async def fn(client: TestClient) -> tuple[int, str, str]:
        token = await _sign_in(client, "gone")
        resp = await client.post(
            "/r/0/label/rewrites",
            data={"csrf": token, "item": "no-longer-in-the-run", "f.still_harmful": "no"},
            headers={"Origin": _origin(client)},
        )
        home = await (await client.get("/r/0/label")).text()
        return resp.status, await resp.text(), home

    status, page, home = _serve(run, fn)
    assert status == 200 and 'id="gone"' in page
    assert re.search(r'id="gone-rewrites">[^<]*1 labelled item \(1 by you\) no longer', home)
    kept = [lb for lb in _rows(run) if lb.item_key == "no-longer-in-the-run"]
    assert [(lb.annotator, lb.answer) for lb in kept] == [("gone", {"still_harmful": "no"})]


def test_bad_answers_and_names_are_refused_in_one_line_and_write_nothing(run: Path) -> None:
    item = queue_items(run, "guidelines")[0].key

    async def fn(client: TestClient) -> list[tuple[int, str]]:
        token = await _sign_in(client, "careful")
        own = {"Origin": _origin(client)}
        out = []
        for data in (
            {"item": item, "f.soundness": "7"},
            {"item": item, "f.no_such_axis": "1"},
            {"item": item},
        ):
            resp = await client.post(
                "/r/0/label/guidelines", data={**data, "csrf": token}, headers=own
            )
            out.append((resp.status, await resp.text()))
        resp = await client.post(
            "/r/0/label/annotator", data={"csrf": token, "name": "a\x1bb"}, headers=own
        )
        out.append((resp.status, await resp.text()))
        return out

    before = len(_rows(run))
    got = _serve(run, fn)
    assert [s for s, _ in got] == [400, 400, 400, 400]
    for _, page in got[:3]:
        found = re.search(r'id="label-error">Label not recorded: ([^<]*)<', page)
        assert found is not None and found.group(1).strip()
    assert "control" in got[3][1]
    assert len(_rows(run)) == before


def test_two_annotators_write_at_once_and_both_sets_are_kept(run: Path) -> None:
    keys = [it.key for it in queue_items(run, "perturbations")]
    db = run / "run.db"
    digest = hashlib.sha256(db.read_bytes()).hexdigest()

    async def label_all(client: TestClient, name: str) -> None:
        token = await _sign_in(client, name)
        for key in keys:
            resp = await client.post(
                "/r/0/label/perturbations",
                data={"csrf": token, "item": key, "f.keeps": "yes"},
                headers={"Origin": _origin(client)},
                allow_redirects=False,
            )
            assert resp.status == 303

    async def fn(a: TestClient, b: TestClient) -> None:
        await asyncio.gather(label_all(a, "left"), label_all(b, "right"))

    _serve(run, fn, clients=2)
    rows = [lb for lb in _rows(run) if lb.queue == "perturbations"]
    for name in ("left", "right"):
        assert sorted(lb.item_key for lb in rows if lb.annotator == name) == sorted(keys)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_hostile_answers_and_model_names_reach_the_labelling_pages_escaped(
    demo_run: Path, tmp_path: Path
) -> None:
    hostile = make_hostile(demo_run, tmp_path / "hostile", "http://127.0.0.1:9")
    items = queue_items(hostile, "battles")
    at = next(
        i for i, it in enumerate(items) if "<script>" in it.texts["answer_a"] + it.texts["answer_b"]
    )
    raw = [p.replace(BEACON, "http://127.0.0.1:9") for p in PAYLOADS]
    model = HOSTILE_MODEL.replace(BEACON, "http://127.0.0.1:9")

    async def fn(client: TestClient) -> tuple[str, str]:
        token = await _sign_in(client, "hostile")
        after = {"after": items[at - 1].key} if at else {}
        shown = await client.get("/r/0/label/battles", params=after)
        page = await shown.text()
        resp = await client.post(
            "/r/0/label/battles",
            data={"csrf": token, "item": items[at].key, "f.overall": "A"},
            headers={"Origin": _origin(client)},
        )
        return page, await resp.text()

    page, revealed = _serve(hostile, fn)
    assert f'data-key="{items[at].key}"' in page
    for text in (page, revealed):
        for payload in [*raw, model]:
            assert payload not in text
    assert str(escape(raw[0])) in page
    assert str(escape(model)) in revealed  # the hidden name, shown once answered


def test_reading_the_labelling_pages_of_a_folder_of_runs_writes_nothing(demo_run: Path) -> None:
    # The shared demo (a folder: the demo and its null-world Adapt run) is only read here.
    first = queue_items(demo_run, "perturbations", order="information")[0].key
    db = demo_run / "run.db"
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    had_labels = (demo_run / "labels.sqlite").exists()

    async def fn(client: TestClient) -> tuple[str, str, str]:
        runs = await (await client.get("/label")).text()
        await _sign_in(client, "reader")
        queue = await client.get("/r/0/label/perturbations", params={"order": "information"})
        agreement = await client.get("/r/0/label/agreement")
        assert queue.status == agreement.status == 200
        return runs, await queue.text(), await agreement.text()

    runs, queue, agreement = _serve(demo_run, fn)
    assert re.findall(r'href="/r/(\d+)/label"', runs) == ["0", "1"]
    assert f'data-key="{first}"' in queue
    assert 'name="order" value="information"' in queue
    assert 'id="label-summary"' in agreement
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert (demo_run / "labels.sqlite").exists() == had_labels
