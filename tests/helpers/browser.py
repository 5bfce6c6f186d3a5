"""Browser-test helpers: the admin key of the test server, Chromium's path and flags,
signing in to the dashboard, the pages' seeded randomness, and respondents answering
through the page or through the API."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import httpx2
import numpy as np
from playwright.sync_api import expect

from app.stats.mechanisms import flip_probability

ADMIN_KEY = "browser-admin-key"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Network-level messages Chromium logs for a non-2xx fetch; a test that expects such an
# answer says so with console.allow(status).
FAILED_LOAD = re.compile(r"Failed to load resource: the server responded with a status of (\d+)")


#: The browsers the tests drive, first found first: Chromium's headless shell (Debian's
#: ``chromium-headless-shell``: the same Blink without the desktop browser around it, so
#: each page costs less CPU), then the full browser.
CHROMIUM_NAMES = ("chromium-headless-shell", "chromium", "chromium-browser")


def chromium_path() -> str | None:
    """The Chromium to drive: ``PRIVRANK_CHROMIUM`` if set, else the first of
    :data:`CHROMIUM_NAMES` on the PATH."""
    path = os.environ.get("PRIVRANK_CHROMIUM") or next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
    return path if path and Path(path).exists() else None


ITEMS = ["Housing", "Transit", "Parks", "Schools"]
TRUTH = ["Transit", "Schools", "Housing", "Parks"]  # the respondents' true preference
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


# -- the pages' randomness -------------------------------------------------------------

#: An init script that replaces the page's ``crypto.getRandomValues`` (where privrank.js
#: draws every random bit: randomized response, the Mallows mechanism, shuffles,
#: Idempotency-Keys) by xoshiro128** seeded with ``__SEED__`` (four 32-bit words) mixed
#: with the number of the document in its tab (counted in the tab's sessionStorage): a
#: reload or another page of the tab draws on, never the first document's draws again
#: (which would repeat its Idempotency-Keys). The calls are counted in
#: ``window.__randomValuesCalls``: a test reads that counter to check that the page's
#: draws went through it. Arrays the real function refuses (not an integer typed array,
#: or more than 65,536 bytes) go to it, so they fail as they would without the script.
SEEDED_RANDOM_JS = """(() => {
  const real = crypto.getRandomValues.bind(crypto);
  let documents = 0;
  try {
    documents = Number(sessionStorage.getItem("privrank.test.documents") || 0);
    sessionStorage.setItem("privrank.test.documents", String(documents + 1));
  } catch {
    // No sessionStorage (an opaque origin): the document's own stream.
  }
  const fmix = (x) => {
    x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
    x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
    return (x ^ (x >>> 16)) >>> 0;
  };
  let [s0, s1, s2, s3] = __SEED__.map((w, k) => fmix(w ^ fmix(documents * 4 + k + 1)));
  if ((s0 | s1 | s2 | s3) === 0) s0 = 1;
  const rotl = (x, k) => (x << k) | (x >>> (32 - k));
  const next = () => {
    const out = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0;
    const t = s1 << 9;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = rotl(s3, 11);
    return out;
  };
  let calls = 0;
  const integerArrays = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array,
    Int32Array, Uint32Array, BigInt64Array, BigUint64Array];
  function getRandomValues(array) {
    if (!integerArrays.some((T) => array instanceof T) || array.byteLength > 65536) return real(array);
    calls += 1;
    if (array instanceof Uint32Array) {
      for (let k = 0; k < array.length; k++) array[k] = next();
      return array;
    }
    const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
    for (let k = 0; k < bytes.length; k += 4) {
      const w = next();
      for (let b = 0; b < 4 && k + b < bytes.length; b++) bytes[k + b] = (w >>> (8 * b)) & 255;
    }
    return array;
  }
  Object.defineProperty(crypto, "getRandomValues", { value: getRandomValues, configurable: true });
  Object.defineProperty(window, "__randomValuesCalls", { get: () => calls, configurable: true });
})();"""


def seeded_random_script(label: str) -> str:
    """:data:`SEEDED_RANDOM_JS` seeded by ``label`` (a test's id and which of its browser
    contexts): the same draws on every run, different ones for every context (and every
    document of a tab)."""
    digest = hashlib.sha256(label.encode()).digest()
    words = [int.from_bytes(digest[k : k + 4], "little") for k in range(0, 16, 4)]
    return SEEDED_RANDOM_JS.replace("__SEED__", json.dumps(words))


def random_values_calls(page) -> int:
    """How many times the page called ``crypto.getRandomValues`` (seeded contexts only)."""
    return page.evaluate("() => window.__randomValuesCalls")


# -- the dashboard ---------------------------------------------------------------------


def sign_in(page, base: str) -> None:
    """The dashboard's sign-in form, sent with the admin key."""
    page.goto(base + "/")
    page.get_by_label("API key").fill(ADMIN_KEY)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Surveys")).to_be_visible()


def signed_in_script(base: str, key: str = ADMIN_KEY) -> str:
    """An init script that puts ``key`` where the sign-in form puts it (the tab's
    sessionStorage, on ``base``'s origin) when the tab first opens a page there: the
    dashboard opens signed in. Signing out stays signed out (only the first page of the
    tab is given the key)."""
    origin = json.dumps(base.rstrip("/"))
    return f"""(() => {{
  if (location.origin !== {origin} || sessionStorage.getItem("privrank.test.signed-in")) return;
  sessionStorage.setItem("privrank.test.signed-in", "1");
  sessionStorage.setItem("privrank.key", {json.dumps(key)});
}})();"""


# -- respondents -----------------------------------------------------------------------


def answer_pairs(page, link: str, n: int) -> None:
    """One respondent: open the page, start at the default ε, answer n pairs truthfully
    (each a click on the page's button for the item TRUTH puts first)."""
    page.goto(f"{link}?n={n}")
    expect(page.get_by_role("heading", name="Your privacy")).to_be_visible()
    page.get_by_role("button", name="Start").click()
    for k in range(n):
        expect(page.locator("#progress-text")).to_have_text(f"Question {k + 1} of {n}")
        a, b = shown_pair(page)
        page.locator("#choice-a" if TRUTH.index(a) < TRUTH.index(b) else "#choice-b").click()
    expect(page.locator("#thanks")).to_be_visible()


def shown_pair(page) -> tuple[str, str]:
    """The labels of the pair the respondent page shows (one round trip)."""
    a, b = page.evaluate(
        "() => [document.querySelector('#choice-a').innerText, document.querySelector('#choice-b').innerText]"
    )
    return a, b


def truthful_winner(pair: dict) -> str:
    """The item of a served pair (``GET …/pairs``) that TRUTH puts first."""
    return pair["a"] if TRUTH.index(pair["a_label"]) < TRUTH.index(pair["b_label"]) else pair["b"]


def api_respondent(
    client: httpx2.Client,
    sid: str,
    count: int = 10,
    epsilon: float | None = None,
    rng: np.random.Generator | None = None,
) -> int:
    """One respondent through the API: registers (at ``epsilon``, else the survey's
    default), takes up to ``count`` pairs (with their tickets) and answers each as TRUTH
    says. Without ``rng`` the answers are sent true (``privatized: false``): a local
    survey's server randomizes them (OS CSPRNG), a central survey keeps them. With
    ``rng`` (a seeded generator) they are randomized here, by randomized response at
    ``epsilon``, and sent as ``privatized: true``: what is stored is the same on every
    run, given the pairs served (randomized in the order of their labels, whichever label
    the server put first).

    ``client`` has the server's base URL. Returns the number of answers stored: 0 when
    the survey is closed or has no pair left for the respondent."""
    reg = client.post(f"/v1/surveys/{sid}/respondents", json={} if epsilon is None else {"epsilon": epsilon})
    if reg.status_code == 409:  # closed
        return 0
    assert reg.status_code == 201, reg.text
    headers = {"Authorization": f"Bearer {reg.json()['token']}"}
    pairs = client.get(f"/v1/surveys/{sid}/pairs?count={count}", headers=headers).json()["pairs"]
    if not pairs:
        return 0
    pairs.sort(key=lambda p: sorted((p["a_label"], p["b_label"])))  # whichever way round they came
    winners = [truthful_winner(p) for p in pairs]
    body: dict = {"privatized": False}
    if rng is not None:
        assert epsilon is not None, "randomized here: at the respondent's ε"
        flips = rng.random(len(pairs)) < float(flip_probability(epsilon))
        winners = [
            (p["a"] if w == p["b"] else p["b"]) if flip else w
            for p, w, flip in zip(pairs, winners, flips, strict=True)
        ]
        body = {"privatized": True, "epsilon": epsilon}
    body["comparisons"] = [
        {"a": p["a"], "b": p["b"], "winner": w, **({"ticket": p["ticket"]} if p.get("ticket") else {})}
        for p, w in zip(pairs, winners, strict=True)
    ]
    r = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers)
    if r.status_code == 409:  # closed meanwhile
        return 0
    assert r.status_code == 201, r.text
    return len(pairs)
