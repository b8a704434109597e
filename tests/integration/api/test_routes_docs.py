"""/docs and /redoc through the served app: the pages reference only the app's own URLs
(no CDN), and the app serves every asset they load, so they work offline."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.integration.api.conftest import RestStack

pytestmark = pytest.mark.integration

# Every URL a page loads: src/href attributes, Swagger UI's spec `url:`, ReDoc's spec-url.
_URLS = re.compile(r"""(?:src|href|spec-url)=["']([^"']+)["']|\burl:\s*'([^']+)'""")
_MEDIA = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


def _loaded_urls(page: str) -> list[str]:
    return [a or b for a, b in _URLS.findall(page)]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_pages_load_only_local_assets(rest_stack: RestStack, page: str) -> None:
    with rest_stack.anonymous() as client:  # the docs need no token
        answer = client.get(page)
        assert answer.status_code == 200
        assert "http://" not in answer.text and "https://" not in answer.text
        urls = _loaded_urls(answer.text)
        assert "/openapi.json" in urls
        assets = [url for url in urls if url != "/openapi.json"]
        assert any(url.endswith(".js") for url in assets), urls
        for url in urls:
            assert url.startswith("/") and not url.startswith("//"), url
            loaded = client.get(url)
            assert loaded.status_code == 200, url
            assert len(loaded.content) > 1000, url
            suffix = url[url.rfind(".") :]
            if suffix in _MEDIA:
                assert loaded.headers["content-type"].startswith(_MEDIA[suffix]), url
        # The schema the page shows is the control plane's own.
        schema = client.get("/openapi.json").json()
        assert "/v1/runs/{run_id}/report" in schema["paths"]


def test_swagger_ui_sends_the_schema_to_no_validator(rest_stack: RestStack) -> None:
    page = httpx.get(f"{rest_stack.base}/docs", timeout=30).text
    assert '"validatorUrl": null' in page
