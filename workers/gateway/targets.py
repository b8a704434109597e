"""Where the gateway forwards a request: the primary, then its fallbacks, in order.

Each :class:`Target` is one forwarded provider with its own keep-alive pool, request
heads and key. A chat request goes to the primary; when the primary cannot be reached,
closes the connection, stays silent past its stall timeout or answers 429 or 5xx -
always before any byte went to the client - it is re-sent to the next fallback
(docs/failover.md). Once the client has bytes there is no fallback: the answer is that
target's, cut or not.

What a target gets: the body as the client sent it (the primary; a fallback with
``model`` set to its own model id), the target's own key when it has ``api_key_env``,
else - the primary only - the client's ``Authorization`` header (a fallback never gets
the client's key: it belongs to the primary), and the client's ``x-tokenbench-request``
id when it sent one, so a failover run's upstream logs can be joined to its records.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from scenarios.providers.kinds import AnyProvider
from workers.client.request_ids import REQUEST_ID_HEADER
from workers.gateway.upstream import Origin, UpstreamPool

ID_HEADER = REQUEST_ID_HEADER.encode()


def falls_back(status: int) -> bool:
    """True for an answer status after which the next target is tried."""
    return status == 429 or status >= 500


@dataclass(slots=True)
class Target:
    """One forwarded provider: its pool, request heads, key and (fallbacks) model."""

    name: str
    pool: UpstreamPool
    heads: dict[str, bytes]
    stall_s: float
    auth: bytes | None  # the target's own "authorization: ..." line
    client_auth: bool  # the primary without a key of its own gets the client's
    model: str | None  # a fallback's model id, written into the body it gets

    def auth_line(self, headers: dict[bytes, bytes]) -> bytes:
        """The ``authorization`` line sent to this target (maybe none)."""
        if self.auth is not None:
            return self.auth
        client = headers.get(b"authorization") if self.client_auth else None
        return b"" if client is None else b"authorization: %s\r\n" % client

    def chat_request(self, content: bytes, headers: dict[bytes, bytes], stream: bool) -> bytes:
        """The whole upstream request for a chat body ``content`` the gateway received
        with ``headers``."""
        if self.model is not None:
            body = orjson.loads(content)
            if body.get("model") != self.model:
                content = orjson.dumps({**body, "model": self.model})
        tag = headers.get(ID_HEADER)
        extra = b"" if tag is None else b"%s: %s\r\n" % (ID_HEADER, tag)
        return b"%s%s%scontent-length: %d\r\n\r\n%b" % (
            self.heads["stream" if stream else "plain"],
            self.auth_line(headers),
            extra,
            len(content),
            content,
        )


def build_target(provider: AnyProvider, base_url: str, key: str | None, fallback: bool) -> Target:
    """The target of ``provider`` served at ``base_url`` (the primary: ``fallback`` False)."""
    origin = Origin.of(base_url)
    common = (
        f"host: {origin.host_header}\r\ncontent-type: application/json\r\n"
        "accept-encoding: identity\r\n"
    ).encode()
    prefix = origin.prefix.encode()
    heads = {
        "stream": b"POST %s/chat/completions HTTP/1.1\r\n%saccept: text/event-stream\r\n"
        % (prefix, common),
        "plain": b"POST %s/chat/completions HTTP/1.1\r\n%saccept: application/json\r\n"
        % (prefix, common),
        "models": b"GET %s/models HTTP/1.1\r\n%saccept: application/json\r\n" % (prefix, common),
    }
    return Target(
        name=provider.name,
        pool=UpstreamPool(origin, provider.connect_timeout_s),
        heads=heads,
        stall_s=provider.stall_timeout_s,
        auth=None if key is None else b"authorization: Bearer %s\r\n" % key.encode(),
        client_auth=not fallback,
        model=getattr(provider, "model", None) if fallback else None,
    )
