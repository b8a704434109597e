"""Rendering the console's pages: Jinja2 templates shipped in the package (autoescape
on: every value a template writes is escaped), the security headers of every console
answer, and the error page.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from api.access.caller import Role

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# No inline script or style anywhere: scripts and styles come from /static only.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
# Paths of the API and its documentation: their errors stay JSON, their headers theirs.
API_PREFIXES = ("/v1/", "/docs", "/redoc", "/openapi.json", "/healthz", "/readyz", "/metrics")

STATUS_SENTENCES = {
    400: "The request could not be understood.",
    401: "Sign in with an API token to see this page.",
    403: "Your token's role or team does not allow this.",
    404: "There is nothing here, or it belongs to a team whose results you cannot read.",
    405: "This page does not take that kind of request.",
    409: "This conflicts with the service's current state.",
    413: "What you sent is larger than the service accepts.",
    422: "Something in what you sent is not valid.",
    429: "Too many requests: wait a moment and try again.",
    500: "Something went wrong on the service; it has been logged. Try again later.",
    503: "The service is busy: try again in a moment.",
}


def is_console_path(path: str) -> bool:
    """Whether ``path`` is the console's (not the REST API's or its documentation's)."""
    return not (path.startswith(API_PREFIXES) or path in ("/v1", "/docs-assets"))


def _iso(value: Any) -> str:
    """An ISO-8601 UTC time for ``<time datetime>`` ('' when missing)."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            return str(value)
    if isinstance(value, dt.datetime):
        when = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return str(when.astimezone(dt.UTC).isoformat(timespec="seconds")).replace("+00:00", "Z")
    return str(value)


def _utc(value: Any) -> str:
    """The time as people read it in UTC (the fallback text and the title)."""
    iso = _iso(value)
    return iso.replace("T", " ").replace("Z", " UTC") if iso else "–"


def _number(value: Any, digits: int = 0) -> str:
    """A figure with thousands separators ('–' when missing)."""
    if value is None:
        return "–"
    return f"{float(value):,.{digits}f}" if digits else f"{round(float(value)):,}"


def _pretty(value: Any) -> str:
    """Data as indented JSON (escaped by the template like any text)."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"], default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["iso"] = _iso
    env.filters["utc"] = _utc
    env.filters["number"] = _number
    env.filters["pretty"] = _pretty
    return env


ENV = _environment()


def secured(response: Response, page: bool = True) -> Response:
    """``response`` with the console's security headers (a page is never cached). A
    header the route already set (the sandboxed report's own CSP) is kept."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if page:
        response.headers["cache-control"] = "no-store"
    return response


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A console page: the template with the signed-in session (if any) and context."""
    console = getattr(request.state, "console", None)
    html = ENV.get_template(template).render(
        request=request,
        path=request.url.path,
        caller=None if console is None else console.caller,
        may_submit=console is not None and console.caller.has(Role.SUBMITTER),
        csrf=None if console is None else console.session.csrf,
        **context,
    )
    response = HTMLResponse(html, status_code=status_code)
    secured(response)
    return response


def error_page(request: Request, status: int, message: str | None = None) -> HTMLResponse:
    """The error page: the status, a sentence, and what was wrong when it is safe to say
    (a message of the tree's errors; never a traceback)."""
    from api.console.auth import current  # noqa: PLC0415 - auth renders no page

    if getattr(request.state, "console", None) is None and status != 401:
        current(request)  # the navigation, for a signed-in user on an unknown page
    sentence = STATUS_SENTENCES.get(status, "The request could not be completed.")
    return render(request, "error.html", status, status=status, sentence=sentence, detail=message)
