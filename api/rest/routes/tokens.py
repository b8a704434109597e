"""``/v1/tokens`` and ``/v1/whoami``: API tokens minted, listed and revoked by an admin.

A minted token is in the ``201`` answer of ``POST /v1/tokens`` and nowhere else: only its
SHA-256 is stored (api/access/tokens.py), and every other answer, log line and audit
entry names it by its id. Revocation is effective on the next request. Minting and
revoking, and refusals of either, are appended to the audit log (action ``token.mint``,
``token.revoke``). docs/teams.md is the guide.

Who may call: ``POST /v1/tokens`` and ``/revoke`` an admin; the listing and one token's
row any role (a viewer or submitter sees only its own team's tokens, another team's is a
404); ``/v1/whoami`` any role.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from api.access.audit import audit
from api.access.caller import Caller, Role
from api.access.inputs import (
    DURATION_PATTERN,
    MAX_DURATION_CHARS,
    MAX_TEAM_CHARS,
    MAX_TOKEN_NAME_CHARS,
    MAX_TOKEN_ROWS,
    TEAM_PATTERN,
    TOKEN_ID_PATTERN,
    TOKEN_NAME_PATTERN,
    expiry,
)
from api.access.ownership import Forbidden
from api.access.tokens import TokenRecord, utcnow
from api.rest.deps import Authenticated, CallerDep, SettingsDep, TokensDep, WriterDep
from api.rest.errors import BodyProblems
from scenarios.errors import BadInput, Conflict, NotFound
from scenarios.settings import env_name

router = APIRouter(tags=["tokens"], dependencies=[Authenticated])

Team = Annotated[str, Field(pattern=TEAM_PATTERN, max_length=MAX_TEAM_CHARS)]
TokenId = Annotated[str, Path(pattern=TOKEN_ID_PATTERN, max_length=17)]


class TokenCreate(BaseModel):
    """A token to mint: its team and role, a label, and when it expires (never if
    neither ``expires_in`` nor ``expires_at`` is given)."""

    model_config = ConfigDict(extra="forbid")

    team: Team = Field(description="The team the token acts for (a slug).")
    role: Role = Field(description="viewer, submitter or admin.")
    name: str | None = Field(
        default=None,
        pattern=TOKEN_NAME_PATTERN,
        max_length=MAX_TOKEN_NAME_CHARS,
        description="A label: who or what holds it.",
    )
    expires_in: str | None = Field(
        default=None,
        pattern=DURATION_PATTERN,
        max_length=MAX_DURATION_CHARS,
        description="Expires this long after minting: 90d, 12h, 30m, 2w (at most 3650d).",
    )
    expires_at: dt.datetime | None = Field(
        default=None, description="Expires at this time (in the future, within 3650 days)."
    )


class TokenPublic(BaseModel):
    """A token's row: everything but the token (and its hash)."""

    id: str
    team: str
    role: Role
    name: str | None
    created_at: dt.datetime
    created_by: str | None
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None
    last_used_at: dt.datetime | None
    state: str = Field(description="active, expired or revoked.")


class TokenMinted(TokenPublic):
    """The answer of a mint: the row and the token, shown this once."""

    token: str = Field(description="The bearer token. Shown once: it is not stored.")


class WhoAmI(BaseModel):
    """The caller of the request, as the control plane sees it."""

    token_id: str
    team: str
    role: Role
    name: str | None
    bootstrap: bool = Field(description="A TOKENBENCH__API__TOKENS token (admin of default).")
    expires_at: dt.datetime | None


def public(record: TokenRecord, now: dt.datetime | None = None) -> TokenPublic:
    """The row as the API shows it, with its state at ``now``."""
    now = now or utcnow()
    state = (
        "revoked"
        if record.revoked_at is not None
        else ("active" if record.usable(now) else "expired")
    )
    return TokenPublic.model_validate({**record.public(), "state": state})


def admin_or_refuse(
    con: WriterDep, caller: Caller, action: str, kind: str, object_id: str | None
) -> None:
    """Go on if the caller is an admin; else audit the refusal and answer 403."""
    if caller.is_admin:
        return
    audit(con, caller, action, kind, object_id, "refused", reason="not an admin")
    raise Forbidden(f"this needs the admin role; the token is a {caller.role.value}")


@router.post("/v1/tokens", status_code=201, response_model=TokenMinted)
async def mint_token(
    body: TokenCreate,
    caller: CallerDep,
    registry: TokensDep,
    settings: SettingsDep,
    con: WriterDep,
    response: Response,
) -> TokenMinted:
    """Mint a token (admin). The answer holds the token, once; keep it safe."""
    admin_or_refuse(con, caller, "token.mint", "token", None)
    now = utcnow()
    try:
        expires_at = expiry(body.expires_in, body.expires_at, now)
    except BadInput as exc:
        field = "expires_at" if body.expires_in is None else "expires_in"
        raise BodyProblems([{"loc": ["body", field], "msg": str(exc)}]) from None
    cap = settings.teams.max_tokens
    if len(registry.listed()) >= cap:
        audit(con, caller, "token.mint", "token", None, "refused", team=body.team, cap=cap)
        raise Conflict(
            f"at most {cap} tokens may be minted in all (revoked and expired ones count); "
            f"raise {env_name('teams.max_tokens')}"
        )
    token, record = registry.mint(body.team, body.role, body.name, expires_at, caller.token_id)
    audit(
        con,
        caller,
        "token.mint",
        "token",
        record.token_id,
        team=record.team,
        role=record.role.value,
        name=record.name,
        expires_at=record.expires_at,
    )
    # The answer carries a secret: no cache may keep it.
    response.headers["cache-control"] = "no-store"
    return TokenMinted(**public(record, now).model_dump(), token=token)


@router.get("/v1/tokens", response_model=list[TokenPublic])
async def list_tokens(
    caller: CallerDep,
    registry: TokensDep,
    team: Annotated[str | None, Query(pattern=TEAM_PATTERN, max_length=MAX_TEAM_CHARS)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_TOKEN_ROWS)] = 1000,
) -> list[TokenPublic]:
    """Tokens, newest first: an admin's of every team (or ``team``), anyone else's of
    their own team only."""
    if not caller.is_admin:
        if team is not None and team != caller.team:
            return []
        team = caller.team
    now = utcnow()
    return [public(record, now) for record in registry.listed(team)[:limit]]


@router.get("/v1/tokens/{token_id}", response_model=TokenPublic)
async def get_token(token_id: TokenId, caller: CallerDep, registry: TokensDep) -> TokenPublic:
    """One token's row (an admin's any, anyone else's of their own team)."""
    record = registry.get(token_id)
    if record is None or not (caller.is_admin or record.team == caller.team):
        raise NotFound(f"no token {token_id}")
    return public(record)


@router.post("/v1/tokens/{token_id}/revoke", response_model=TokenPublic)
async def revoke_token(
    token_id: TokenId, caller: CallerDep, registry: TokensDep, con: WriterDep
) -> TokenPublic:
    """Revoke a token (admin): its next request gets 401. Revoking twice is harmless."""
    admin_or_refuse(con, caller, "token.revoke", "token", token_id)
    if token_id.startswith("boot-"):
        audit(con, caller, "token.revoke", "token", token_id, "refused", reason="bootstrap")
        raise BadInput(
            f"{token_id} is a bootstrap token: remove it from "
            f"{env_name('api.tokens')} and restart the control plane"
        )
    record = registry.revoke(token_id)
    if record is None:
        audit(con, caller, "token.revoke", "token", token_id, "refused", reason="no such token")
        raise NotFound(f"no token {token_id}")
    audit(con, caller, "token.revoke", "token", token_id, team=record.team, role=record.role.value)
    return public(record)


@router.get("/v1/whoami", response_model=WhoAmI)
async def whoami(caller: CallerDep, registry: TokensDep) -> WhoAmI:
    """The caller's token id, team, role, name and expiry (never the token)."""
    record = registry.get(caller.token_id)
    return WhoAmI(
        token_id=caller.token_id,
        team=caller.team,
        role=caller.role,
        name=caller.name,
        bootstrap=caller.bootstrap,
        expires_at=None if record is None else record.expires_at,
    )
