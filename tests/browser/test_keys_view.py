"""The Keys view keeps a key it has just minted on screen — the one time the key is
shown — for as long as the admin stays on the view, whatever the view draws meanwhile
(a failed reload of the list, another language); leaving the view takes it away, and
the back button does not bring it back. Revoking the key one is signed in with is said
to be that, before and after."""

from __future__ import annotations

import httpx2
from playwright.sync_api import expect

from app.core.db.session import make_engine, make_session_factory
from app.keys.service import rotate_admin_key
from tests.helpers.browser import ADMIN, ADMIN_KEY
from tests.helpers.live import LiveServer


def _mint(page, label: str) -> str:
    page.locator("#key-label").fill(label)
    page.locator("#mint-btn").click()
    expect(page.locator("#minted-key")).to_be_visible()
    return page.locator("#minted-key").input_value()


def test_a_failed_reload_of_the_list_leaves_the_minted_key_shown(server, new_page, console):
    """The key is minted (201); the list's reload after it is answered 503: the key stays
    in its field and the reload's error is shown above the list."""
    page = new_page(signed_in=server.base)
    page.goto(server.base + "/#/keys")
    expect(page.locator("#keys-table")).to_be_visible()
    console.allow(503)

    def refuse_listing(route):
        if route.request.method == "GET":
            route.fulfill(status=503, json={"detail": "busy; retry later"})
        else:
            route.continue_()

    page.route("**/v1/keys?*", refuse_listing)
    key = _mint(page, "reload fails")
    expect(page.locator("#keys-status")).to_contain_text("busy; retry later")
    expect(page.locator("#minted-key")).to_have_value(key)
    assert key.startswith("key_")


def test_the_minted_key_stays_through_a_language_switch_and_goes_with_the_view(server, new_page):
    """Picking another language draws the view again: the key is still in its field, in
    the new language's words; once the admin leaves the view it is gone for good."""
    page = new_page(signed_in=server.base)
    page.goto(server.base + "/#/keys")
    key = _mint(page, "switching")
    page.locator("#ui-language").select_option("de")
    expect(page.get_by_role("heading", name="Schlüssel", exact=True)).to_be_visible()
    expect(page.locator("#minted-key")).to_have_value(key)
    expect(page.locator("#minted-hint")).to_contain_text("nur dieses eine Mal")
    page.locator("#ui-language").select_option("en")
    expect(page.locator("#minted-key")).to_have_value(key)
    # Leaving the view and coming back with the back button: the key is not shown again.
    page.goto(server.base + "/#/")
    expect(page.locator("#minted-key")).to_have_count(0)
    page.go_back()
    expect(page.locator("#keys-table")).to_be_visible()
    expect(page.locator("#minted-key")).to_have_count(0)
    assert key not in page.content()


def test_revoking_the_signed_in_key_says_so_before_and_after(tmp_path, new_page, dialogs):
    """An admin signed in with a database admin key (``privrank admin-key rotate``) revokes
    that very key: the confirmation says it is the key in use, and the sign-in form that
    follows says why it is there (``PRIVRANK_ADMIN_KEY`` is set, so the revocation is allowed)."""
    url = f"sqlite:///{tmp_path}/own.db"
    server = LiveServer({"DATABASE_URL": url, "PRIVRANK_ADMIN_KEY": ADMIN_KEY})
    try:
        engine = make_engine(url)
        with make_session_factory(engine)() as session:
            key_id, key, _ = rotate_admin_key(session)
        engine.dispose()
        page = new_page()
        page.goto(server.base + "/")
        page.get_by_label("API key").fill(key)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("link", name="Keys").click()
        page.locator(f'tr[data-key="{key_id}"]').get_by_role("button", name="Revoke").click()
        expect(page.locator("#signin-msg")).to_have_text(
            "You revoked the key you were signed in with. Sign in with another admin key."
        )
        expect(page.get_by_role("link", name="Keys")).to_be_hidden()
        assert dialogs and dialogs[-1].startswith("This is the key you are signed in with.")
        assert page.evaluate("sessionStorage.getItem('privrank.key')") is None
        keys = httpx2.get(server.base + "/v1/keys", headers=ADMIN).json()["keys"]
        assert next(k for k in keys if k["id"] == key_id)["revoked_at"] is not None
    finally:
        server.stop()


#: A label that turns the text after it right to left (U+202E RIGHT-TO-LEFT OVERRIDE).
RTL = "\u202eevil"


def test_a_keys_label_cannot_reorder_the_sentences_it_is_written_into(server, new_page, dialogs):
    """A label with a right-to-left override is isolated in the confirmation (and the
    button's name), so the words after it keep their order; a blank label is named by the
    key's id."""
    made = {
        label: httpx2.post(server.base + "/v1/keys", json={"label": label}, headers=ADMIN).json()["id"]
        for label in (RTL, "   ")
    }
    page = new_page(signed_in=server.base)
    page.goto(server.base + "/#/keys")
    blank = page.locator(f'tr[data-key="{made["   "]}"]')
    expect(blank.get_by_role("button", name=f"Revoke the key \u2068{made['   ']}\u2069")).to_be_visible()
    expect(blank.locator("td").nth(2)).to_have_text("–")
    rtl = page.locator(f'tr[data-key="{made[RTL]}"]')
    rtl.get_by_role("button").click()
    expect(rtl).to_contain_text("revoked")
    assert dialogs[-1] == (
        "Revoke the key \u2068\u202eevil\u2069? Whoever holds it loses access at once; this cannot be undone."
    )


def test_a_hand_edited_show_count_still_lists_the_keys(server, new_page):
    """#/keys?show=N with N negative, fractional or not a number: the list is shown (100
    keys, or N rounded down), never the service's 422 about ``limit`` in place of the view."""
    for _ in range(3):
        httpx2.post(server.base + "/v1/keys", json={"label": "counted"}, headers=ADMIN)
    page = new_page(signed_in=server.base)
    for show, rows in (("-5", None), ("2.5", 2), ("abc", None), ("1e9", None)):
        page.goto(f"{server.base}/#/keys?show={show}")
        page.reload()
        expect(page.locator("#keys-table")).to_be_visible()
        expect(page.locator("#app .error")).to_have_count(0)
        if rows is not None:
            expect(page.locator("#keys-table tbody tr")).to_have_count(rows)
