"""Errors of the control plane, and the one place errors become HTTP answers.

Every error of the tree (``scenarios.errors``) is answered by one handler, with its
kind's HTTP status and one body shape::

    {"detail": <message, or one entry per problem>, "error": "<kind>", ...class fields}

    ScenarioError     → 422, ``detail`` lists each problem with its field path (and line)
    ProviderEgressDenied → 422 at the provider's base_url path
    BodyProblems      → 422 (415 for a media type), one entry per problem at its path
    UnknownRunError, UnknownScenarioError, UnknownDatasetError,
    UnknownShadowSessionError → 404
    RegionUnavailable → 409, ``regions`` names the regions without a live worker
    UnknownFormat     → 422, ``formats`` lists the ones the route serves
    NotAcceptable     → 406, ``formats`` likewise (the Accept header names none of them)
    SQL refusals      → 400/403/408/413/503, ``kind`` names the SQL refusal
    Busy              → 503 with ``Retry-After``: the heavy-work slots stayed full
    QuotaExceeded     → 429, ``quota`` and ``setting`` name it; ``Retry-After`` for a
                        token's request rate (docs/teams.md)

Request validation (422), inputs nested too deeply for a parser (422) and HTTP errors
raised by FastAPI itself or its security scheme (``HTTPException``: 401 with its
``WWW-Authenticate`` header, 403, 404 of an unknown route, 405) get the same shape;
routes raise errors of the tree, never ``HTTPException``. No handler ever
returns a traceback; an unexpected error is logged and answered 500 with a correlation
id.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from scenarios.errors import (
    KINDS,
    BadInput,
    Conflict,
    Internal,
    NotFound,
    TokenbenchError,
    Unavailable,
)
from scenarios.limits import MAX_DOCUMENT_DEPTH
from scenarios.loader import ScenarioError
from scenarios.security.egress import EgressDenied

log = logging.getLogger("tokenbench.api")

# The tree's kind of an HTTP error raised outside it (by FastAPI, auth or a route).
_KIND_OF_STATUS = {kind.http_status: kind.kind for kind in KINDS} | {
    400: BadInput.kind,
    401: "refused",
    405: BadInput.kind,
    413: BadInput.kind,
    415: BadInput.kind,
}


class UnknownScenarioError(NotFound, LookupError):
    """No stored scenario with that id; the one argument is the id."""

    def public_detail(self) -> object:
        """``no scenario 'ID'``."""
        return f"no scenario {self.args[0]!r}"


class UnknownShadowSessionError(NotFound, LookupError):
    """No shadow session with that id; the one argument is the id."""

    def public_detail(self) -> object:
        """``no shadow session 'ID'``."""
        return f"no shadow session {self.args[0]!r}"


class UnsupportedMediaType(BadInput):
    """The body is sent with a media type the route does not read."""

    http_status = 415


class BodyProblems(BadInput):
    """Problems of a request body, each at its field path (and line, for a file)."""

    def __init__(self, problems: list[dict[str, object]]) -> None:
        super().__init__("; ".join(str(problem["msg"]) for problem in problems))
        self.problems = problems

    @classmethod
    def of_document(cls, exc: ScenarioError, root: str) -> BodyProblems:
        """A parsed document's problems (a scenario, a gateway config) under ``root``."""
        return cls(_document_detail(exc, root))

    @classmethod
    def of_file(cls, message: str, line: int | None) -> BodyProblems:
        """One problem of an uploaded file, at its line."""
        return cls([_detail(["body"], message, line)])

    def public_detail(self) -> object:
        """One entry per problem."""
        return self.problems


class RegionUnavailable(Conflict):
    """Regions named by a run have no live worker."""

    def __init__(self, regions: list[str]) -> None:
        super().__init__(f"no live worker in region(s): {', '.join(regions)}")
        self.regions = regions

    def public_fields(self) -> dict[str, object]:
        """The regions without a live worker, for a client to name or wait for."""
        return {"regions": self.regions}


class UnknownFormat(BadInput):
    """A ``format`` the route does not serve."""

    def __init__(self, name: str, formats: list[str]) -> None:
        super().__init__(f"unknown format {name!r}: give one of {', '.join(formats)}")
        self.formats = formats

    def public_fields(self) -> dict[str, object]:
        """The formats the route serves."""
        return {"formats": self.formats}


class NotAcceptable(BadInput):
    """The ``Accept`` header accepts none of the route's media types."""

    http_status = 406

    def __init__(self, accept: str, formats: dict[str, str]) -> None:
        offered = ", ".join(f"{name} ({media})" for name, media in formats.items())
        super().__init__(f"Accept: {accept[:200]} accepts none of {offered}; or give ?format=NAME")
        self.formats = list(formats)

    def public_fields(self) -> dict[str, object]:
        """The formats the route serves."""
        return {"formats": self.formats}


class Busy(Unavailable):
    """Every heavy-work slot of the control plane stayed taken while the request waited
    (api/rest/offload.py): answered 503 with ``Retry-After``."""

    def __init__(self, what: str, waited_s: float, retry_after_s: int) -> None:
        super().__init__(
            f"the control plane is busy: {what} waited {waited_s:g} s for a slot; "
            f"retry in {retry_after_s} s"
        )
        self.retry_after_s = retry_after_s

    def public_fields(self) -> dict[str, object]:
        """When to retry (also the ``Retry-After`` header)."""
        return {"retry_after_s": self.retry_after_s}


class ProviderEgressDenied(BadInput):
    """A provider's URL is refused by the egress policy: a problem of the scenario."""

    def __init__(self, index: int, reason: EgressDenied, root: str = "scenario") -> None:
        super().__init__(str(reason))
        self.root = root
        self.path: list[str | int] = ["providers", index, "base_url"]

    def public_detail(self) -> object:
        """One problem at the provider's URL field, under the request's ``root`` field."""
        return [_detail([self.root, *self.path], str(self))]


def _detail(loc: list[str | int], msg: str, line: int | None = None) -> dict[str, object]:
    entry: dict[str, object] = {"loc": loc, "msg": msg}
    if line is not None:
        entry["line"] = line
    return entry


def _document_detail(exc: ScenarioError, root: str) -> list[dict[str, object]]:
    """One entry per problem, its field path under the request's ``root`` field."""
    return [
        _detail(
            [root, *[int(p) if p.isdigit() else p for p in problem.path.split(".") if p]],
            problem.message,
            problem.line,
        )
        for problem in exc.problems
    ]


def _internal(exc: Exception) -> JSONResponse:
    error_id = uuid.uuid4().hex[:12]
    log.exception("unhandled error %s", error_id, exc_info=exc)
    body = {"detail": "internal error", "error": Internal.kind, "error_id": error_id}
    return JSONResponse(body, status_code=500)


def error_body(exc: TokenbenchError) -> dict[str, object]:
    """The REST body of an error of the tree (not of an internal one: see the handler)."""
    if isinstance(exc, ScenarioError):
        detail: object = _document_detail(exc, "scenario")
    else:
        detail = exc.public_detail()
    return {"detail": detail, "error": exc.kind, **exc.public_fields()}


def _page(request: Request, status: int, message: str | None) -> Response | None:
    """The web console's HTML error page for its own paths (``app.state.page_errors``,
    set by api/console), None for the API's: JSON there."""
    pages: Callable[[Request, int, str | None], Response | None] | None = getattr(
        request.app.state, "page_errors", None
    )
    return None if pages is None else pages(request, status, message)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error with the tree's status and body shape."""

    @app.exception_handler(TokenbenchError)
    async def tree_error(request: Request, exc: TokenbenchError) -> Response:
        page = _page(request, exc.http_status, None if isinstance(exc, Internal) else str(exc))
        if page is not None:
            return page
        if isinstance(exc, Internal):
            return _internal(exc)  # a bug: its message is for the log, not the client
        # Busy (503) and a used-up request rate (429) say when to retry.
        retry_after = getattr(exc, "retry_after_s", None)
        headers = {"retry-after": str(retry_after)} if isinstance(retry_after, int) else None
        return JSONResponse(error_body(exc), status_code=exc.http_status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        page = _page(request, 422, "; ".join(str(e["msg"]) for e in exc.errors()))
        if page is not None:
            return page
        detail = [_detail(list(e["loc"]), e["msg"]) for e in exc.errors()]
        return JSONResponse({"detail": detail, "error": BadInput.kind}, status_code=422)

    @app.exception_handler(RecursionError)
    async def too_deep(_: Request, exc: RecursionError) -> JSONResponse:
        # Documents are capped at MAX_DOCUMENT_DEPTH before parsing where we parse them;
        # this is the net for any other parser a deep input reaches first.
        message = f"the input is nested too deeply (at most {MAX_DOCUMENT_DEPTH} levels)"
        body = {"detail": [_detail([], message)], "error": BadInput.kind}
        return JSONResponse(body, status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        page = _page(request, exc.status_code, None)
        if page is not None and exc.status_code >= 400:
            return page
        # As FastAPI's own handler (headers kept, no body where HTTP forbids one), plus
        # the kind, so every error body has the same shape.
        if exc.status_code in (204, 304):
            return Response(status_code=exc.status_code, headers=exc.headers)
        fallback = BadInput.kind if exc.status_code < 500 else Internal.kind
        body = {"detail": exc.detail, "error": _KIND_OF_STATUS.get(exc.status_code, fallback)}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        answer = _internal(exc)  # logged with its id
        page = _page(request, 500, None)
        return answer if page is None else page
