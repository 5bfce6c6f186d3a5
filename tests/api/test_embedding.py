"""Embedding (app.surveys.embedding): a survey's embed origins, checked and stored, become the
``frame-ancestors`` of its respondent and results pages; every other page stays unframeable.
And /docs and /redoc come from the bundled Swagger UI and ReDoc, with nothing from another host."""

from __future__ import annotations

import re

import pytest

from tests.helpers.api import ADMIN, analyst_headers, create_survey

SITE = "https://www.example.org"


def _directives(policy: str) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}


def _survey_with(client, origins) -> dict:
    r = client.post(
        "/v1/surveys",
        json={"title": "Embedded", "items": ["a", "b", "c"], "embed_origins": origins},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    return r.json()


def test_origins_are_stored_normalized_and_returned(client):
    s = _survey_with(
        client,
        [
            "HTTPS://WWW.Example.ORG/",
            "https://www.example.org:443",  # the same origin: kept once
            "http://localhost:8080",
            "https://*.example.net",
            "https://bücher.example",
            "http://127.0.0.1:5000",
            "https://*.example.co.uk",  # registered under a public suffix: allowed
            "https://*.alice.github.io",
            "https://co.uk",  # a public suffix as one exact origin lets in one site only
            "https://*.bucket.s3.amazonaws.com",  # one customer's name under a shared host
            "https://*.alice.wordpress.com",
        ],
    )
    expected = [
        SITE,
        "http://localhost:8080",
        "https://*.example.net",
        "https://xn--bcher-kva.example",
        "http://127.0.0.1:5000",
        "https://*.example.co.uk",
        "https://*.alice.github.io",
        "https://co.uk",
        "https://*.bucket.s3.amazonaws.com",
        "https://*.alice.wordpress.com",
    ]
    assert s["embed_origins"] == expected
    assert (
        client.get(f"/v1/surveys/{s['id']}", headers=analyst_headers(client)).json()["embed_origins"]
        == expected
    )
    listed = client.get("/v1/surveys?limit=1000", headers=ADMIN).json()["surveys"]
    assert next(x for x in listed if x["id"] == s["id"])["embed_origins"] == expected
    assert create_survey(client)["embed_origins"] == []


BAD = [
    "*",
    "'none'",
    "'self'",
    "data:",
    "https:",
    "https://",
    "https://*",
    "https://*.com",
    "https://*.co.uk",  # a public suffix: anyone registers under it
    "https://*.github.io",  # the list's private section: every user's site
    "https://*.amazonaws.com",  # public suffixes below it (s3.amazonaws.com …): every customer's
    "https://*.compute.amazonaws.com",  # the list's wildcard rule *.compute.amazonaws.com
    "https://*.s3.amazonaws.com",
    "https://*.AmazonAWS.com.",
    "https://*.wordpress.com",  # not on the list, but every blog is a subdomain (SHARED_HOSTS)
    "https://*.gov.uk",  # service.gov.uk and others on the private section: many departments
    "https://*.xn--p1ai",  # .рф, as punycode
    "https://*.рф",  # and as written
    "https://*.localhost",  # under no known top-level domain: treated as public
    "https://a.*.example.org",
    "*.example.org",
    "example.org",
    "//example.org",
    "ftp://example.org",
    "javascript://example.org",
    "https://example.org/path",
    "https://example.org?q=1",
    "https://example.org#top",
    "https://user:pw@example.org",
    "https://exa mple.org",
    " https://example.org",
    "https://example.org;script-src *",
    "https://example.org; frame-ancestors *",
    "https://a.example,https://b.example",
    "https://example.org'",
    'https://"example".org',
    "https://example.org\r\nX-Evil: 1",
    "https://example.org:0",
    "https://example.org:65536",
    "https://example.org:*",
    "https://example.org:\u00b2",  # a superscript two: isdigit() but not int() (a 500 if trusted)
    "https://example.org:\u2460",  # a circled one: the same
    "https://fa\u00df.example",  # IDNA 2003 makes it fass.example, browsers xn--fa-hia.example
    "https://\u03c2.example",  # final sigma: the same
    "https://a\u200db.example",  # a joiner, dropped by IDNA 2003
    "https://[::1]:8080",
    "https://300.1.1.1",
    "https://-bad-.example",
    "https://a..example",
    "https://\u0080x.example",
    "https://x\ufffd.example",
    "https://" + "a" * 300 + ".example",
    "",
]


@pytest.mark.parametrize("origin", BAD)
def test_a_bad_origin_is_refused_on_create_and_stores_nothing(client, unchanged, origin):
    body = {"title": "Embedded", "items": ["a", "b"], "embed_origins": [SITE, origin]}
    with unchanged():
        r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 422, (origin, r.text)
    assert "detail" in r.json()


def test_bad_origins_are_refused_on_patch_and_change_nothing(client, unchanged):
    s = _survey_with(client, [SITE])
    with unchanged():  # one digest over all of them: any stored change shows at the end
        for origin in BAD:
            r = client.patch(f"/v1/surveys/{s['id']}", json={"embed_origins": [origin]}, headers=ADMIN)
            assert r.status_code == 422, (origin, r.text)
    assert client.get(f"/v1/surveys/{s['id']}", headers=ADMIN).json()["embed_origins"] == [SITE]


def test_at_most_twenty_origins_and_only_strings(client, unchanged):
    many = [f"https://site{k}.example" for k in range(21)]
    with unchanged():
        r = client.post(
            "/v1/surveys", json={"title": "t", "items": ["a", "b"], "embed_origins": many}, headers=ADMIN
        )
        assert r.status_code == 422
        r = client.post(
            "/v1/surveys", json={"title": "t", "items": ["a", "b"], "embed_origins": SITE}, headers=ADMIN
        )
        assert r.status_code == 422
        r = client.post(
            "/v1/surveys", json={"title": "t", "items": ["a", "b"], "embed_origins": [7]}, headers=ADMIN
        )
        assert r.status_code == 422
    assert len(_survey_with(client, many[:20])["embed_origins"]) == 20


def test_the_respondent_page_may_be_framed_only_by_the_surveys_origins(client):
    plain = create_survey(client)
    for path in (f"/s/{plain['id']}", f"/r/{plain['id']}", "/s/srv_aaaaaaaaaaaaaaaa", "/s/not-a-survey", "/"):
        r = client.get(path)
        assert r.status_code == 200, path
        assert _directives(r.headers["content-security-policy"])["frame-ancestors"] == ["'none'"], path
        assert r.headers["x-frame-options"] == "DENY", path
    s = _survey_with(client, [SITE, "https://*.example.net"])
    for path in (f"/s/{s['id']}", f"/r/{s['id']}", f"/s/{s['id']}?n=4"):
        r = client.get(path)
        policy = _directives(r.headers["content-security-policy"])
        assert policy["frame-ancestors"] == ["'self'", SITE, "https://*.example.net"], path
        # The rest of the policy is the pages' own: no inline code, nothing from elsewhere.
        assert policy["script-src"] == ["'self'"] and policy["connect-src"] == ["'self'"]
        assert "x-frame-options" not in r.headers, path
        assert r.headers["referrer-policy"] == "no-referrer"
        assert not any(h.startswith("cross-origin-") for h in r.headers), path
    # Everything else stays unframeable, whatever the survey allows.
    for path in ("/", "/index.html", f"/s/{s['id']}/../../", "/docs", "/redoc"):
        r = client.get(path)
        assert _directives(r.headers["content-security-policy"])["frame-ancestors"] == ["'none'"], path
        assert r.headers["x-frame-options"] == "DENY", path


def test_a_head_request_gets_the_pages_headers(client):
    """HEAD (link checkers, monitors) answers as GET does, without the body, not the file
    server's 404, as if the survey's page did not exist."""
    plain, s = create_survey(client), _survey_with(client, [SITE])
    for sid in (plain["id"], s["id"]):
        for page in ("s", "r"):
            got, head = client.get(f"/{page}/{sid}"), client.head(f"/{page}/{sid}")
            assert head.status_code == 200 and head.content == b"", (page, sid)
            for name in ("content-security-policy", "x-frame-options", "content-type", "referrer-policy"):
                assert head.headers.get(name) == got.headers.get(name), (page, sid, name)
    assert "frame-ancestors 'self' " + SITE in client.head(f"/s/{s['id']}").headers["content-security-policy"]


def test_a_patch_changes_the_frame_ancestors_at_once(client):
    s = _survey_with(client, [SITE])
    page = f"/s/{s['id']}"
    assert SITE in client.get(page).headers["content-security-policy"]  # and cached
    r = client.patch(
        f"/v1/surveys/{s['id']}", json={"embed_origins": ["https://other.example"]}, headers=ADMIN
    )
    assert r.status_code == 200 and r.json()["embed_origins"] == ["https://other.example"]
    fa = _directives(client.get(page).headers["content-security-policy"])["frame-ancestors"]
    assert fa == ["'self'", "https://other.example"]
    # Absent: unchanged.
    assert client.patch(f"/v1/surveys/{s['id']}", json={"title": "Renamed"}, headers=ADMIN).json()[
        "embed_origins"
    ] == ["https://other.example"]
    for cleared in ([], None):
        client.patch(f"/v1/surveys/{s['id']}", json={"embed_origins": [SITE]}, headers=ADMIN)
        r = client.patch(f"/v1/surveys/{s['id']}", json={"embed_origins": cleared}, headers=ADMIN)
        assert r.status_code == 200 and r.json()["embed_origins"] == []
        headers = client.get(page).headers
        assert _directives(headers["content-security-policy"])["frame-ancestors"] == ["'none'"]
        assert headers["x-frame-options"] == "DENY"


def test_only_admins_set_origins(client):
    s = _survey_with(client, [SITE])
    r = client.patch(
        f"/v1/surveys/{s['id']}",
        json={"embed_origins": ["https://evil.example"]},
        headers=analyst_headers(client),
    )
    assert r.status_code == 403
    assert client.get(f"/v1/surveys/{s['id']}", headers=ADMIN).json()["embed_origins"] == [SITE]


def test_another_process_sees_a_change_within_the_cache_time(app, client, db):
    """A change made elsewhere (another worker) is seen once the cached entry is older than
    its time to live."""
    from app.core.db.models import Survey

    s = _survey_with(client, [SITE])
    page = f"/s/{s['id']}"
    assert SITE in client.get(page).headers["content-security-policy"]
    row = db.get(Survey, s["id"])
    row.embed_origins = ["https://elsewhere.example"]
    db.commit()
    cache = app.state.embed_origins
    assert SITE in client.get(page).headers["content-security-policy"]  # still cached
    original = cache.ttl
    cache.ttl = 0.0
    try:
        assert "https://elsewhere.example" in client.get(page).headers["content-security-policy"]
    finally:
        cache.ttl = original
    assert original <= 5


# -- /docs and /redoc from the bundled assets ----------------------------------------------------

_REFS = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_the_docs_load_nothing_from_another_host(client, path):
    r = client.get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    refs = _REFS.findall(r.text)
    assert all(ref.startswith("/") and not ref.startswith("//") for ref in refs), refs
    assert "https://" not in r.text and "http://" not in r.text and "fonts.googleapis" not in r.text
    for ref in refs:
        asset = client.get(ref)
        assert asset.status_code == 200 and len(asset.content) > 500, ref
    policy = _directives(r.headers["content-security-policy"])
    assert policy["default-src"] == ["'none'"] and policy["connect-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"] and "'unsafe-eval'" not in policy["script-src"]
    assert "'unsafe-inline'" not in policy["script-src"]
    assert all(s == "'self'" or s.startswith("'sha256-") for s in policy["script-src"])


def test_the_docs_pages_use_the_bundled_assets(client):
    docs = client.get("/docs").text
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in docs
    assert "/static/vendor/swagger-ui/swagger-ui.css" in docs
    assert "oauth2RedirectUrl: window.location.origin + '/docs/oauth2-redirect'" in docs
    redoc = client.get("/redoc").text
    assert '<script type="module" src="/static/vendor/redoc/redoc.standalone.js">' in redoc
    assert 'disable-telemetry="true"' in redoc
    # No validator badge (an image from validator.swagger.io), no Redocly logo from its CDN.
    assert '"validatorUrl": null' in docs
    bundle = client.get("/static/vendor/redoc/redoc.standalone.js").text
    assert "cdn.redoc.ly" not in bundle and "Redoc" in bundle
    # The inline script Swagger UI starts from is exactly the one the policy's hash allows.
    import base64
    import hashlib

    body = re.search(r"<script>(.*?)</script>", docs, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in client.get("/docs").headers["content-security-policy"]
    assert client.get("/openapi.json").status_code == 200
    # Not part of the API's description.
    paths = client.get("/openapi.json").json()["paths"]
    assert not any(p.startswith(("/docs", "/redoc")) for p in paths)
