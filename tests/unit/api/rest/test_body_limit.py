"""api/rest/body_limit.py: bodies over the cap are refused with 413 and the one error
body shape, whether the client announces the length or streams the body."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from api.rest.body_limit import BodyLimitMiddleware

CAP = 1024
UPLOAD_CAP = 4096


class Echo:
    """An ASGI app that reads the whole body and answers its length."""

    def __init__(self) -> None:
        self.requests = 0
        self.scopes: list[str] = []
        self.lengths: list[bytes | None] = []  # the Content-Length of each request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(scope["type"])
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        self.requests += 1
        self.lengths.append(dict(scope["headers"]).get(b"content-length"))
        size, more = 0, True
        while more:
            message = await receive()
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        body = str(size).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
def echo() -> Echo:
    return Echo()


@pytest.fixture
def client(echo: Echo) -> TestClient:
    limited = BodyLimitMiddleware(echo, CAP, route_max_bytes={("POST", "/upload"): UPLOAD_CAP})
    return TestClient(limited)


def _refused(answer: httpx.Response, cap: int) -> None:
    assert answer.status_code == 413
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "detail": f"request body larger than {cap} bytes",
        "error": "bad_input",
    }


def test_a_body_up_to_the_cap_passes(client: TestClient) -> None:
    answer = client.post("/anything", content=b"x" * CAP)
    assert answer.status_code == 200 and answer.text == str(CAP)


def test_an_announced_length_over_the_cap_is_refused_before_the_app_runs(
    client: TestClient, echo: Echo
) -> None:
    _refused(client.post("/anything", content=b"x" * (CAP + 1)), CAP)
    assert echo.requests == 0


def test_a_streamed_body_is_counted_as_it_arrives(client: TestClient, echo: Echo) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length header
        for _ in range(CAP // 100 + 1):
            yield b"x" * 100

    _refused(client.post("/anything", content=chunks()), CAP)
    assert echo.lengths == [None]  # the app started reading; the cap stopped it


def test_a_route_with_its_own_cap(client: TestClient) -> None:
    assert client.post("/upload", content=b"x" * UPLOAD_CAP).text == str(UPLOAD_CAP)
    assert client.post("/upload/", content=b"x" * UPLOAD_CAP).status_code == 200
    _refused(client.post("/upload", content=b"x" * (UPLOAD_CAP + 1)), UPLOAD_CAP)
    # The cap is the route's: another method, or another path, has the default one.
    _refused(client.put("/upload", content=b"x" * (CAP + 1)), CAP)
    _refused(client.post("/uploads", content=b"x" * (CAP + 1)), CAP)


def test_other_scopes_pass_through(echo: Echo) -> None:
    with TestClient(BodyLimitMiddleware(echo, CAP)) as client:
        assert client.get("/").status_code == 200
    assert echo.scopes == ["lifespan", "http"]


def test_the_refusal_names_the_setting_that_raises_the_cap(echo: Echo) -> None:
    limited = BodyLimitMiddleware(
        echo,
        CAP,
        route_max_bytes={("POST", "/upload"): UPLOAD_CAP},
        setting="TOKENBENCH__API__MAX_BODY_BYTES",
        route_settings={("POST", "/upload"): "TOKENBENCH__API__MAX_DATASET_BYTES"},
    )
    with TestClient(limited) as client:
        body = client.post("/anything", content=b"x" * (CAP + 1)).json()
        assert body["detail"] == (
            f"request body larger than {CAP} bytes (TOKENBENCH__API__MAX_BODY_BYTES)"
        )
        upload = client.post("/upload", content=b"x" * (UPLOAD_CAP + 1)).json()
        assert upload["detail"].endswith("(TOKENBENCH__API__MAX_DATASET_BYTES)")
