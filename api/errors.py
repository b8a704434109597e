"""Domain errors of the control plane, and the one place they become HTTP answers.

    ScenarioError     → 422, one entry per problem with its field path (and YAML line)
    EgressDenied      → 422 at the provider's base_url path
    UnknownRunError   → 404        UnknownScenarioError → 404
    RegionUnavailable → 409, naming the regions without a live worker
    BodyTooLarge      → 413
    RecursionError    → 422 (input nested too deeply for any parser; never a 500)

No handler ever returns a traceback; an unexpected error is logged and answered 500
with a correlation id.
"""

from __future__ import annotations

import logging
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from analytics.report import UnknownRunError
from scenarios.egress import EgressDenied
from scenarios.limits import MAX_DOCUMENT_DEPTH
from scenarios.loader import ScenarioError

log = logging.getLogger("tokenbench.api")


class UnknownScenarioError(LookupError):
    """No stored scenario with that id."""


class RegionUnavailable(Exception):
    """Regions named by a run have no live worker."""

    def __init__(self, regions: list[str]) -> None:
        super().__init__(f"no live worker in region(s): {', '.join(regions)}")
        self.regions = regions


class ProviderEgressDenied(Exception):
    """A provider's URL is refused by the egress policy."""

    def __init__(self, index: int, reason: EgressDenied) -> None:
        super().__init__(str(reason))
        self.path: list[str | int] = ["providers", index, "base_url"]


def _detail(loc: list[str | int], msg: str, line: int | None = None) -> dict[str, object]:
    entry: dict[str, object] = {"loc": loc, "msg": msg}
    if line is not None:
        entry["line"] = line
    return entry


def install_error_handlers(app: FastAPI) -> None:
    """Map domain errors to HTTP answers."""

    @app.exception_handler(ScenarioError)
    async def scenario_error(_: Request, exc: ScenarioError) -> JSONResponse:
        detail = [
            _detail(
                ["scenario", *[int(p) if p.isdigit() else p for p in problem.path.split(".") if p]],
                problem.message,
                problem.line,
            )
            for problem in exc.problems
        ]
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(ProviderEgressDenied)
    async def egress_denied(_: Request, exc: ProviderEgressDenied) -> JSONResponse:
        loc: list[str | int] = ["scenario", *exc.path]
        return JSONResponse({"detail": [_detail(loc, str(exc))]}, 422)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [_detail(list(e["loc"]), e["msg"]) for e in exc.errors()]
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(RecursionError)
    async def too_deep(_: Request, exc: RecursionError) -> JSONResponse:
        # Documents are capped at MAX_DOCUMENT_DEPTH before parsing where we parse them;
        # this is the net for any other parser a deep input reaches first.
        message = f"the input is nested too deeply (at most {MAX_DOCUMENT_DEPTH} levels)"
        return JSONResponse({"detail": [_detail([], message)]}, status_code=422)

    @app.exception_handler(UnknownRunError)
    async def unknown_run(_: Request, exc: UnknownRunError) -> JSONResponse:
        return JSONResponse({"detail": f"no run {exc.args[0]!r}"}, status_code=404)

    @app.exception_handler(UnknownScenarioError)
    async def unknown_scenario(_: Request, exc: UnknownScenarioError) -> JSONResponse:
        return JSONResponse({"detail": f"no scenario {exc.args[0]!r}"}, status_code=404)

    @app.exception_handler(RegionUnavailable)
    async def region_unavailable(_: Request, exc: RegionUnavailable) -> JSONResponse:
        body = {"detail": str(exc), "regions": exc.regions}
        return JSONResponse(body, status_code=409)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        error_id = uuid.uuid4().hex[:12]
        log.exception("unhandled error %s", error_id, exc_info=exc)
        return JSONResponse({"detail": "internal error", "error_id": error_id}, status_code=500)
