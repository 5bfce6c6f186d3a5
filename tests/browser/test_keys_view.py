"""The Keys view keeps a key it has just minted on screen — the one time the key is
shown — whatever the reload of the list after it answers."""

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
