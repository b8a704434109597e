"""Bearer-token authentication and role checks.

Tokens are minted by an admin (api/access/tokens.py, docs/teams.md) or are the
bootstrap admin tokens of ``TOKENBENCH__API__TOKENS``. A missing, unknown, malformed,
expired or revoked token gets the same **401**; a valid token whose role does not
allow the route gets **403**; a valid token sending faster than its rate gets **429**
(api/rest/rate_limit.py). Tokens are never logged or echoed; the caller is known to
the rest of the request as a :class:`~api.access.caller.Caller` (``request.state.caller``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.access.caller import Caller, Role
from api.access.tokens import TokenRegistry
from api.rest.rate_limit import check_rate

_bearer = HTTPBearer(
    auto_error=False, description="A token minted by an admin (tokenbench tokens create)."
)
UNAUTHORIZED = "missing, unknown, expired or revoked bearer token"


def require_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """Dependency of every protected route: the caller, or 401."""
    registry: TokenRegistry = request.app.state.tokens
    caller = None
    if credentials is not None and credentials.scheme.lower() == "bearer":
        caller = registry.authenticate(credentials.credentials)
    if caller is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"}
        )
    request.state.caller = caller
    check_rate(request, caller)  # the token's request rate: 429 with Retry-After
    return caller


def require_role(role: Role) -> Callable[[Caller], Caller]:
    """A dependency: the caller, or 403 when its role does not include ``role``."""

    def check(caller: Annotated[Caller, Depends(require_caller)]) -> Caller:
        if not caller.has(role):
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"this needs the {role.value} role; the token is a {caller.role.value}",
            )
        return caller

    return check


# Kept for routes that only need an authenticated caller.
require_token = require_caller
