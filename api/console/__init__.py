"""The web console: pages served by the control plane itself (docs/console.md).

Server-rendered Jinja2 templates and plain JavaScript from ``static/`` (no inline
script, no CDN, no build), signed in with an API token exchanged for a session cookie.
Every page calls the REST routes' own functions with the session's caller, so the
console has no authorisation, bound or query of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from api.console import more, routes
from api.console.auth import SignInNeeded
from api.console.pages import STATIC, error_page, is_console_path, secured
from api.console.sessions import SessionStore

__all__ = ["install"]


def install(app: FastAPI, sessions: SessionStore | None = None) -> None:
    """Serve the console on ``app``: its routes, its static files, its sessions, its
    security headers, and HTML error pages for its paths."""
    app.state.console_sessions = sessions or SessionStore()
    app.state.page_errors = page_error
    app.include_router(routes.router)
    app.include_router(more.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="console-static")

    @app.exception_handler(SignInNeeded)
    async def sign_in(_: Request, __: Exception) -> Response:
        return secured(RedirectResponse("/login", status_code=303))

    @app.middleware("http")
    async def headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        path = request.url.path
        if is_console_path(path):
            secured(response, page=not path.startswith("/static/"))
        return response


def page_error(request: Request, status: int, message: str | None) -> Response | None:
    """The error page of a console path (None for the API's paths: JSON there)."""
    if not is_console_path(request.url.path):
        return None
    return error_page(request, status, message)
