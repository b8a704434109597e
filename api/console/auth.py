"""Who a console request is: the session of its ``tb_session`` cookie, its token's
caller re-checked against the token registry, the token's request rate; and the CSRF
check of every POST.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import Depends, Request

from api.access.caller import Caller, Role
from api.access.tokens import TokenRegistry
from api.console.sessions import COOKIE, Session, SessionStore
from api.rest.rate_limit import check_rate
from scenarios.errors import Refused

MAX_FORM_FIELDS = 20


class SignInNeeded(Exception):
    """No live session: the page answers with a redirect to /login."""


class CsrfRefused(Refused):
    """A POST without its session's CSRF token (403)."""


@dataclass(frozen=True, slots=True)
class Console:
    """A signed-in console request: its session and its caller."""

    session: Session
    caller: Caller


def sessions_of(request: Request) -> SessionStore:
    """The app's session store."""
    store: SessionStore = request.app.state.console_sessions
    return store


def current(request: Request) -> Console | None:
    """The request's live session and caller, or None. A session whose token was revoked
    or expired is ended here."""
    store = sessions_of(request)
    session_id = request.cookies.get(COOKIE)
    session = store.get(session_id)
    if session is None:
        return None
    registry: TokenRegistry = request.app.state.tokens
    caller = registry.caller_for(session.token_id)
    if caller is None:
        store.close(session.session_id)
        return None
    console = Console(session, caller)
    request.state.console = console
    return console


def require_console(request: Request) -> Console:
    """Dependency of every console page: the signed-in caller (a redirect to /login
    otherwise), held to its token's request rate as REST is (429)."""
    console = current(request)
    if console is None:
        raise SignInNeeded
    check_rate(request, console.caller)
    return console


ConsoleDep = Annotated[Console, Depends(require_console)]


def need(caller: Caller, role: Role) -> None:
    """403 (as REST's ``require_role``) when ``caller``'s role does not include ``role``."""
    if not caller.has(role):
        raise Refused(f"this needs the {role.value} role; the token is a {caller.role.value}")


async def form_of(request: Request) -> dict[str, str]:
    """The URL-encoded form of a POST (first value of each field; the body is capped by
    the app's body limit)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    fields = parse_qs(body, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    return {name: values[0] for name, values in fields.items()}


async def checked_form(request: Request, console: Console) -> dict[str, str]:
    """The form of a POST whose CSRF token (field ``csrf`` or header ``X-CSRF-Token``)
    is its session's; 403 otherwise."""
    form = await form_of(request)
    offered = request.headers.get("x-csrf-token") or form.get("csrf")
    if not console.session.csrf_ok(offered):
        raise CsrfRefused("the form's CSRF token is missing or wrong: reload the page")
    return form
