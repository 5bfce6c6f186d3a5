"""The Keys view keeps a key it has just minted on screen — the one time the key is
shown — for as long as the admin stays on the view, whatever the view draws meanwhile
(a failed reload of the list, another language); leaving the view takes it away, and
the back button does not bring it back."""

from __future__ import annotations

from playwright.sync_api import expect


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
