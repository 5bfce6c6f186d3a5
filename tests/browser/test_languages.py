"""The respondent page in each language (Playwright + Debian Chromium): chosen by ?lang=, by the
browser's languages (Accept-Language), or by the survey's default; its text from the catalogs,
<html lang> set, item labels translated, numbers written the language's way. The dashboard in
the browser's language or the one picked in its header, with none of its English left."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx2
import numpy as np
import pytest
from playwright.sync_api import expect

from app.cli.site import masked_message, new_private_key, public_key
from tests.helpers.browser import ADMIN, ITEMS, api_respondent, signed_in_script

#: The survey's item labels (ITEMS) in the other languages.
TRANSLATIONS = {
    "es": ["Vivienda", "Transporte", "Parques", "Escuelas"],
    "de": ["Wohnen", "Nahverkehr", "Grünanlagen", "Schulen"],
    "fr": ["Logement", "Transports", "Parcs", "Écoles"],
}
LABELS = {"en": ITEMS, **TRANSLATIONS}

#: What the page says in each language: the privacy heading, the button, the question, the
#: privacy explanation at ε = 2 (reported as given with probability 88%), the thanks after 2 pairs.
EXPECTED = {
    "en": {
        "privacy": "Your privacy",
        "start": "Start",
        "question": "Which matters more to you?",
        "meaning": "it is reported as you gave it with probability 88%, and the opposite answer is reported "
        "otherwise. Someone who sees a sent answer guesses your real one right 88% of the time, against 50% "
        "by chance. (Privacy level ε = 2;",
        "spent": "You answered 2 pairs. Each answer was randomized on this device before it was sent",
        "progress": "Question 1 of 2",
    },
    "es": {
        "privacy": "Tu privacidad",
        "start": "Empezar",
        "question": "¿Qué te importa más?",
        "meaning": "se comunica tal como la diste con probabilidad 88 %, y en caso contrario se comunica la "
        "respuesta opuesta. Quien vea una respuesta enviada acierta tu respuesta real el 88 % de las veces, "
        "frente al 50 % por azar. (Nivel de privacidad ε = 2;",
        "spent": "Respondiste 2 pares. Cada respuesta se aleatorizó en este dispositivo antes de enviarse",
        "progress": "Pregunta 1 de 2",
    },
    "de": {
        "privacy": "Ihre Privatsphäre",
        "start": "Starten",
        "question": "Was ist Ihnen wichtiger?",
        "meaning": "Sie wird mit Wahrscheinlichkeit 88 % so übermittelt, wie Sie sie gegeben haben, "
        "andernfalls wird die gegenteilige Antwort übermittelt. Wer eine gesendete Antwort sieht, "
        "errät Ihre echte in 88 % der Fälle richtig, gegenüber 50 % durch Zufall. (Datenschutzniveau ε = 2;",
        "spent": "Sie haben 2 Paare beantwortet. Jede Antwort wurde auf diesem Gerät randomisiert",
        "progress": "Frage 1 von 2",
    },
    "fr": {
        "privacy": "Votre confidentialité",
        "start": "Commencer",
        "question": "Qu'est-ce qui compte le plus pour vous ?",
        "meaning": "elle est transmise telle que vous l'avez donnée avec une probabilité de 88 %, et la "
        "réponse opposée est transmise sinon. Quelqu'un qui voit une réponse envoyée devine juste votre "
        "vraie réponse dans 88 % des cas, contre 50 % par hasard. (Niveau de confidentialité ε = 2 ;",
        "spent": "Vous avez répondu à 2 paires. Chaque réponse a été randomisée sur cet appareil",
        "progress": "Question 1 sur 2",
    },
}


#: A survey's title is not translated: it is written in the survey's language.
TITLES = {
    "en": "Which policy matters most?",
    "es": "¿Qué política importa más?",
    "de": "Welche Politik ist am wichtigsten?",
    "fr": "Quelle politique compte le plus\u00a0?",
}


def _plain(text: str) -> str:
    """Text with the no-break spaces (French punctuation, percentages) as plain spaces."""
    return text.replace("\u00a0", " ").replace("\u202f", " ")


def _survey(server, language: str = "en", title: str = TITLES["en"]) -> str:
    body = {
        "title": title,
        "items": ITEMS,
        "privacy": {"epsilon_default": 2.0, "respondent_budget": 6.0},  # up to 3 pairs at ε = 2
        "language": language,
        "item_translations": TRANSLATIONS,
    }
    r = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()["id"]


@pytest.fixture
def page_in(contexts, console):
    """``page_in(locale)``: a page in a fresh context whose browser speaks ``locale``
    (navigator.languages and Accept-Language), watched for console errors;
    ``signed_in=base``: its first visit to the dashboard at ``base`` is signed in as the admin."""

    def make(locale: str = "en-US", width: int = 420, height: int = 860, signed_in: str | None = None):
        ctx = contexts(locale=locale, viewport={"width": width, "height": height})
        if signed_in:
            ctx.add_init_script(signed_in_script(signed_in))
        page = ctx.new_page()
        console.watch(page)
        return page

    return make


def _check_page(page, lang: str, shots=None) -> None:
    """The page is in ``lang`` from the introduction to the thanks: two pairs answered."""
    said = EXPECTED[lang]
    expect(page.get_by_role("heading", name=said["privacy"])).to_be_visible()
    assert page.evaluate("document.documentElement.lang") == lang
    assert said["meaning"] in _plain(page.locator("#epsilon-meaning").inner_text())
    if shots is not None:
        shots(page, f"respondent-intro-{lang}.png", full_page=True)
    page.get_by_role("button", name=said["start"], exact=True).click()
    expect(page.locator("#choice-a")).to_be_visible()
    assert _plain(page.locator("#question").inner_text()) == said["question"]
    assert page.locator("#progress-text").inner_text() == said["progress"]
    shown = {page.locator("#choice-a").inner_text(), page.locator("#choice-b").inner_text()}
    assert shown <= set(LABELS[lang]), shown  # the item labels in the page's language
    if shots is not None:
        shots(page, f"respondent-pair-{lang}.png", full_page=True)
    for k in range(2):
        expect(page.locator("#progress-text")).to_have_text(said["progress"].replace("1", str(k + 1), 1))
        page.locator("#choice-a").click()
    expect(page.locator("#thanks")).to_be_visible()
    assert _plain(page.locator("#spent").inner_text()).startswith(said["spent"])


@pytest.mark.parametrize("lang", ["en", "es", "de", "fr"])
def test_the_respondent_page_in_each_language_by_lang(server, page_in, shots, lang):
    sid = _survey(server, title=TITLES[lang])
    page = page_in("en-US")  # the browser speaks English: ?lang= wins
    page.goto(f"{server.base}/s/{sid}?lang={lang}&n=2")
    _check_page(page, lang, shots)


@pytest.mark.parametrize(("locale", "lang"), [("es-MX", "es"), ("de-AT", "de"), ("fr-CA", "fr")])
def test_the_respondent_page_follows_the_browsers_language(server, page_in, locale, lang):
    sid = _survey(server, language="en")
    page = page_in(locale)  # Accept-Language and navigator.languages: the browser's
    page.goto(f"{server.base}/s/{sid}?n=2")
    _check_page(page, lang)


def test_the_respondent_page_falls_back_to_the_surveys_language(server, page_in):
    sid = _survey(server, language="de")
    page = page_in("ja-JP")  # no catalog for Japanese: the survey's default, German
    page.goto(f"{server.base}/s/{sid}?n=2")
    _check_page(page, "de")
    # ?lang= beats both the browser and the survey's default.
    page = page_in("es-ES")
    page.goto(f"{server.base}/s/{sid}?lang=fr&n=2")
    expect(page.get_by_role("heading", name=EXPECTED["fr"]["privacy"])).to_be_visible()
    assert page.evaluate("document.documentElement.lang") == "fr"


def test_a_ranking_survey_in_french(server, page_in):
    body = {
        "title": "Classement",
        "kind": "ranking",
        "items": ITEMS,
        "item_translations": {"fr": TRANSLATIONS["fr"]},
        "privacy": {"epsilon_default": 1.0},
    }
    sid = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()["id"]
    page = page_in("fr-FR")
    page.goto(f"{server.base}/s/{sid}")
    meaning = _plain(page.locator("#epsilon-meaning").inner_text())
    # ε = 1 over 4 items: adjacent items swapped with probability 1/(1+e^{1/3}) = 42%; ε = 2 overall.
    assert "y apparaissent inversés avec une probabilité de 42 %" in meaning, meaning
    assert "et ε = 2 entre deux classements quelconques" in meaning
    page.get_by_role("button", name="Commencer").click()
    expect(
        page.get_by_role("heading", name="Classez ces éléments, le plus important en premier")
    ).to_be_visible()
    labels = page.locator("#rank-list li .label").all_inner_texts()
    assert sorted(labels) == sorted(TRANSLATIONS["fr"])
    expect(page.get_by_role("button", name=f"Monter {labels[1]}")).to_be_visible()
    page.get_by_role("button", name="Envoyer mon classement").click()
    spent = _plain(page.locator("#spent").inner_text())
    assert spent.startswith("Votre classement a été remplacé sur cet appareil par une copie randomisée"), (
        spent
    )
    assert "(ε = 1 pour le déplacement d'un élément, ε = 2 entre deux classements quelconques)" in spent


def test_numbers_are_written_the_languages_way(server, page_in):
    """ε = 0.5 is "0,5" in German; never "0.5" baked into the text."""
    body = {"title": "t", "items": ITEMS, "privacy": {"epsilon_default": 0.5, "epsilon_min": 0.5}}
    sid = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()["id"]
    page = page_in("de-DE")
    page.goto(f"{server.base}/s/{sid}")
    meaning = _plain(page.locator("#epsilon-meaning").inner_text())
    assert "(Datenschutzniveau ε = 0,5;" in meaning, meaning
    assert "mit Wahrscheinlichkeit 62 % so übermittelt" in meaning  # e^0.5/(1+e^0.5) = 62%
    # Chart axes too: ticks 0.5 apart are "0,5" on a German page, "0.5" on an English one.
    ticks = "async () => (await import('/static/charts.js')).niceTicks(-1.2, 0.7).ticks.map((t) => t.text)"
    assert page.evaluate("document.documentElement.lang") == "de"
    assert page.evaluate(ticks) == ["−1,5", "−1,0", "−0,5", "0,0", "0,5", "1,0"]
    page.evaluate("document.documentElement.lang = 'en'")
    assert page.evaluate(ticks) == ["−1.5", "−1.0", "−0.5", "0.0", "0.5", "1.0"]


def test_the_dashboard_sets_a_surveys_language(server, page_in):
    admin = page_in("en-US", width=1280, height=900, signed_in=server.base)
    admin.goto(server.base + "/")
    expect(admin.get_by_role("heading", name="Surveys")).to_be_visible()
    assert admin.evaluate("document.documentElement.lang") == "en"
    expect(admin.get_by_role("navigation", name="Main")).to_contain_text("API documentation")
    admin.get_by_role("link", name="New survey").click()
    admin.get_by_label("Title").fill("¿Qué importa más?")
    admin.get_by_label("Items, one per line").fill("\n".join(TRANSLATIONS["es"]))
    language = admin.get_by_label("Respondents' language")
    assert language.locator("option").all_inner_texts() == ["English", "Spanish", "German", "French"]
    language.select_option("es")
    admin.get_by_role("button", name="Create survey").click()
    link = admin.locator("#respondent-link").inner_text()
    sid = link.rsplit("/", 1)[1]
    assert httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()["language"] == "es"
    admin.goto(f"{server.base}/#/")
    expect(admin.get_by_role("columnheader", name="Created")).to_be_visible()
    # A browser that speaks no language the page has: the survey's, Spanish.
    page = page_in("ja-JP")
    page.goto(link)
    expect(page.get_by_role("heading", name="Tu privacidad")).to_be_visible()
    assert page.evaluate("document.documentElement.lang") == "es"


def test_the_results_in_german_on_the_respondent_page_and_the_results_page(server, page_in):
    body = {
        "title": "Stadt",
        "items": ITEMS,
        "privacy": {"epsilon_default": 2.0},
        "item_translations": TRANSLATIONS,
        "public_results": True,
        "results_on_finish": True,
    }
    sid = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()["id"]
    page = page_in("de-DE")
    page.goto(f"{server.base}/s/{sid}?n=2")
    page.get_by_role("button", name="Starten").click()
    for _ in range(2):
        page.locator("#choice-a").click()
    section = page.locator("#finish-results")
    expect(section.get_by_role("heading", name="Die bisherigen Ergebnisse")).to_be_visible()
    expect(section.get_by_role("heading", name="Rangfolge")).to_be_visible()
    assert sorted(section.locator(".result-label").all_inner_texts()) == sorted(TRANSLATIONS["de"])
    assert "2 Vergleiche" in section.locator("#finish-results-summary").inner_text()
    expect(section.locator("#finish-results-note")).to_contain_text("Es gibt noch nicht genug Daten")
    # The results page: the browser's German, or ?lang=.
    page.get_by_role("link", name="Die Ergebnisseite").click()
    expect(page.get_by_role("heading", name="Rangfolge")).to_be_visible()
    assert page.evaluate("document.documentElement.lang") == "de"
    assert sorted(page.locator(".result-label").all_inner_texts()) == sorted(TRANSLATIONS["de"])
    assert page.title() == "Stadt — Ergebnisse"
    # Two comparisons give no intervals: no track that would read as one, and the note says so
    # in German, without API parameters.
    expect(page.locator("#results-list svg.strip")).to_have_count(4)
    expect(page.locator("#results-list svg.strip line.track, #results-list rect.interval")).to_have_count(0)
    note = page.locator("#results-note")
    expect(note).to_contain_text("Es gibt noch nicht genug Daten")
    expect(note).to_contain_text("daher werden keine Intervalle gezeigt")
    assert "=" not in note.inner_text() and "interval" not in note.inner_text()
    expect(page.locator("#results-ranking-h + p.hint")).to_have_text(
        "Das Beliebteste zuerst. Ein Punkt ist der geschätzte Wert eines Elements."
    )
    page.goto(f"{server.base}/r/{sid}?lang=fr")
    expect(page.get_by_role("heading", name="Classement")).to_be_visible()
    assert sorted(page.locator(".result-label").all_inner_texts()) == sorted(TRANSLATIONS["fr"])
    expect(page.locator("#results-note")).to_contain_text("Il n'y a pas encore assez de données")


def test_the_respondent_switches_language_mid_survey(server, page_in):
    sid = _survey(server)
    page = page_in("es-ES")
    page.goto(f"{server.base}/s/{sid}?n=3")
    languages = page.get_by_role("navigation", name="Idiomas")
    # Each language named in itself; the page's own is marked, not a link.
    assert _plain(languages.inner_text()) == "English · Español · Deutsch · Français"
    assert languages.locator("[aria-current]").inner_text() == "Español"
    expect(languages.get_by_role("link")).to_have_count(3)
    page.get_by_role("button", name="Empezar").click()
    page.locator("#choice-a").click()
    expect(page.locator("#progress-text")).to_have_text("Pregunta 2 de 3")
    languages.get_by_role("link", name="Deutsch").click()
    # The same respondent (its token is in the tab's session storage), the next pair, in German.
    expect(page.locator("#progress-text")).to_have_text("Frage 2 von 3")
    assert page.evaluate("document.documentElement.lang") == "de"
    assert page.url.endswith(f"/s/{sid}?n=3&lang=de")
    shown = {page.locator("#choice-a").inner_text(), page.locator("#choice-b").inner_text()}
    assert shown <= set(TRANSLATIONS["de"]), shown
    expect(page.get_by_role("navigation", name="Sprachen").locator("[aria-current]")).to_have_text("Deutsch")


# -- the dashboard ------------------------------------------------------------------------

CATALOGS = Path(__file__).resolve().parents[2] / "static" / "i18n"
#: A placeholder in a message: {name}.
PLACEHOLDER = re.compile(r"\{\w+\}")


def _dashboard_catalog(code: str) -> dict[str, str]:
    return json.loads((CATALOGS / f"dashboard.{code}.json").read_text(encoding="utf-8"))


def _english_fragments(code: str) -> set[str]:
    """The English dashboard's words that the `code` dashboard must not show: each message
    that differs in `code`, cut at its placeholders, keeping the pieces with a word of three
    letters or more that the translation does not also hold (a piece between placeholders
    only when it has two words: one word alone, such as "intervals", is also the service's)."""
    english, other = _dashboard_catalog("en"), _dashboard_catalog(code)
    fragments = set()
    for key, text in english.items():
        if text == other[key]:
            continue
        for piece in PLACEHOLDER.split(text):
            piece = piece.strip(" .,:;()")
            whole = piece == text.strip(" .,:;()")
            if re.search(r"[A-Za-z]{3,}", piece) and piece not in other[key] and (whole or " " in piece):
                fragments.add(piece)
    return fragments


def _english_shown(page, fragments: set[str], own: list[str]) -> list[str]:
    """The fragments the page's main element shows, as whole words. The users' own words
    `own` (surveys' titles, items, suggestions) and what they type are not the dashboard's
    and are left out."""
    text = page.evaluate(
        """() => {
            const main = document.getElementById("app").cloneNode(true);
            main.querySelectorAll("textarea").forEach((el) => el.remove());
            return main.innerText;
        }"""
    )
    for label in sorted(own, key=len, reverse=True):
        text = text.replace(label, " ")
    return sorted(f for f in fragments if re.search(rf"(?<!\w){re.escape(f)}(?!\w)", text))


SURVEY_TITLES = ["Pairs with ideas", "Rank them", "Trusted", "To the goal", "Not yet answered"]
#: The federated rounds' sites (their names are the admin's words).
SITES = ["north-site", "south-site", "east-site"]


def _post(server, path: str, body: dict, headers: dict | None = None) -> dict:
    r = httpx2.post(f"{server.base}{path}", json=body, headers=headers if headers is not None else ADMIN)
    assert r.status_code in (200, 201, 202), r.text
    return r.json()


def _complete_round(server, sid: str) -> None:
    """A Borda round of SITES on the ranking survey `sid`, completed with what each site
    declared: north-site Mallows at ε = 1, south-site nothing, east-site Mallows at ε = 2."""
    opened = _post(server, f"/v1/surveys/{sid}/rounds", {"method": "borda", "sites": SITES})
    declarations = [
        {"privatization": "mallows", "epsilon": 1.0},
        {"privatization": "none"},
        {"privatization": "mallows", "epsilon": 2.0},
    ]
    headers = {x["name"]: {"Authorization": f"Bearer {x['token']}"} for x in opened["sites"]}
    private = {name: new_private_key() for name in SITES}
    for name in SITES:  # every site registers its key before any contributes
        body = {"public_key": public_key(private[name])}
        r = httpx2.put(f"{server.base}/v1/site/key", json=body, headers=headers[name])
        assert r.status_code == 200, r.text
    for name, declaration in zip(SITES, declarations, strict=True):
        view = httpx2.get(f"{server.base}/v1/site", headers=headers[name]).json()
        orders = np.array([[1, 3, 0, 2], [1, 0, 3, 2]])  # two local rankings of ITEMS
        body = {"masked": masked_message(view, private[name], orders), **declaration}
        _post(server, "/v1/site/contribution", body, headers[name])


def _dashboard_surveys(server) -> dict[str, str]:
    """One survey of each kind, with answers: pairwise (local, taking suggestions, one
    waiting for a moderator), ranking (with a completed federated round and one no site has
    contributed to), central (with a release), a goal survey, and a pairwise survey without
    answers."""
    privacy = {"epsilon_default": 2.0, "epsilon_max": 8.0, "respondent_budget": 48.0}
    pairwise = _post(
        server,
        "/v1/surveys",
        {
            "title": SURVEY_TITLES[0],
            "items": ITEMS,
            "privacy": privacy,
            "suggestions": {"enabled": True, "moderation": "before", "batch": 2},
        },
    )["id"]
    ranking = _post(server, "/v1/surveys", {"title": SURVEY_TITLES[1], "items": ITEMS, "kind": "ranking"})
    central = _post(
        server,
        "/v1/surveys",
        {
            "title": SURVEY_TITLES[2],
            "items": ITEMS,
            "privacy": {"model": "central", "total_budget": 2.0, "max_comparisons_per_respondent": 6},
        },
    )["id"]
    goal = _post(
        server,
        "/v1/surveys",
        {
            "title": SURVEY_TITLES[3],
            "items": ITEMS,
            "privacy": {"epsilon_default": 2, "respondent_budget": 12},
            "assignment": "adaptive",
            "goal": {"top_k": 1, "level": 0.9},
        },
    )["id"]
    with httpx2.Client(base_url=server.base, timeout=60) as api:
        for sid in (pairwise, central, goal):
            for _ in range(3):
                api_respondent(api, sid, count=6, epsilon=None if sid != pairwise else 8.0)
    for label in ("Night buses", "Bike lanes"):  # a batch of two: both published, pending
        token = _post(server, f"/v1/surveys/{pairwise}/respondents", {}, {})["token"]
        headers = {"Authorization": f"Bearer {token}"}
        _post(server, f"/v1/surveys/{pairwise}/suggestions", {"label": label}, headers)
    ids = {it["label"]: it["id"] for it in ranking["items"]}
    for _ in range(3):
        reg = _post(server, f"/v1/surveys/{ranking['id']}/respondents", {}, {})
        body = {"privatized": False, "ranking": [ids[x] for x in ITEMS]}
        _post(
            server,
            f"/v1/surveys/{ranking['id']}/responses",
            body,
            {"Authorization": f"Bearer {reg['token']}"},
        )
    body = {"method": "perturbed_mle", "unit": "individual", "epsilon": 1.0, "k": 3}
    _post(server, f"/v1/surveys/{central}/releases", body)
    _complete_round(server, ranking["id"])
    _post(server, f"/v1/surveys/{ranking['id']}/rounds", {"method": "lehmer", "sites": SITES, "phi": 0.5})
    empty = _post(server, "/v1/surveys", {"title": SURVEY_TITLES[4], "items": ITEMS})["id"]
    return {"pairwise": pairwise, "ranking": ranking["id"], "central": central, "goal": goal, "empty": empty}


#: Where each survey's view shows a sentence the service composes, and its German start.
SERVICE_SENTENCES = {
    "pairwise": [("#estimand", "Die Intervalle gelten für die BTL-Werte")],
    "ranking": [
        ("#ranking-box", "Keine Intervalle: Intervalle brauchen mindestens 30 Rangfolgen"),
        ("#rounds", "Die Standorte north-site und east-site haben mit dem Mallows-Mechanismus"),
        ("#rounds", "Dies sind die eigenen Angaben der Standorte"),
        ("#rounds", "Noch kein Standort hat beigetragen"),
        ("#rounds", "Gleichstände: Elemente mit gleichen Summen sind gleichauf"),
    ],
    "central": [],
    "goal": [("#goal-estimand", "Die Borda-Spitze (Platz 1), zertifiziert auf dem Niveau 90")],
    "empty": [("#pairwise-box", "Noch keine Intervalle: Es gibt noch keine Vergleiche.")],
}
#: The win probabilities, or the sentence saying why there are none: the live server
#: randomizes the API respondents' answers (OS CSPRNG), and a few answers can leave a
#: survey without intervals (a separated item, or a small-sample bias flagged).
WIN_PROBABILITIES = "#pairwise-box svg, #pairwise-box p"
#: What each survey's view shows once it has drawn its sections (the last ones drawn).
READY = {
    "pairwise": ["#suggestions li.suggestion", "#ranking-table", "#coverage-box svg", WIN_PROBABILITIES],
    "ranking": ["#ranking-box svg", ".round-consensus", ".round-privacy"],
    "central": ["#ledger tbody tr", "#embed"],
    "goal": ["#goal-state", "#ranking-table", WIN_PROBABILITIES],
    "empty": ["#no-data", "#pairwise-box p"],
}


def test_the_dashboard_in_german_shows_none_of_its_english(server, page_in):
    """A browser that speaks German: the shell, the list, each kind of survey (its sections,
    the moderation, the goal, the rounds, the ledger), the new-survey form, the keys and the
    sign-in form show no message of
    the English catalog that the German one words differently."""
    surveys = _dashboard_surveys(server)
    fragments = _english_fragments("de")
    assert {"Progress", "Who beats whom", "Close survey", "Sign in"} <= fragments  # the cut keeps words
    titles = [
        s["title"]
        for s in httpx2.get(f"{server.base}/v1/surveys?limit=1000", headers=ADMIN).json()["surveys"]
    ]
    own = [*titles, *ITEMS, *SITES, "Night buses", "Bike lanes"]  # this server's surveys (other tests' too)
    page = page_in("de-DE", width=1280, height=900, signed_in=server.base)
    page.goto(server.base + "/")
    expect(page.get_by_role("heading", name="Umfragen")).to_be_visible()
    assert page.evaluate("document.documentElement.lang") == "de"
    assert page.title() == "privrank — Dashboard"
    expect(page.get_by_role("navigation", name="Hauptmenü")).to_contain_text("Neue Umfrage")
    assert _english_shown(page, fragments, own) == []
    for kind, sid in surveys.items():
        page.goto(f"{server.base}/#/survey/{sid}")
        for ready in READY[kind]:
            expect(page.locator(ready).first).to_be_visible()
        expect(page.locator("#survey-status")).to_have_text("offen")
        if kind == "goal":
            page.get_by_role("button", name="Eingesparte Antworten schätzen").click()
            expect(page.locator("#goal-saving")).to_contain_text("Schätzung des Planers:", timeout=60_000)
        # The sentences the service composes, in German by their codes.
        for selector, german in SERVICE_SENTENCES[kind]:
            expect(page.locator(selector).first).to_contain_text(german)
        if kind == "central":  # the release's cost, explained in the ledger's cost cell's title
            cost = page.locator("#ledger tbody tr").first.locator("td.num").nth(1)
            expect(cost).to_have_attribute("title", re.compile(r"^ε = 1 schützt alles, was eine befragte"))
        assert _english_shown(page, fragments, own) == [], kind
    # The new-survey form with its goal fields showing, and the keys view with a key just minted.
    page.goto(server.base + "/#/new")
    page.get_by_label("Die obersten K Elemente zertifizieren").check()
    expect(page.locator("#goal-details")).to_be_visible()
    assert _english_shown(page, fragments, own) == [], "new"
    page.goto(server.base + "/#/keys")
    page.get_by_label("Rolle").select_option("integration")
    page.get_by_role("button", name="Schlüssel erstellen").click()
    expect(page.locator("#minted-use")).to_contain_text("Ihr anderer Dienst")
    expect(page.locator("#keys-table")).to_contain_text("Integration")
    assert _english_shown(page, fragments, own) == [], "keys"
    page.get_by_role("button", name="Abmelden").click()
    expect(page.get_by_role("heading", name="Anmelden")).to_be_visible()
    assert _english_shown(page, fragments, own) == []


def test_the_services_sentences_are_the_dashboards_own_by_code(server, page_in):
    """The sentences the service composes, shown by their codes in German in the branches a
    survey above does not reach; a code the dashboard does not know shows the service's
    English as it is, never nothing."""
    fragments = _english_fragments("de")
    page = page_in("de-DE", width=1280, height=900, signed_in=server.base)
    page.goto(server.base + "/")
    expect(page.get_by_role("heading", name="Umfragen")).to_be_visible()
    shown = page.evaluate(
        """async () => {
            const w = await import("/static/server-words.js");
            const site = (name, privatization, epsilon) =>
                ({ name, contributed: true, privatization, epsilon });
            const round = (sites, epsilon_max, statement = "") => ({
                method: "lehmer", parameters: { n_items: 4 }, sites,
                privacy: { epsilon_max, statement },
            });
            const reasons = ["too_few_respondents", "not_identified", "unstable_correction",
                "too_many_items", "unrandomized_answers", "not_requested"];
            const methods = ["cluster", "cluster_cr2", "cluster_bound", "cluster_bootstrap",
                "sandwich", "bootstrap"];
            const goals = [["borda_top_k", 2], ["borda_ranking", null], ["majority_top_k", 1],
                ["majority_ranking", null]];
            const goal = (estimand, top_k, estimand_text = "English") =>
                w.goalEstimandText({ estimand, top_k, level: 0.9, estimand_text });
            const waiting = { name: "b", contributed: false };
            const release = (method, unit, epsilon, cost, rho, cost_rho, delta) => ({
                method, unit, epsilon, cost, rho, cost_rho, delta, cost_explanation: "English",
            });
            const plan = (score_model, spread, gap) => ({
                score_model, spread, gap, n_respondents: 1200, pairs_per_respondent: 10,
                epsilon: [0.5, 1], k: 3, assumption: "English",
            });
            return {
                plans: [plan("uniform", 2, null), plan("even", null, 0.5), plan("pilot", null, null)]
                    .map(w.planAssumptionText),
                here: w.surveyPlanAssumptionText({
                    scores: "fit", level: 0.95, k: 3, tau: 0.25, tau_source: "estimated",
                    tau_interval: [0.1, 0.4], plan: { current_respondents: 7, current_comparisons: 42 },
                }),
                costs: [
                    release("noisy_counts", "edge", 0.5, 3, null, null, null),
                    release("noisy_counts", "individual", 0.5, 0.5, 0.01, 0.01, 1e-10),
                    release("noisy_counts", "edge", 0.5, 3, 0.01, 0.36, 1e-10),
                    release("perturbed_mle", "edge", 0.5, 3, null, 4.5, 1e-10),
                ].map(w.costText),
                all: w.roundPrivacyText(round([site("a", "mallows", 1), site("b", "mallows", 1)], 1)),
                perSite: w.roundPrivacyText(round([site("a", "mallows", 1), site("b", "mallows", 2)], 2)),
                unknown: w.roundPrivacyText(round([site("a", null, null), waiting], null)),
                tieBreak: w.tieBreakText({ method: "lehmer", result: { tie_break: "English" } }),
                reasons: reasons.map((reason) => w.reasonText({ reason, message: "English" })),
                estimands: methods.map((method) =>
                    w.estimandText({ method, n_clusters: 1234, estimand: "English" })),
                goals: goals.map(([estimand, top_k]) => goal(estimand, top_k)),
                newer: [
                    w.reasonText({ reason: "a_newer_reason", message: "A newer sentence." }),
                    w.reasonText({ reason: "a sentence of an older service" }),
                    w.estimandText({ method: "a_newer_method", estimand: "a newer estimand" }),
                    goal("a_newer_goal", 2, "A newer goal."),
                    w.tieBreakText({ method: "a_newer_method", result: { tie_break: "a newer tie-break" } }),
                    w.roundPrivacyText(round([site("a", "a_newer_mechanism", 1)], null, "a newer statement")),
                    w.costText({ unit: "a_newer_unit", epsilon: 1, cost_explanation: "a newer cost" }),
                    w.planAssumptionText({ score_model: "a_newer_model", assumption: "a newer assumption" }),
                    w.surveyPlanAssumptionText({ scores: "a_newer", plan: { assumption: "a newer plan" } }),
                ],
            };
        }"""
    )
    assert (
        "bei ε ≤ 1 privatisiert (ε-Rangfolgen-DP" in shown["all"]
        and "εm/2 = 2 bei m = 4 Elementen" in shown["all"]
    ), shown
    assert "bei ε ≤ 2 privatisiert (a ε = 1, b ε = 2)" in shown["perSite"], shown
    assert shown["unknown"].startswith("Standort a hat beigetragen, bevor"), shown
    assert "noch nicht angegeben (kein Beitrag): b" in shown["unknown"], shown
    assert shown["tieBreak"].startswith("Der entschlüsselte Konsens"), shown
    assert "1.234 Befragte" in shown["estimands"][0], shown  # a number in German
    assert shown["goals"][0].startswith(
        "Die ersten 2 nach Borda, zertifiziert auf dem Niveau 90\u00a0%: die 2 Elemente"
    )
    assert shown["goals"][2].startswith(
        "Die Mehrheitsspitze (Platz 1), zertifiziert auf dem Niveau 90\u00a0%: ein Element"
    )
    texts = [shown["all"], shown["perSite"], shown["unknown"], shown["tieBreak"]]
    texts += shown["reasons"] + shown["estimands"] + shown["goals"] + shown["costs"] + shown["plans"]
    texts.append(shown["here"])
    assert "die aktuellen 7 Befragten behalten ihre 42 beantworteten Paare" in shown["here"], shown["here"]
    assert "im Mittel 6,0" in shown["here"] and "τ = 0,25" in shown["here"], shown["here"]
    assert "Intervall zu 95\u00a0% von 0,10 bis 0,40" in shown["here"], shown["here"]
    uniform, even, pilot = shown["plans"]
    assert "zufällig zwischen −2 und 2 gezogen" in uniform, uniform
    assert "in etwa 98\u00a0% der Fälle" in uniform, uniform  # σ(2·2)
    assert "1.200 Befragte beantworten je 10 verschiedene Paare bei ε = 0,5 oder 1" in uniform, uniform
    assert "um 12 Prozentpunkte" in even and "gleich den angegebenen Pilotwerten" in pilot  # σ(0.5) − ½
    edge, individual_rho, edge_rho, pure = shown["costs"]
    assert "bis zu 6 Antworten" in edge and "6 × 0,5 = 3" in edge and edge.endswith("bei ε = 3."), edge
    assert "ρ = 0,01 des zCDP-Budgets" in individual_rho and "(0,5, 1e-10)-DP" in individual_rho
    assert "ρ = 6² × 0,01 = 0,36" in edge_rho, edge_rho
    assert "(ε = 0,5 je Vergleich) ist ρ = ε²/2 = 4,5-zCDP" in pure, pure
    for text in texts:
        assert "English" not in text and "{" not in text, text
        assert [f for f in fragments if re.search(rf"(?<!\w){re.escape(f)}(?!\w)", text)] == [], text
    assert shown["newer"] == [
        "A newer sentence.",
        "a sentence of an older service",
        "a newer estimand",
        "A newer goal.",
        "a newer tie-break",
        "a newer statement",
        "a newer cost",
        "a newer assumption",
        "a newer plan",
    ]


def test_in_english_the_dashboards_words_are_the_services(server, page_in):
    """On an English dashboard the sentences worded from codes are the service's own: what a
    goal certifies, what the intervals are for and what each planner assumes (the planners
    ending in a pointer to the dashboard rather than to an API path)."""
    sid = _post(
        server,
        "/v1/surveys",
        {
            "title": "Worded alike",
            "items": ITEMS,
            "privacy": {"epsilon_default": 2, "respondent_budget": 12},
            "assignment": "adaptive",
            "goal": {"top_k": 2, "level": 0.9},
        },
    )["id"]
    with httpx2.Client(base_url=server.base, timeout=60) as api:
        for _ in range(4):
            api_respondent(api, sid, count=6)
    survey = httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()
    ranking = httpx2.get(f"{server.base}/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    query = "items=5&respondents=30&pairs_per_respondent=4&epsilon=1&k=2&replications=20"
    design = httpx2.get(f"{server.base}/v1/plan?{query}", headers=ADMIN, timeout=120).json()["plan"]
    here = httpx2.get(
        f"{server.base}/v1/surveys/{sid}/plan?k=2&respondents=2&replications=20", headers=ADMIN, timeout=120
    ).json()
    assert here["plan"]["current_respondents"] == 4, here
    page = page_in("en-US", width=1280, height=900, signed_in=server.base)
    page.goto(server.base + "/")
    expect(page.get_by_role("heading", name="Surveys")).to_be_visible()
    shown = page.evaluate(
        """async ([goal, uncertainty, design, here]) => {
            const w = await import("/static/server-words.js");
            return [w.goalEstimandText(goal), w.estimandText(uncertainty), w.planAssumptionText(design),
                w.surveyPlanAssumptionText(here)];
        }""",
        [survey["goal"], ranking["uncertainty"], design, here],
    )
    assert shown[0] == survey["goal"]["estimand_text"]
    if ranking["uncertainty"]["available"]:
        assert shown[1] == ranking["uncertainty"]["estimand"]
    api_path = " Once answers arrive, plan from the survey itself (GET /v1/surveys/{id}/plan)."
    assert design["assumption"].endswith(api_path), design["assumption"]
    assert (
        shown[2]
        == design["assumption"].removesuffix(api_path)
        + " Once answers arrive, plan from the survey's own page."
    )
    api_field = ", as GET …/ranking reports in top_k_certain."
    assert here["plan"]["assumption"].endswith(api_field), here["plan"]["assumption"]
    assert shown[3] == here["plan"]["assumption"].removesuffix(api_field) + "."


def test_the_language_picker_switches_the_dashboard_and_is_remembered(server, page_in):
    """The header's picker: the current view is drawn again in the language picked, the
    choice outlives a reload and a new tab, and the browser's language no longer decides."""
    sid = _post(server, "/v1/surveys", {"title": "Picked", "items": ITEMS})["id"]
    page = page_in("en-US", width=1280, height=900, signed_in=server.base)
    page.goto(f"{server.base}/#/survey/{sid}")
    expect(page.get_by_role("heading", name="Progress")).to_be_visible()
    picker = page.get_by_label("Language", exact=True)
    assert picker.locator("option").all_inner_texts() == ["English", "Español", "Deutsch", "Français"]
    picker.select_option("fr")
    expect(page.get_by_role("heading", name="Progression")).to_be_visible()
    expect(page.get_by_role("button", name="Clôturer l'enquête")).to_be_visible()
    assert page.evaluate("document.documentElement.lang") == "fr"
    assert page.title() == "privrank — tableau de bord"
    expect(page.get_by_role("link", name="Enquêtes", exact=True)).to_be_visible()
    page.reload()
    expect(page.get_by_role("heading", name="Progression")).to_be_visible()
    assert page.get_by_label("Langue", exact=True).input_value() == "fr"
    other = page.context.new_page()
    other.goto(server.base + "/")
    expect(other.get_by_role("heading", name="Enquêtes")).to_be_visible()
    assert other.evaluate("document.documentElement.lang") == "fr"
    page.get_by_label("Langue", exact=True).select_option("es")
    expect(page.get_by_role("heading", name="Progreso")).to_be_visible()
    page.get_by_role("button", name="Cerrar sesión").click()
    expect(page.get_by_role("heading", name="Iniciar sesión")).to_be_visible()
