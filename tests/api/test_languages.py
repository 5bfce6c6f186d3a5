"""Languages (app.surveys.languages): which language a respondent gets (?lang=, then
Accept-Language, then the survey's default, then English), the survey's default language,
item label translations (create, add, PATCH) and the respondent-facing outputs that use them;
and the pages' message catalogs (respondent page, results page, dashboard): complete in every
language, and the dashboard's scripts showing no English of their own."""

from __future__ import annotations

import json
import re
import sys
import typing
from pathlib import Path

import pytest
from sqlalchemy import select

from app.analysis import intervals
from app.analysis import service as analysis
from app.core.db.models import Item
from app.federation import service as federation
from app.goals import service as goals
from app.planning.results import PlanBody, SurveyPlanOut
from app.rankings.service import CONSENSUS_REASONS
from app.stats.central import UNITS
from app.surveys.languages import LANGUAGES, accepted, choose_language
from tests.helpers.api import ADMIN, analyst_headers, register
from tests.helpers.jsliterals import literals

ITEMS = ["Housing", "Transit", "Parks"]
SPANISH = ["Vivienda", "Transporte", "Parques"]
GERMAN = ["Wohnen", "Nahverkehr", "Parks und Grünflächen"]


def _survey(client, items=ITEMS, **extra) -> dict:
    r = client.post("/v1/surveys", json={"title": "City", "items": list(items), **extra}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


def _public(client, sid, query="", headers=None) -> dict:
    r = client.get(f"/v1/surveys/{sid}/public{query}", headers=headers or {})
    assert r.status_code == 200, r.text
    return r.json()


# -- choosing the language ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("de-DE,de;q=0.9,en;q=0.8", ["de", "en"]),
        ("es-MX", ["es"]),
        ("en;q=0.2, fr;q=0.9", ["fr", "en"]),  # q-values, not the header's order
        ("fr;q=0.5, de;q=0.5", ["fr", "de"]),  # ties keep the header's order
        ("pt-BR, it;q=0.9, de;q=0.1", ["de"]),  # languages without a catalog are skipped
        ("fr;q=0, es", ["es"]),  # q=0 means "not this one"
        ("*", []),
        ("FR-ca;Q=0.7", ["fr"]),
        ("de;q=abc, es;q=2, fr", ["fr"]),  # malformed q-values are ignored
        ("", []),
    ],
)
def test_accept_language_parsing(header, expected):
    assert accepted(header) == expected


def test_the_resolution_order():
    assert choose_language("fr", "de", "es") == "fr"  # ?lang= first
    assert choose_language("es-MX", None, "en") == "es"
    assert choose_language("pt", "de;q=0.3", "es") == "de"  # unknown ?lang= → Accept-Language
    assert choose_language(None, "pt, it", "es") == "es"  # no supported one → the survey's default
    assert choose_language(None, None, "de") == "de"
    assert choose_language("xx", "zz", "nope") == "en"  # last resort


def test_the_public_survey_says_its_language(client):
    sid = _survey(client, language="de")["id"]
    assert _public(client, sid)["language"] == "de"  # the survey's default
    assert _public(client, sid)["languages"] == list(LANGUAGES)
    accept = {"Accept-Language": "es-MX,es;q=0.9,en;q=0.5"}
    assert _public(client, sid, headers=accept)["language"] == "es"  # Accept-Language beats the default
    assert _public(client, sid, "?lang=fr", headers=accept)["language"] == "fr"  # ?lang= beats both
    assert _public(client, sid, "?lang=pt", headers=accept)["language"] == "es"  # unknown ?lang= falls back
    assert _public(client, sid, "?lang=pt", headers={"Accept-Language": "pt-BR"})["language"] == "de"
    assert _public(client, sid, "?lang=" + "x" * 300)["language"] == "de"  # nonsense is ignored, never a 422
    # The answer depends on Accept-Language, and says so.
    assert client.get(f"/v1/surveys/{sid}/public").headers["vary"] == "Accept-Language"
    plain = _survey(client)["id"]
    assert _public(client, plain, headers={"Accept-Language": "ja"})["language"] == "en"


# -- the survey's default language --------------------------------------------------------


def test_the_default_language_is_stored_shown_and_changed(client):
    s = _survey(client, language="fr")
    assert s["language"] == "fr"
    sid = s["id"]
    assert client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["language"] == "fr"
    listed = client.get("/v1/surveys?limit=1000", headers=ADMIN).json()["surveys"]
    assert next(x for x in listed if x["id"] == sid)["language"] == "fr"
    r = client.patch(f"/v1/surveys/{sid}", json={"language": "es"}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["language"] == "es"
    assert _public(client, sid)["language"] == "es"
    r = client.patch(f"/v1/surveys/{sid}", json={"language": None, "title": "renamed"}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["language"] == "es"  # null: unchanged, as documented
    assert _survey(client)["language"] == "en"  # the default


def test_an_unsupported_default_language_is_refused(client, unchanged):
    sid = _survey(client)["id"]
    with unchanged():
        r = client.post(
            "/v1/surveys", json={"title": "t", "items": ["a", "b"], "language": "pt"}, headers=ADMIN
        )
        assert r.status_code == 422
        assert "language must be one of en, es, de, fr" in r.json()["detail"]
        r = client.patch(f"/v1/surveys/{sid}", json={"language": "EN", "title": "new"}, headers=ADMIN)
        assert r.status_code == 422 and "language" in r.json()["detail"]
    assert client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["title"] == "City"


# -- item translations --------------------------------------------------------------------


def test_translations_on_create_are_kept_and_shown_to_admins(client):
    s = _survey(client, item_translations={"es": SPANISH, "de": [GERMAN[0], None, GERMAN[2]]})
    items = {i["label"]: i for i in s["items"]}
    assert items["Housing"]["translations"] == {"es": "Vivienda", "de": "Wohnen"}
    assert items["Transit"]["translations"] == {"es": "Transporte"}  # null: no German label
    # Analysts see the original label and the map, whatever language they ask for.
    analyst = analyst_headers(client)
    got = client.get(f"/v1/surveys/{s['id']}?lang=es", headers={**analyst, "Accept-Language": "es"}).json()
    assert [i["label"] for i in got["items"]] == ITEMS
    assert got["items"][0]["translations"] == {"es": "Vivienda", "de": "Wohnen"}


def test_items_without_translations_hold_sql_null(app, client):
    """Not JSON null: "translations IS NOT NULL" picks exactly the items that have some."""
    s = _survey(client, item_translations={"es": ["Vivienda", None, None]})
    first, second = s["items"][0]["id"], s["items"][1]["id"]

    def translated() -> list[str]:
        with app.state.session_factory() as session:
            return list(
                session.scalars(
                    select(Item.id).where(Item.survey_id == s["id"], Item.translations.is_not(None))
                )
            )

    assert translated() == [first]
    r = client.patch(f"/v1/surveys/{s['id']}/items/{first}", json={"translations": {}}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["translations"] is None
    assert translated() == []
    client.patch(
        f"/v1/surveys/{s['id']}/items/{second}", json={"translations": {"fr": "Transports"}}, headers=ADMIN
    )
    assert translated() == [second]


def _pair_labels(client, sid, headers, query="") -> set[str]:
    r = client.get(f"/v1/surveys/{sid}/pairs?count=3{query}", headers=headers)
    assert r.status_code == 200, r.text
    return {label for p in r.json()["pairs"] for label in (p["a_label"], p["b_label"])}


def test_pairs_give_labels_in_the_chosen_language(client):
    sid = _survey(client, item_translations={"es": SPANISH, "de": [GERMAN[0], None, None]}, language="de")[
        "id"
    ]
    _, h = register(client, sid)
    assert _pair_labels(client, sid, h, "&lang=es") == set(SPANISH)
    assert client.get(f"/v1/surveys/{sid}/pairs", headers=h).headers["vary"] == "Accept-Language"
    assert _pair_labels(client, sid, {**h, "Accept-Language": "es-ES,es;q=0.9"}) == set(SPANISH)
    # The survey's default is German: Wohnen, and the label itself where there is no German one.
    assert _pair_labels(client, sid, h) == {"Wohnen", "Transit", "Parks"}
    assert _pair_labels(client, sid, {**h, "Accept-Language": "fr"}) == set(ITEMS)  # no French: the labels
    assert _pair_labels(client, sid, {**h, "Accept-Language": "es"}, "&lang=en") == set(ITEMS)


def test_the_ranking_question_gives_labels_in_the_chosen_language(client):
    r = client.post(
        "/v1/surveys",
        json={
            "title": "r",
            "kind": "ranking",
            "items": ITEMS,
            "item_translations": {"fr": ["Logement", None, "Parcs"]},
        },
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    _, h = register(client, sid)
    r = client.get(f"/v1/surveys/{sid}/question?lang=fr", headers=h)
    assert r.headers["vary"] == "Accept-Language"
    q = r.json()
    assert {i["label"] for i in q["items"]} == {"Logement", "Transit", "Parcs"}
    q = client.get(f"/v1/surveys/{sid}/question", headers={**h, "Accept-Language": "fr-CA"}).json()
    assert {i["label"] for i in q["items"]} == {"Logement", "Transit", "Parcs"}
    q = client.get(f"/v1/surveys/{sid}/question", headers=h).json()
    assert {i["label"] for i in q["items"]} == set(ITEMS)


def test_public_results_give_labels_in_the_chosen_language(client):
    privacy = {"respondent_budget": 6.0}  # the 3 pairs at ε = 2
    sid = _survey(client, public_results=True, item_translations={"es": SPANISH}, privacy=privacy)["id"]
    _, h = register(client, sid, epsilon=2.0)
    answers = [{"a": a, "b": b, "winner": a} for a, b in _ids_pairs(client, sid)]
    r = client.post(
        f"/v1/surveys/{sid}/responses", json={"comparisons": answers, "privatized": False}, headers=h
    )
    assert r.status_code == 201, r.text
    english = client.get(f"/v1/surveys/{sid}/results").json()
    assert {i["label"] for i in english["items"]} == set(ITEMS)
    assert english["language"] == "en"
    assert client.get(f"/v1/surveys/{sid}/results").headers["vary"] == "Accept-Language"
    spanish = client.get(f"/v1/surveys/{sid}/results?lang=es").json()
    assert {i["label"] for i in spanish["items"]} == set(SPANISH)
    assert spanish["language"] == "es"
    by_header = client.get(f"/v1/surveys/{sid}/results", headers={"Accept-Language": "es"}).json()
    assert [i["label"] for i in by_header["items"]] == [i["label"] for i in spanish["items"]]
    # The shared snapshot is not relabelled: English again afterwards.
    assert {i["label"] for i in client.get(f"/v1/surveys/{sid}/results").json()["items"]} == set(ITEMS)


def _ids_pairs(client, sid):
    ids = [i["id"] for i in client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"]]
    return [(ids[a], ids[b]) for a in range(len(ids)) for b in range(a + 1, len(ids))]


def test_items_added_later_may_carry_translations(client, unchanged):
    s = _survey(client, item_translations={"es": SPANISH})
    sid = s["id"]
    r = client.post(
        f"/v1/surveys/{sid}/items",
        json={"items": ["Libraries", "Pools"], "item_translations": {"es": ["Bibliotecas", None]}},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    assert [i["translations"] for i in r.json()] == [{"es": "Bibliotecas"}, None]
    with unchanged():
        # A Spanish label another item has already.
        r = client.post(
            f"/v1/surveys/{sid}/items",
            json={"items": ["Flats"], "item_translations": {"es": ["Vivienda"]}},
            headers=ADMIN,
        )
        assert r.status_code == 422 and "unique within a language" in r.json()["detail"]
        r = client.post(
            f"/v1/surveys/{sid}/items",
            json={"items": ["Flats"], "item_translations": {"it": ["Case"]}},
            headers=ADMIN,
        )
        assert r.status_code == 422 and "language must be one of" in r.json()["detail"]


@pytest.mark.parametrize(
    ("translations", "fragment"),
    [
        ({"pt": ["Habitação", "Trânsito", "Parques"]}, "language must be one of"),
        ({"es": ["Vivienda", "Transporte"]}, "2 labels for 3 items"),
        ({"es": ["Vivienda", "   ", "Parques"]}, "empty"),
        ({"es": ["Vivienda", "Vivienda", "Parques"]}, "unique within a language"),
        ({"es": ["Vivienda", "x\u0000", "Parques"]}, "NUL"),
        ({"es": ["Vivienda", "x\u0007", "Parques"]}, "control characters"),
        ({"es": ["Vivienda", "x" * 501, "Parques"]}, "500"),
        ({"es": "Vivienda"}, "list"),
    ],
)
def test_invalid_translations_on_create_store_nothing(client, unchanged, translations, fragment):
    with unchanged():
        r = client.post(
            "/v1/surveys",
            json={"title": "t", "items": ITEMS, "item_translations": translations},
            headers=ADMIN,
        )
    assert r.status_code == 422
    assert fragment in r.text


def test_patch_sets_replaces_and_clears_an_items_translations(client, unchanged):
    s = _survey(client, item_translations={"es": SPANISH})
    sid, item = s["id"], s["items"][0]["id"]
    url = f"/v1/surveys/{sid}/items/{item}"
    r = client.patch(url, json={"translations": {"fr": "Logement", "de": "  Wohnen "}}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["translations"] == {"fr": "Logement", "de": "Wohnen"}  # replaced, labels normalized
    assert r.json()["status"] == "live"
    _, h = register(client, sid)
    assert "Logement" in _pair_labels(client, sid, h, "&lang=fr")
    assert "Vivienda" not in _pair_labels(client, sid, h, "&lang=es")  # the Spanish one is gone
    # Status and translations together, in one change.
    r = client.patch(url, json={"status": "hidden", "translations": {"es": "Casa"}}, headers=ADMIN)
    assert (
        r.status_code == 200 and r.json()["status"] == "hidden" and r.json()["translations"] == {"es": "Casa"}
    )
    r = client.patch(url, json={"status": "live", "translations": None}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["translations"] is None
    moderator = analyst_headers(client, role="moderator")
    with unchanged():
        r = client.patch(url, json={"translations": {"es": "Casa"}}, headers=moderator)
        assert r.status_code == 403 and "admin" in r.json()["detail"]
        r = client.patch(url, json={"status": "hidden", "translations": {"es": "Transporte"}}, headers=ADMIN)
        assert r.status_code == 422 and "already has 'Transporte'" in r.json()["detail"]
        r = client.patch(url, json={"translations": {"xx": "Casa"}}, headers=ADMIN)
        assert r.status_code == 422 and "language must be one of" in r.json()["detail"]
        r = client.patch(url, json={"translations": {"es": ""}}, headers=ADMIN)
        assert r.status_code == 422
        r = client.patch(url, json={}, headers=ADMIN)
        assert r.status_code == 422 and "status, translations or both" in r.json()["detail"]
    # Moderators still hide and show items (without translations).
    assert client.patch(url, json={"status": "hidden"}, headers=moderator).json()["status"] == "hidden"
    assert client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"][0]["translations"] is None


def test_a_translation_may_not_show_as_another_items_label(client, unchanged):
    """In a language an item shows its translation, else its label: two items must never look
    alike there (a respondent could not tell them apart)."""
    with unchanged():
        # On create: Transit's Spanish label is Housing's own (untranslated in Spanish).
        r = client.post(
            "/v1/surveys",
            json={"title": "t", "items": ITEMS, "item_translations": {"es": [None, "Housing", None]}},
            headers=ADMIN,
        )
        assert r.status_code == 422 and "look different" in r.json()["detail"], r.text
    s = _survey(client)
    sid, housing, transit = s["id"], s["items"][0]["id"], s["items"][1]["id"]
    with unchanged():
        # On PATCH: the same through an item's translations.
        r = client.patch(
            f"/v1/surveys/{sid}/items/{transit}", json={"translations": {"es": "Housing"}}, headers=ADMIN
        )
        assert r.status_code == 422 and "look different" in r.json()["detail"], r.text
        # On adding items: a new translation, then a new label, equal to what another item shows.
        r = client.post(
            f"/v1/surveys/{sid}/items",
            json={"items": ["Flats"], "item_translations": {"fr": ["Parks"]}},
            headers=ADMIN,
        )
        assert r.status_code == 422 and "look different" in r.json()["detail"], r.text
    assert (
        client.patch(
            f"/v1/surveys/{sid}/items/{housing}", json={"translations": {"es": "Vivienda"}}, headers=ADMIN
        ).status_code
        == 200
    )
    with unchanged():
        r = client.post(f"/v1/surveys/{sid}/items", json={"items": ["Vivienda"]}, headers=ADMIN)
        assert r.status_code == 422 and "look different" in r.json()["detail"], r.text
    # Housing translated in Spanish, Transit may take its English label there; an item may keep its own.
    r = client.patch(
        f"/v1/surveys/{sid}/items/{transit}",
        json={"translations": {"es": "Housing", "de": "Transit"}},
        headers=ADMIN,
    )
    assert r.status_code == 200, r.text
    _, h = register(client, sid)
    shown = _pair_labels(client, sid, h, "&lang=es")
    assert shown == {"Vivienda", "Housing", "Parks"}


# -- the catalogs -------------------------------------------------------------------------

CATALOGS = Path(__file__).resolve().parents[2] / "static" / "i18n"
#: A placeholder in a message: {name}.
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _catalog(name: str, code: str) -> dict[str, str]:
    return json.loads((CATALOGS / f"{name}.{code}.json").read_text(encoding="utf-8"))


#: The pages' catalogs (respondents, the public, the dashboard's users): one per language each.
CATALOG_NAMES = ("respond", "results", "dashboard")


@pytest.mark.parametrize("name", CATALOG_NAMES)
@pytest.mark.parametrize("code", [c for c in LANGUAGES if c != "en"])
def test_every_catalog_has_the_english_keys_and_placeholders(name, code):
    english, other = _catalog(name, "en"), _catalog(name, code)
    assert set(other) == set(english), (
        f"{code}: missing {set(english) - set(other)}, extra {set(other) - set(english)}"
    )
    for key, text in english.items():
        assert sorted(PLACEHOLDER.findall(other[key])) == sorted(PLACEHOLDER.findall(text)), (code, key)
        assert other[key].strip(), (code, key)


def test_there_is_a_catalog_per_language_and_no_other():
    for name in CATALOG_NAMES:
        assert sorted(p.name for p in CATALOGS.glob(f"{name}.*.json")) == sorted(
            f"{name}.{c}.json" for c in LANGUAGES
        )
    english = _catalog("respond", "en")
    # The privacy explanations carry their numbers as placeholders, never baked in.
    for key in ("intro.explain.pairwise", "end.spent.many", "intro.explain.ranking"):
        assert "{" in english[key] and not re.search(r"\d+%", english[key]), key


STATIC = CATALOGS.parent
#: The pages' scripts and markup, by the catalog their words come from.
USERS = {
    "respond": [
        "respond.html",
        "respond.js",
        "privacy-summary.js",
        *(p.name for p in STATIC.glob("respond-*.js")),
    ],
    "results": ["results.html", "results.js", "results-view.js"],
    "dashboard": [
        "index.html",
        "dashboard.js",
        "api.js",
        "dom.js",
        "charts.js",
        "privacy-summary.js",
        "server-words.js",
        *(p.name for p in STATIC.glob("view-*.js")),
    ],
}
#: A message a script asks for by a literal key: t("key" …), tn("key" …) (with .one and .other), or
#: data-i18n="key" / data-i18n-label="key" in the markup.
USED = re.compile(r"""\b(tn?)\(\s*"([\w.]+)"|data-i18n(?:-label)?="([\w.]+)\"""")


@pytest.mark.parametrize("name", sorted(USERS))
def test_every_message_a_page_asks_for_is_in_its_english_catalog(name):
    english = _catalog(name, "en")
    asked: set[str] = set()
    for file in USERS[name]:
        for fn, key, markup in USED.findall((STATIC / file).read_text(encoding="utf-8")):
            if markup:
                asked.add(markup)
            elif fn == "tn":
                asked |= {f"{key}.one", f"{key}.other"}
            else:
                asked.add(key)
    assert len(asked) > 15, asked  # the pattern finds the calls
    assert asked - set(english) == set(), f"{name}: messages missing from the catalog"


#: A message a script asks for by a key it composes: t(`prefix.${…}.rest` …), tn(`…` …).
COMPOSED = re.compile(r"\b(tn?)\(\s*`([\w.]*\$\{[^`]*)`")


def test_every_composed_key_has_messages_in_the_dashboard_catalog():
    """A key built from a value (t(`status.${s.status}`)) names a family of messages: the
    catalog has at least one, and every language has the same ones (checked above)."""
    english = _catalog("dashboard", "en")
    families = set()
    for file in USERS["dashboard"]:
        for fn, template in COMPOSED.findall((STATIC / file).read_text(encoding="utf-8")):
            pattern = re.sub(r"\\\$\\\{.*?\\\}", r"[\\w.]+", re.escape(template))
            pattern += r"\.(one|other)" if fn == "tn" else ""
            families.add(pattern)
            assert any(re.fullmatch(pattern, key) for key in english), (file, template)
    assert len(families) > 10, families  # the pattern finds the calls


#: The catalogs each page loads together, in order (loadCatalogs in respond.js and results.js):
#: later ones are merged over earlier ones, so a key in two of them shows one page's words on the other.
LOADED_TOGETHER = {"respond": ("respond", "results"), "results": ("results",)}


def _page_text(page: str, code: str) -> dict[str, str]:
    """The messages the page `page` shows in `code`, merged as i18n.js's loadCatalogs merges them."""
    shown: dict[str, str] = {}
    for name in LOADED_TOGETHER[page]:
        shown.update(_catalog(name, code))
    return shown


def test_the_catalogs_a_page_loads_together_share_no_key():
    for page, names in LOADED_TOGETHER.items():
        for k, a in enumerate(names):
            for b in names[k + 1 :]:
                assert set(_catalog(a, "en")) & set(_catalog(b, "en")) == set(), (page, a, b)
    # Each page names its loads as the test assumes.
    assert 'loadCatalogs(["respond", "results"]' in (STATIC / "respond.js").read_text(encoding="utf-8")
    assert 'loadCatalogs(["results"]' in (STATIC / "results.js").read_text(encoding="utf-8")


@pytest.mark.parametrize("code", LANGUAGES)
def test_the_respondent_page_reads_its_own_words_in_every_language(code):
    shown, own, results = _page_text("respond", code), _catalog("respond", code), _catalog("results", code)
    # What the respondent page shows under its keys is its own catalog's text, never the results page's.
    for key in ("page.skip", "page.title", "page.languages", "ranking.question", "ranking.hint"):
        assert shown[key] == own[key], (code, key)
    results_texts = set(results.values())
    for key in ("page.skip", "page.title", "ranking.question", "ranking.hint"):
        assert shown[key] not in results_texts, (code, key, shown[key])
    # The ranking question says how to order the items: the ↑ and ↓ buttons, and most important first.
    assert "↑" in shown["ranking.hint"] and "↓" in shown["ranking.hint"], (code, shown["ranking.hint"])
    first = {"en": "first", "es": "primero", "de": "zuerst", "fr": "premier"}[code]
    assert first in shown["ranking.question"], (code, shown["ranking.question"])
    # The tab title does not end in the results page's word; the results page keeps its own.
    results_word = {"en": "results", "es": "resultados", "de": "Ergebnisse", "fr": "résultats"}[code]
    assert not shown["page.title"].endswith(results_word), (code, shown["page.title"])
    assert _page_text("results", code)["results.page.title"].endswith(results_word), code


def test_every_sentence_of_the_public_note_is_in_every_results_catalog():
    """The public results' note is sentences named by code (app/participation/public_results.py),
    each a "results.note.<code>" message; none names an API option, in any language."""
    source = (STATIC.parent / "app" / "participation" / "public_results.py").read_text(encoding="utf-8")
    codes = set(re.findall(r'code="(\w+)"', source)) | {
        c for pair in re.findall(r'code="(\w+)" if \w+ else "(\w+)"', source) for c in pair
    }
    assert {"pairwise", "no_intervals", "ranking_none", "central_release", "withheld"} <= codes, codes
    for code in LANGUAGES:
        catalog = _catalog("results", code)
        for name in codes:
            keys = (
                [f"results.note.{name}.one", f"results.note.{name}.other"]
                if name == "withheld"
                else [f"results.note.{name}"]
            )
            for key in keys:
                assert key in catalog, (code, key)
        for key, text in catalog.items():
            if key.startswith("results.note."):
                assert "uncertainty" not in text and "bootstrap" not in text, (code, key)


# -- the service's sentences on the dashboard ----------------------------------------------

#: Where the service says why a ranking has no intervals, and how: the fit's
#: IntervalsUnavailable("code", …), the analysis service's _Intervals(None, "code", …), the
#: ranking consensus's reason_code = "code".
REASON_SOURCES = {
    "stats/inference": r'IntervalsUnavailable\(\s*"(\w+)"',
    "analysis/intervals.py": r'_Intervals\(\s*None,\s*"(\w+)"',
    "rankings/service.py": r'reason_code = "(\w+)"',
}


def _reason_codes() -> set[str]:
    """Every code the service gives for a ranking without intervals, read from its source."""
    codes: set[str] = set()
    for path, pattern in REASON_SOURCES.items():
        where = STATIC.parent / "app" / path
        files = sorted(where.glob("*.py")) if where.is_dir() else [where]
        found = set(re.findall(pattern, "".join(f.read_text(encoding="utf-8") for f in files)))
        assert found, path  # the pattern finds the codes
        codes |= found
    return codes


def test_every_reason_for_missing_intervals_has_a_message_in_every_dashboard_catalog():
    """The dashboard says why there are no intervals by the reason's code ("uncertainty.reason.<code>"),
    in every language; the codes the service emits are the ones it documents."""
    codes = _reason_codes()
    assert {"no_comparisons", "too_few_respondents", "no_standard_errors", "too_few_rankings"} <= codes
    assert codes == set(intervals.INTERVAL_REASONS) | set(CONSENSUS_REASONS), codes
    for code in LANGUAGES:
        catalog = _catalog("dashboard", code)
        assert {c for c in codes if f"uncertainty.reason.{c}" not in catalog} == set(), code


def test_every_estimand_tie_break_and_cost_has_a_message_in_every_dashboard_catalog():
    """What intervals are for (by their method), what a goal certifies (by its estimand, for
    one item and for several), how a federated round broke ties (by its method), why a
    central release costs what it does (by its unit) and where each planner's true scores
    come from."""
    keys = {f"uncertainty.estimand.{method}" for method in analysis._ESTIMANDS}
    for estimand in goals.ESTIMANDS.values():
        top_k = estimand.endswith("_top_k")
        keys |= {f"goal.estimand.{estimand}.one", f"goal.estimand.{estimand}.other"} if top_k else set()
        keys |= set() if top_k else {f"goal.estimand.{estimand}"}
    keys |= {f"rounds.tie_break.{method}" for method in federation.TIE_BREAK}
    # A central release's cost, by its unit, pure or zCDP.
    keys |= {f"central.cost.{unit}" for unit in UNITS} | {f"central.cost.zcdp_{unit}" for unit in UNITS}
    # The accuracy preview's true scores, by their model.
    models = typing.get_args(PlanBody.model_fields["score_model"].annotation)
    keys |= {f"plan.truth.{model}" for model in models}
    sources = typing.get_args(SurveyPlanOut.model_fields["scores"].annotation)
    keys |= {f"plan.survey.source.{source}" for source in sources}
    assert len(keys) == 6 + 6 + 2 + 4 + 3 + 2, keys
    for code in LANGUAGES:
        catalog = _catalog("dashboard", code)
        assert keys - set(catalog) == set(), code
        # The numbers are placeholders: a top-K estimand names its K and level, a cluster one its respondents.
        for key in keys:
            if key.startswith("goal.estimand."):
                assert "{level}" in catalog[key], (code, key)
            if key.endswith("_top_k.other"):
                assert catalog[key].count("{n}") == 2, (code, key)
            if key.startswith("uncertainty.estimand.cluster"):
                assert "{g}" in catalog[key], (code, key)


# -- no English of the dashboard's own ----------------------------------------------------

#: The dashboard's scripts: every word they show comes from the "dashboard" catalog.
DASHBOARD_SCRIPTS = sorted(name for name in USERS["dashboard"] if name.endswith(".js"))
#: Where a literal is not shown: a message key (t, tn), a module path, an element or event
#: name, a request's method and path, a selector, a stored setting's name, a comparison.
NOT_SHOWN_AFTER = re.compile(
    r"""(\btn?\(|\bfrom|\bimport|\bh\(|svgEl\(|createElement\(|api\(|api\("\w+",|download\(|"""
    r"""querySelector(All)?\(|getElementById\(|addEventListener\(|setAttribute\(|"""
    r"""(get|set|remove)Item\(|===|!==|includes\(|startsWith\(|\bcase|\.font\s*=|\[)\s*$"""
)
#: An attribute or option that is shown (its value must come from the catalog); any other
#: key's value (class, id, type, role, for, href, …) is not.
SHOWN_KEYS = {"text", "title", '"aria-label"', "placeholder", "label", "desc", "axisLabel", "caption", "alt"}
KEY_BEFORE = re.compile(r"""([\w$]+|"[\w-]+")\s*:\s*$""")
#: Calls and assignments whose string argument is shown.
SHOWN_AFTER = re.compile(
    r"""(\}\s*,|confirm\(|alert\(|announce\(|Error\(|ApiError\(\s*\d+\s*,|textContent\s*=)\s*$"""
)
#: Prose: two words, a capitalised word, or a sentence's end.
PROSE = re.compile(r"[A-Za-z]\s+[A-Za-z]|^\W*[A-Z][a-z]|[a-z][.:?!…]\s*$")
#: A URL, a path, a file name, or code shown as code (the embed snippets, a site's command).
NOT_WORDS = re.compile(
    r"^(/|#|https?:|<|  |--|PRIVRANK_|[\w.-]+\.(js|csv|json|svg)$|[a-z_]+(\.\w+)+\.?$)|://"
)


def _operand_start(before: str) -> str:
    """The code before the expression that ends `before` (a ternary's branch: back past its
    condition to the "(", "[", "{", "," or ";" that opens it, skipping balanced brackets)."""
    depth = 0
    for k in range(len(before) - 1, -1, -1):
        c = before[k]
        if c in ")]}":
            depth += 1
        elif c in "([{" and depth:
            depth -= 1
        elif c in "([{,;" and not depth:
            return before[: k + 1]
    return ""


def _shown_english(name: str) -> list[tuple[int, str]]:
    """The literals with letters in `name` that the page would show as they are."""
    shown = []
    for lit in literals((STATIC / name).read_text(encoding="utf-8")):
        text = lit.text
        if not re.search(r"[A-Za-z]{2,}", text) or NOT_WORDS.search(text):
            continue
        if NOT_SHOWN_AFTER.search(lit.before):
            continue
        if re.match(r"(in\b|===|!==)", lit.after):  # a property test, a comparison
            continue
        if lit.after.startswith(":") and re.search(r"[{,]\s*$", lit.before):  # an object's key
            continue
        context = lit.before
        ternary = re.search(r"((?<!\?)\?|:)\s*$", context)  # (not ?? : a default)
        if ternary and not KEY_BEFORE.search(context) and not PROSE.search(text):
            # A ternary's branch: what it is an argument or a value of.
            head = _operand_start(context.rstrip(" ?:"))
            if NOT_SHOWN_AFTER.search(head) or head.endswith("${"):  # a key's part, a template's
                continue
            segment = context[len(head) :]
            key = re.match(r"\s*([\w$]+|\"[\w-]+\")\s*:", segment)
            if key and key.group(1) not in SHOWN_KEYS:
                continue
            shown.append((lit.line, text))
            continue
        key = KEY_BEFORE.search(context)
        if key:
            if key.group(1) in SHOWN_KEYS:
                shown.append((lit.line, text))
            continue
        if PROSE.search(text) or SHOWN_AFTER.search(lit.before):
            shown.append((lit.line, text))
    return shown


def test_the_english_audit_finds_words_shown_as_they_are(tmp_path, monkeypatch):
    """The audit below tells a shown word from an id, a class, a URL or a key."""
    source = """import { t } from "/static/i18n.js";
const a = h("p", { class: "hint big", id: "x-y", title: "Full title" }, "Sign in");
const b = h("td", {}, z ? t("rounds.yes") : "no", "yes");
h("button", { type: "button", "aria-label": t("k.label"), placeholder: "https://example.org" }, t("a.b"));
if (!confirm("Close it?")) announce(`Round ${n} cancelled`);
api("GET", `/v1/surveys/${id}`); el.querySelector("#rel-eps option[value=x]");
const s = x === "pending" ? "on" : null; // "Not a literal"
"""
    (tmp_path / "view-x.js").write_text(source, encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "STATIC", tmp_path)
    assert [text for _, text in _shown_english("view-x.js")] == [
        "Full title",
        "Sign in",
        "no",
        "Close it?",
        "Round  cancelled",
        "on",
    ]


@pytest.mark.parametrize("name", DASHBOARD_SCRIPTS)
def test_no_dashboard_script_shows_english_of_its_own(name):
    """Text children, shown attributes (aria-label, title, placeholder), chart titles,
    confirm() dialogs, announcements and client-side error messages come through t(): a
    literal with words in such a place would stay English in every language."""
    assert _shown_english(name) == [], name
