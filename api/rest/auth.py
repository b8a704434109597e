"""Bearer-token authentication: 401 without a token, 403 with a wrong one.

Tokens come from settings (``TOKENBENCH__API__TOKENS``, a JSON list) and are compared
in constant time; they are never logged or echoed.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

_bearer = HTTPBearer(auto_error=False, description="A token from TOKENBENCH__API__TOKENS.")


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Dependency of every protected route."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    offered = credentials.credentials.encode()
    tokens = request.app.state.settings.api.tokens
    # Compare against every token, without stopping early, in constant time each.
    matched = False
    for token in tokens:
        matched |= hmac.compare_digest(offered, token.get_secret_value().encode())
    if not matched:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "invalid token")
