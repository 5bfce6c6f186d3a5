"""``privrank site contribute`` end to end: three sites, three file formats, a live server."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from app.stats.federated import FederatedScheme
from tests.helpers.cli import privrank
from tests.helpers.live import LiveServer

ADMIN = {"Authorization": "Bearer cli-admin"}
LABELS = ["Housing", "Transit", "Parks", "Schools"]

# Local rankings (labels best first). North's PrefLib ballots list 3 of 4 items, which fixes the 4th.
NORTH = """# FILE NAME: north.soi
# DATA TYPE: soi
# NUMBER ALTERNATIVES: 4
# ALTERNATIVE NAME 1: Housing
# ALTERNATIVE NAME 2: Transit
# ALTERNATIVE NAME 3: Parks
# ALTERNATIVE NAME 4: Schools
5: 2,4,1
2: 2,1,4
1: 4,2,1
"""
SOUTH = "ranking,count\nTransit > Schools > Housing > Parks,4\nSchools > Transit > Housing > Parks,1\n"
EAST = """# FILE NAME: east.soc
# DATA TYPE: soc
# NUMBER ALTERNATIVES: 4
# ALTERNATIVE NAME 1: Housing
# ALTERNATIVE NAME 2: Transit
# ALTERNATIVE NAME 3: Parks
# ALTERNATIVE NAME 4: Schools
3: 2,4,1,3
1: 2,1,4,3
"""


def _orders(rows: list[tuple[list[str], int]]) -> np.ndarray:
    out = []
    for labels, count in rows:
        out += [[LABELS.index(x) for x in labels]] * count
    return np.array(out)


EXPECTED_DATA = [
    _orders(
        [
            (["Transit", "Schools", "Housing", "Parks"], 5),
            (["Transit", "Housing", "Schools", "Parks"], 2),
            (["Schools", "Transit", "Housing", "Parks"], 1),
        ]
    ),
    _orders(
        [(["Transit", "Schools", "Housing", "Parks"], 4), (["Schools", "Transit", "Housing", "Parks"], 1)]
    ),
    _orders(
        [(["Transit", "Schools", "Housing", "Parks"], 3), (["Transit", "Housing", "Schools", "Parks"], 1)]
    ),
]


def _site(args, token, cwd):
    """``privrank site …`` as a site runs it (in this process: tests.helpers.cli)."""
    return privrank("site", *args, env={"PRIVRANK_SITE_TOKEN": token}, cwd=cwd)


def _run(args, token, cwd):
    """``privrank site …`` as a process of its own: for sites that run at the same time."""
    env = {**os.environ, "PRIVRANK_SITE_TOKEN": token}
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "site", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module: each test makes its own survey and round."""
    path = tmp_path_factory.mktemp("site")
    srv = LiveServer({"DATABASE_URL": f"sqlite:///{path}/site.db", "PRIVRANK_ADMIN_KEY": "cli-admin"})
    yield srv
    srv.stop()


@pytest.mark.slow
def test_three_sites_contribute_from_three_file_formats(server, tmp_path):
    import httpx2

    survey = httpx2.post(
        f"{server.base}/v1/surveys",
        json={"title": "Fed", "kind": "ranking", "items": LABELS},
        headers=ADMIN,
    ).json()
    rnd = httpx2.post(
        f"{server.base}/v1/surveys/{survey['id']}/rounds",
        json={"method": "borda", "sites": ["north", "south", "east"], "phi": 0.6},
        headers=ADMIN,
    ).json()
    tokens = {s["name"]: s["token"] for s in rnd["sites"]}
    files = {"north": ("north.soi", NORTH), "south": ("south.csv", SOUTH), "east": ("east.soc", EAST)}
    dirs = {}
    for name, (fname, text) in files.items():
        d = tmp_path / name
        d.mkdir()
        (d / fname).write_text(text)
        dirs[name] = d

    # Alone, a site registers its key and reports that it waits for the others (exit 3).
    first = _site(["contribute", "north.soi", "--server", server.base], tokens["north"], dirs["north"])
    out = first.stdout
    err = first.stderr
    assert first.returncode == 3, (out, err)
    assert "waiting for sites" in out and "south" in out and "east" in out
    state = next(dirs["north"].glob(".privrank-site-*.json"))
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert json.loads(state.read_text())["site"] == "north"

    # All three together (north resumes with its saved key).
    procs = {
        name: _run(["contribute", fname, "--server", server.base, "--wait", "60"], tokens[name], dirs[name])
        for name, (fname, _) in files.items()
    }
    outputs = {name: p.communicate(timeout=180) for name, p in procs.items()}
    for name, p in procs.items():
        assert p.returncode == 0, (name, outputs[name])
        assert "contributed" in outputs[name][0]
    assert "round complete; consensus (best first): Transit > Schools > Housing > Parks" in "".join(
        o for o, _ in outputs.values()
    )

    result = httpx2.get(f"{server.base}/v1/surveys/{survey['id']}/rounds/{rnd['id']}", headers=ADMIN).json()
    assert result["status"] == "complete"
    ids = {it["label"]: it["id"] for it in survey["items"]}
    assert result["result"]["order"] == [ids[x] for x in ("Transit", "Schools", "Housing", "Parks")]
    scheme = FederatedScheme.from_parameters(rnd["parameters"])
    plain = np.sum([scheme.message(d) for d in EXPECTED_DATA], axis=0)
    assert result["result"]["aggregate"] == plain.tolist()  # the sites' messages, summed through the masks

    # Status, and a re-run after the end.
    status = _site(["status", "--server", server.base, "--json"], tokens["east"], dirs["east"])
    assert status.returncode == 0 and json.loads(status.stdout)["status"] == "complete"
    status = _site(["status", "--server", server.base], tokens["east"], dirs["east"])
    out = status.stdout
    assert status.returncode == 0, out
    assert f"round {rnd['id']}" in out and "complete" in out and "Borda FRA" in out
    assert "joined: 3 of 3" in out and "contributed: 3 of 3" in out
    assert "consensus (best first): Transit > Schools > Housing > Parks" in out
    # Each site declared that it sent its rankings as they are (no --epsilon).
    assert "declared privatization: north not privatized; south not privatized; east not privatized" in out
    assert "privacy: the rankings of sites north, south, east were not privatized" in out
    assert [(x["privatization"], x["epsilon"]) for x in result["sites"]] == [("none", None)] * 3
    again = _site(["contribute", "east.soc", "--server", server.base], tokens["east"], dirs["east"])
    assert again.returncode == 0 and "already contributed" in again.stdout


@pytest.mark.slow
def test_site_cli_errors(server, tmp_path):
    import httpx2

    survey = httpx2.post(
        f"{server.base}/v1/surveys", json={"title": "F", "kind": "ranking", "items": LABELS}, headers=ADMIN
    ).json()
    rnd = httpx2.post(
        f"{server.base}/v1/surveys/{survey['id']}/rounds",
        json={"method": "lehmer", "sites": ["a", "b"], "phi": 0.5, "allow_two_sites": True},
        headers=ADMIN,
    ).json()
    token = rnd["sites"][0]["token"]
    (tmp_path / "bad.csv").write_text("ranking\nTransit > Libraries\n")
    p = _site(["contribute", "bad.csv", "--server", server.base], token, tmp_path)
    assert p.returncode == 1 and "unknown item" in p.stderr
    (tmp_path / "x.txt").write_text("whatever")
    p = _site(["contribute", "x.txt", "--server", server.base], token, tmp_path)
    assert p.returncode == 1 and "unknown format" in p.stderr
    p = _site(["contribute", "bad.csv", "--server", server.base], "sit_aaaaaaaaaaaaaaaa.wrong", tmp_path)
    assert p.returncode == 1 and "401" in p.stderr
    p = privrank("site", "status", "--server", server.base, unset=("PRIVRANK_SITE_TOKEN",))
    assert p.returncode == 2 and "credential" in p.stderr


@pytest.mark.slow
def test_a_rerun_resends_exactly_the_saved_masked_message(server, tmp_path, monkeypatch):
    """A failed upload (here: the server answers 503 after seeing it) and a re-run must not
    send a *different* message under the same masks — the difference of two uploads would
    unmask it. Partial ballots make every recomputation random, so only a saved message
    passes this test."""
    import httpx2

    from app.cli import site

    survey = httpx2.post(
        f"{server.base}/v1/surveys", json={"title": "F", "kind": "ranking", "items": LABELS}, headers=ADMIN
    ).json()
    rnd = httpx2.post(
        f"{server.base}/v1/surveys/{survey['id']}/rounds",
        json={"method": "lehmer", "sites": ["a", "b", "c"], "phi": 0.5},
        headers=ADMIN,
    ).json()
    tokens = [s["token"] for s in rnd["sites"]]
    (tmp_path / "a.soi").write_text(NORTH.replace("5: 2,4,1", "5: 2").replace("2: 2,1,4", "2: 4"))
    for t in tokens[1:]:
        httpx2.put(
            f"{server.base}/v1/site/key",
            json={"public_key": site.public_key(site.new_private_key())},
            headers={"Authorization": f"Bearer {t}"},
        )
    sent = []
    real_call = site.SiteClient.call

    def flaky(self, method, path, body=None):
        if path == "/v1/site/contribution":
            sent.append(list(body["masked"]))
            if len(sent) == 1:
                raise site.SiteError("POST /v1/site/contribution: HTTP 503: the database is unreachable")
        return real_call(self, method, path, body)

    monkeypatch.setattr(site.SiteClient, "call", flaky)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(site.SiteError, match="503"):
        site.contribute(server.base, tokens[0], "a.soi", say=lambda _: None)
    # Another file after the failed upload: the saved message is not sent either, and it says so.
    (tmp_path / "b.soi").write_text(NORTH)
    warned: list[str] = []
    assert site.contribute(server.base, tokens[0], "b.soi", say=lambda _: None, warn=warned.append) == 4
    assert len(sent) == 1 and "NOT sent" in warned[0] and "original file" in warned[0]
    assert site.contribute(server.base, tokens[0], "a.soi", say=lambda _: None) == 0
    assert len(sent) == 2 and sent[0] == sent[1]


def test_site_files_match_labels_in_either_unicode_form(tmp_path):
    """The service stores labels in NFC; a site's file that spells "é" decomposed (or
    the reverse) must still name the same item."""
    from app.cli.site import load_rankings

    params = {
        "items": [
            {"id": "itm_a", "label": "Caf\u00e9", "position": 0},
            {"id": "itm_b", "label": "Tea", "position": 1},
        ]
    }
    path = tmp_path / "r.csv"
    path.write_text("ranking\nTea>Cafe\u0301\n", encoding="utf-8")
    orders = load_rankings(path, params, rng=np.random.default_rng(0))
    assert orders.tolist() == [[1, 0]]


def test_a_rerun_with_another_file_or_epsilon_is_refused_loudly(server, tmp_path, monkeypatch, capsys):
    """The state file records the input's SHA-256 and ε; a re-run from another file (or ε)
    says on stderr that the new input was NOT sent and exits 4; the same file answers 0."""
    import hashlib

    import httpx2

    from app.cli import site

    survey = httpx2.post(
        f"{server.base}/v1/surveys", json={"title": "F", "kind": "ranking", "items": LABELS}, headers=ADMIN
    ).json()
    rnd = httpx2.post(
        f"{server.base}/v1/surveys/{survey['id']}/rounds",
        json={"method": "borda", "sites": ["a", "b", "c"], "phi": 0.6},
        headers=ADMIN,
    ).json()
    tokens = [s["token"] for s in rnd["sites"]]
    for t in tokens[1:]:
        httpx2.put(
            f"{server.base}/v1/site/key",
            json={"public_key": site.public_key(site.new_private_key())},
            headers={"Authorization": f"Bearer {t}"},
        )
    (tmp_path / "a.csv").write_text(SOUTH)
    (tmp_path / "other.csv").write_text(SOUTH.replace(",4", ",3"))
    monkeypatch.chdir(tmp_path)
    bad = _site(["contribute", "a.csv", "--server", server.base, "--epsilon", "inf"], tokens[0], tmp_path)
    assert bad.returncode == 2 and "positive finite" in bad.stderr
    bad = _site(["contribute", "a.csv", "--server", server.base, "--epsilon", "1e300"], tokens[0], tmp_path)
    assert bad.returncode == 2 and "[0.001, 30]" in bad.stderr  # the server would refuse the declaration
    first = _site(["contribute", "a.csv", "--server", server.base, "--epsilon", "2.5"], tokens[0], tmp_path)
    out = first.stdout
    err = first.stderr
    assert first.returncode == 0, (out, err)
    assert "Mallows mechanism at ε = 2.5" in out
    # --epsilon reached the server as the site's declaration, and `site status` shows it.
    shown = httpx2.get(f"{server.base}/v1/surveys/{survey['id']}/rounds/{rnd['id']}", headers=ADMIN).json()
    assert (shown["sites"][0]["privatization"], shown["sites"][0]["epsilon"]) == ("mallows", 2.5)
    out = _site(["status", "--server", server.base], tokens[0], tmp_path).stdout
    assert "declared privatization: a Mallows, ε = 2.5; b not declared yet; c not declared yet" in out
    assert "privacy: site a privatized with the Mallows mechanism (a ε = 2.5)" in out
    said: list[str] = []
    state = json.loads(next(tmp_path.glob(".privrank-site-*.json")).read_text())
    assert state["epsilon"] == 2.5
    assert state["input_sha256"] == hashlib.sha256((tmp_path / "a.csv").read_bytes()).hexdigest()

    warned: list[str] = []
    assert site.contribute(server.base, tokens[0], "other.csv", epsilon=2.5, warn=warned.append) == 4
    assert "different file" in warned[0] and state["input_sha256"] in warned[0] and "NOT sent" in warned[0]
    warned.clear()
    assert site.contribute(server.base, tokens[0], "a.csv", epsilon=1.0, warn=warned.append) == 4
    assert "ε = 2.5" in warned[0] and "NOT sent" in warned[0]
    said.clear()
    assert site.contribute(server.base, tokens[0], "a.csv", epsilon=2.5, say=said.append) == 0
    assert "already contributed" in said[0]

    # The CLI: the warning goes to stderr, the exit status is 4, and ε is echoed.
    p = _site(["contribute", "other.csv", "--server", server.base, "--epsilon", "2.5"], tokens[0], tmp_path)
    out = p.stdout
    err = p.stderr
    assert p.returncode == 4 and "NOT sent" in err and "one message per site" in err and out == ""


def test_status_lines_name_missing_sites_and_ties():
    from app.cli.site import status_lines

    view = {
        "round_id": "rnd_x",
        "survey_id": "srv_y",
        "site": "a",
        "status": "open",
        "contributed": True,
        "parameters": {"method": "borda", "n_items": 3, "phi": 0.6},
        "peers": [
            {"name": "a", "position": 0, "public_key": "k", "contributed": True, "privatization": "none"},
            {"name": "b", "position": 1, "public_key": "k", "contributed": False},
            {"name": "c", "position": 2, "public_key": None, "contributed": False},
        ],
        "privacy": {"all_privatized": False, "epsilon_max": None, "statement": "the rankings of site a …"},
        "result": None,
    }
    text = "\n".join(status_lines(view))
    assert "round rnd_x (survey srv_y): open" in text and "Borda FRA, 3 items, 3 sites" in text
    assert "declared privatization: a not privatized; b not declared yet" in text
    assert "privacy: the rankings of site a …" in text
    assert "joined: 2 of 3 (missing: c)" in text and "contributed: 1 of 3 (missing: b, c)" in text
    view |= {
        "status": "complete",
        "peers": [dict(p, public_key="k", contributed=True) for p in view["peers"]],
        "result": {
            "order": ["i1", "i2", "i3"],
            "ties": [["i1", "i2"]],
            "tie_break": "drawn uniformly at random; carries no information",
            "items": [
                {"item_id": "i1", "label": "X", "rank": 1, "mean_site_quantized_position": 1.0},
                {"item_id": "i2", "label": "Y", "rank": 1, "mean_site_quantized_position": 1.0},
                {"item_id": "i3", "label": "Z", "rank": 3, "mean_site_quantized_position": 2.0},
            ],
        },
    }
    text = "\n".join(status_lines(view))
    assert "consensus (best first): {X = Y} > Z" in text and "tied: X = Y" in text
    assert "1. Y (tied)" in text and "carries no information" in text and "missing" not in text


def test_the_tie_break_is_printed_only_where_something_was_tied():
    from app.cli.site import consensus_lines

    items = [
        {"item_id": "a", "label": "A", "rank": 1},
        {"item_id": "b", "label": "B", "rank": 2},
    ]
    untied = consensus_lines({"items": items, "ties": [], "tie_break": "drawn at random"})
    assert untied == ["consensus (best first): A > B", "    1. A", "    2. B"]
    tied_items = [{**items[0]}, {**items[1], "rank": 1}]
    tied = consensus_lines({"items": tied_items, "ties": [["a", "b"]], "tie_break": "drawn at random"})
    assert tied[0] == "consensus (best first): {A = B}"
    assert "tied: A = B" in tied and "ties: drawn at random" in tied
