"""The command-line clients that carry a key never follow a redirect (app.core.keyed_http).

urllib follows a redirect with the request's headers, ``Authorization`` included, to any
host: a service answering 302 to another address would hand it the key. ``export`` was
fixed first (tests/test_cli_export.py); ``plan --survey`` and the site client share the
opener since.
"""

from __future__ import annotations

import pytest

from app.cli import main
from app.cli.site import SiteClient, SiteError

from .test_cli_export import _Stub

KEY = "redirect-me-not"


class _Redirecting(dict):
    """Routes that send every path elsewhere: 307 for the site's, 302 for the rest."""

    target = ""

    def get(self, path, default=None):
        return (307 if path.startswith("/v1/site") else 302, {"Location": self.target}, b"")


@pytest.fixture
def stubs():
    elsewhere = _Stub({})
    service = _Stub(_Redirecting())
    service.routes.target = f"{elsewhere.base}/steal"
    yield service, elsewhere
    service.stop()
    elsewhere.stop()


def test_plan_does_not_follow_a_redirect_with_the_key(stubs, capsys):
    service, elsewhere = stubs
    rc = main(["plan", "--survey", "srv_x", "--server", service.base, "--key", KEY, "-k", "1"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "redirected (302)" in err and f"{elsewhere.base}/steal" in err and KEY not in err
    assert service.seen and service.seen[0][1] == f"Bearer {KEY}"  # the request was made…
    assert elsewhere.seen == []  # …and the key went nowhere else


def test_the_site_client_does_not_follow_a_redirect_with_its_token(stubs):
    service, elsewhere = stubs
    with pytest.raises(SiteError, match=r"redirected \(307\)") as err:
        SiteClient(service.base, KEY).call("GET", "/v1/site")
    assert KEY not in str(err.value)
    assert elsewhere.seen == []
