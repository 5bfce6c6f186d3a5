"""``privrank export``: a survey's data, items and ranking as CSV or Parquet files, from a live server."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.stats.preflib import read_preflib
from tests.helpers.cli import privrank
from tests.helpers.live import LiveServer

#: Every test here drives a live server and the CLI as processes: the first to run also
#: starts the server and fills its surveys (over 10 s on a busy machine).
pytestmark = pytest.mark.slow

KEY = "export-admin"
ADMIN = {"Authorization": f"Bearer {KEY}"}
DEBIAN = Path(__file__).resolve().parent / "data" / "preflib-debian" / "00002-00000006.soi"


def _export(*args, key: str | None = KEY, cwd=None):
    if key is None:
        return privrank("export", *args, unset=("PRIVRANK_API_KEY",), cwd=cwd)
    return privrank("export", *args, env={"PRIVRANK_API_KEY": key}, cwd=cwd)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("export")
    srv = LiveServer({"DATABASE_URL": f"sqlite:///{path}/export.db", "PRIVRANK_ADMIN_KEY": KEY})
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def surveys(server):
    import httpx2

    base = server.base
    privacy = {"respondent_budget": 12.0}  # every respondent answers the 6 pairs at ε = 2
    pairwise = httpx2.post(
        f"{base}/v1/surveys",
        json={"title": "Pairs", "items": ["A", "B", "C", "D"], "privacy": privacy},
        headers=ADMIN,
    ).json()
    rows = ["respondent,item_a,item_b,winner,epsilon"]
    rng = np.random.default_rng(5)
    labels = ["A", "B", "C", "D"]
    for r in range(40):
        for a in range(4):
            for b in range(a + 1, 4):
                rows.append(
                    f"r{r},{labels[a]},{labels[b]},{labels[a] if rng.random() < 0.7 else labels[b]},2.0"
                )
    r = httpx2.post(
        f"{base}/v1/surveys/{pairwise['id']}/comparisons/import?privatized=false",
        content="\n".join(rows) + "\n",
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    ballots = read_preflib(DEBIAN)
    ranking = httpx2.post(
        f"{base}/v1/surveys",
        json={
            "title": "Debian 2010",
            "kind": "ranking",
            "items": ballots.names,
            "privacy": {"epsilon_max": 4.0},
        },
        headers=ADMIN,
    ).json()
    body = "respondent,ranking,epsilon\n" + "".join(
        f"v{k},{'>'.join(ballots.names[x] for x in order)},4\n" for k, order in enumerate(ballots.expand())
    )
    r = httpx2.post(
        f"{base}/v1/surveys/{ranking['id']}/rankings/import?privatized=false",
        content=body,
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    central = httpx2.post(
        f"{base}/v1/surveys",
        json={
            "title": "Central",
            "items": ["x", "y", "z"],
            "privacy": {"model": "central", "total_budget": 10.0, "max_comparisons_per_respondent": 3},
        },
        headers=ADMIN,
    ).json()
    r = httpx2.post(
        f"{base}/v1/surveys/{central['id']}/releases",
        json={"method": "noisy_counts", "unit": "edge", "epsilon": 1.0},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    return {"pairwise": pairwise, "ranking": ranking, "central": central, "release": r.json()}


def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_csv_export_of_a_pairwise_survey(server, surveys, tmp_path):
    import httpx2

    sid = surveys["pairwise"]["id"]
    out = tmp_path / "pairs"
    p = _export(sid, "--server", server.base, "--out", str(out))
    assert p.returncode == 0, p.stderr
    names = sorted(x.name for x in out.iterdir())
    assert names == ["README.txt", "comparisons.csv", "items.csv", "ranking.csv"]
    assert p.stdout.split() == [
        str(out / n) for n in ("items.csv", "comparisons.csv", "ranking.csv", "README.txt")
    ]
    for name in ("comparisons.csv", "items.csv"):
        served = httpx2.get(f"{server.base}/v1/surveys/{sid}/{name}", headers=ADMIN).content
        assert (out / name).read_bytes() == served
    assert len(_csv(out / "comparisons.csv")) == 40 * 6
    ranking = httpx2.get(f"{server.base}/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    rows = _csv(out / "ranking.csv")
    assert list(rows[0]) == [
        "rank",
        "item",
        "label",
        "score",
        "se",
        "ci_lower",
        "ci_upper",
        "rank_ci_lower",
        "rank_ci_upper",
        "comparisons",
    ]
    assert [(int(r["rank"]), r["item"], r["label"], float(r["score"])) for r in rows] == [
        (it["rank"], it["item_id"], it["label"], it["score"]) for it in ranking["items"]
    ]
    assert [float(r["ci_lower"]) for r in rows] == [it["ci"][0] for it in ranking["items"]]
    readme = (out / "README.txt").read_text()
    assert 'pd.read_csv("comparisons.csv")' in readme and 'read.csv("ranking.csv"' in readme
    assert "winner (the privatized answer)" in readme and "debiased MLE" in readme


def test_csv_cells_a_spreadsheet_would_run_are_escaped_in_every_file(server, tmp_path):
    """Labels that begin like formulas are written with an apostrophe before them in
    ranking.csv as in the service's items.csv; README.txt says so and how to undo it."""
    import httpx2

    from app.core.csvcells import spreadsheet_text

    labels = ['=HYPERLINK("http://evil","x")', "@SUM(A1)", "-5 degrees", "Parks"]
    body = {"title": "cells", "items": labels, "privacy": {"respondent_budget": 12.0}}  # 6 pairs at ε = 2
    s = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()
    ids = [item["id"] for item in s["items"]]
    rows = ["respondent,item_a,item_b,winner,epsilon"]
    rows += [
        f"r{k},{ids[a]},{ids[b]},{ids[a]},2.0" for k in range(5) for a in range(4) for b in range(a + 1, 4)
    ]
    r = httpx2.post(
        f"{server.base}/v1/surveys/{s['id']}/comparisons/import?privatized=true",
        content="\n".join(rows) + "\n",
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    out = tmp_path / "cells"
    p = _export(s["id"], "--server", server.base, "--out", str(out))
    assert p.returncode == 0, p.stderr
    escaped = {spreadsheet_text(label) for label in labels}
    assert {row["label"] for row in _csv(out / "ranking.csv")} == escaped
    assert {row["label"] for row in _csv(out / "items.csv")} == escaped
    assert "'" + labels[0] in escaped and "Parks" in escaped
    assert "has an apostrophe put before it" in (out / "README.txt").read_text()


def test_parquet_export_of_a_ranking_survey(server, surveys, tmp_path):
    import httpx2

    sid = surveys["ranking"]["id"]
    out = tmp_path / "debian"
    p = _export(sid, "--server", server.base, "--out", str(out), "--format", "parquet")
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in out.iterdir()) == [
        "README.txt",
        "items.parquet",
        "ranking.parquet",
        "rankings.parquet",
    ]
    rankings = pq.read_table(out / "rankings.parquet")
    served = list(
        csv.DictReader(
            io.StringIO(httpx2.get(f"{server.base}/v1/surveys/{sid}/rankings.csv", headers=ADMIN).text)
        )
    )
    assert rankings.num_rows == len(served) == 436
    assert rankings.column("ranking").to_pylist() == [r["ranking"] for r in served]
    assert rankings.schema.field("epsilon").type == pa.float64()
    ranking = httpx2.get(f"{server.base}/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    table = pq.read_table(out / "ranking.parquet")
    assert table.schema.field("rank").type == pa.int64() and table.schema.field("score").type == pa.float64()
    assert table.schema.field("mean_position").type == pa.float64()
    assert table.column("item").to_pylist() == ranking["order"]
    assert table.column("mean_position").to_pylist() == [it["mean_position"] for it in ranking["items"]]
    assert table.column("rank_ci_lower").to_pylist() == [it["rank_ci"][0] for it in ranking["items"]]
    readme = (out / "README.txt").read_text()
    assert (
        'pd.read_parquet("rankings.parquet")' in readme and 'arrow::read_parquet("ranking.parquet")' in readme
    )
    assert "Borda consensus" in readme and "strsplit" in readme


def test_central_survey_exports_its_newest_release(server, surveys, tmp_path):
    sid = surveys["central"]["id"]
    out = tmp_path / "central"
    p = _export(sid, "--server", server.base, "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in out.iterdir()) == ["README.txt", "items.csv", "ranking.csv"]
    release = surveys["release"]
    rows = _csv(out / "ranking.csv")
    assert list(rows[0]) == ["rank", "item", "label", "noisy_wins"]
    assert [(r["item"], int(r["noisy_wins"])) for r in rows] == [
        (it["item_id"], it["noisy_wins"]) for it in release["result"]["items"]
    ]
    readme = (out / "README.txt").read_text()
    assert release["id"] in readme and "No data file" in readme


def test_refuses_to_overwrite_without_force(server, surveys, tmp_path):
    sid = surveys["pairwise"]["id"]
    out = tmp_path / "again"
    out.mkdir()
    (out / "ranking.csv").write_text("mine\n")
    p = _export(sid, "--server", server.base, "--out", str(out))
    assert p.returncode == 1 and "already holds ranking.csv" in p.stderr and "--force" in p.stderr
    assert sorted(x.name for x in out.iterdir()) == ["ranking.csv"]  # nothing fetched or written
    assert (out / "ranking.csv").read_text() == "mine\n"
    p = _export(sid, "--server", server.base, "--out", str(out), "--force")
    assert p.returncode == 0, p.stderr
    assert (out / "ranking.csv").read_text().startswith("rank,item,label,score")
    # The default directory is named after the survey, in the working directory.
    p = _export(sid, "--server", server.base, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / f"privrank-export-{sid}" / "comparisons.csv").exists()


def test_clear_errors(server, surveys, tmp_path, monkeypatch):
    sid = surveys["pairwise"]["id"]
    p = _export(sid, "--server", server.base, "--out", str(tmp_path / "a"), key=None)
    assert p.returncode == 2 and "PRIVRANK_API_KEY" in p.stderr
    p = _export("srv_nope", "--server", server.base, "--out", str(tmp_path / "b"))
    assert p.returncode == 1 and "answered 404" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = _export(sid, "--server", server.base, "--out", str(tmp_path / "c"), key="key_wrong.wrong")
    assert p.returncode == 1 and "answered 401" in p.stderr
    p = _export(sid, "--server", "http://127.0.0.1:9", "--out", str(tmp_path / "d"))
    assert p.returncode == 1 and "cannot reach" in p.stderr
    p = _export(sid, "--server", "ftp://x", "--out", str(tmp_path / "e"))
    assert p.returncode == 2 and "http://" in p.stderr
    for name in "abcde":
        assert not (tmp_path / name).exists()
    # Without pyarrow, --format parquet is refused before anything is fetched.
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` raises ImportError
    p = _export(sid, "--server", server.base, "--out", str(tmp_path / "f"), "--format", "parquet")
    assert p.returncode == 2 and "install privrank[parquet]" in p.stderr
    assert not (tmp_path / "f").exists()


class _Stub:
    """A stand-in service on a free local port: ``routes`` maps a path to (status, headers,
    body); every request's Authorization header is recorded."""

    def __init__(self, routes: dict[str, tuple[int, dict, bytes]]) -> None:
        import http.server
        import threading

        stub = self
        self.routes = routes
        self.seen: list[tuple[str, str | None]] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stub.seen.append((self.path, self.headers.get("Authorization")))
                status, headers, body = stub.routes.get(self.path, (404, {}, b'{"detail": "no"}'))
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_redirect_is_not_followed_with_the_key(tmp_path):
    """urllib follows a redirect with the request's headers: the key went to any host named."""
    from app.cli.exporter import ExportError, export_survey

    elsewhere = _Stub({})
    service = _Stub({"/v1/surveys/srv_x": (302, {"Location": f"{elsewhere.base}/steal"}, b"")})
    try:
        with pytest.raises(ExportError, match="redirected") as err:
            export_survey(service.base, KEY, "srv_x", tmp_path / "out")
        assert KEY not in str(err.value)
        assert elsewhere.seen == []  # never asked, so never given the key
    finally:
        service.stop()
        elsewhere.stop()


def test_an_export_failing_half_way_leaves_the_previous_one_whole(tmp_path):
    """A failure after some files were downloaded replaced none of a previous export's
    files (a mix of two exports) and leaves no file of its own."""
    from app.cli.exporter import ExportError, export_survey

    survey = {"id": "srv_x", "title": "t", "kind": "ranking", "privacy": {"model": "local"}}
    service = _Stub(
        {
            "/v1/surveys/srv_x": (200, {"Content-Type": "application/json"}, json.dumps(survey).encode()),
            "/v1/surveys/srv_x/items.csv": (200, {}, b"item,position,label\nitm_new,0,new\n"),
            "/v1/surveys/srv_x/rankings.csv": (500, {}, b'{"detail": "internal error"}'),
        }
    )
    out = tmp_path / "out"
    out.mkdir()
    old = {name: f"old {name}\n" for name in ("items.csv", "rankings.csv", "ranking.csv", "README.txt")}
    for name, text in old.items():
        (out / name).write_text(text)
    try:
        with pytest.raises(ExportError, match="answered 500"):
            export_survey(service.base, KEY, "srv_x", out, force=True)
        assert {p.name: p.read_text() for p in out.iterdir()} == old
        fresh = tmp_path / "fresh"
        with pytest.raises(ExportError, match="answered 500"):
            export_survey(service.base, KEY, "srv_x", fresh)
        assert list(fresh.iterdir()) == []
    finally:
        service.stop()


def test_an_answer_that_is_not_json_is_a_one_line_error(tmp_path):
    """A web page where the service's JSON was expected (another server at --server, a proxy's
    error page) ends the export with a one-line error, not a traceback."""
    from app.cli.exporter import ExportError, export_survey

    service = _Stub({"/v1/surveys/srv_x": (200, {"Content-Type": "text/html"}, b"<html>hello</html>")})
    try:
        with pytest.raises(ExportError, match="not JSON"):
            export_survey(service.base, KEY, "srv_x", tmp_path / "out")
        assert not (tmp_path / "out").exists()
    finally:
        service.stop()
