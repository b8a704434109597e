"""What the gateway changes in what it forwards: headers both ways, the usage event.

Only the upstream's ``content-type`` and rate-limit headers are passed back. The
client's ``Authorization`` header is forwarded to the primary only when the primary has
no ``api_key_env`` of its own, and is never stored, logged or sent to a shadow. When
the gateway asked the primary for usage on the client's behalf (``inject_usage``), the
usage-only event is removed from the stream again by :class:`UsageFilter`.
"""

from __future__ import annotations

import os
import re

import orjson

from scenarios.gateway_config import GatewayConfig
from scenarios.providers.kinds import AnyProvider, OpenAIProvider
from workers.client.provider_setup import ProviderSetupError
from workers.client.secrets import Secrets, owner_bindings

# Upstream headers worth passing back: what the body is, and what rate limiting says.
_PASSED_HEADERS = re.compile(r"^(content-type|retry-after(-ms)?|x-ratelimit-.*|x-request-id)$")
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_EMPTY_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*\]')


def primary_key(config: GatewayConfig) -> str | None:
    """The primary's API key from this process's environment (None without
    ``api_key_env``), through the same host-bound lookup workers use; RuntimeError when
    it is missing or bound elsewhere."""
    return provider_key(config.primary)


def provider_key(provider: AnyProvider) -> str | None:
    """A forwarded provider's (the primary's or a fallback's) API key, as
    :func:`primary_key` reads it."""
    if not isinstance(provider, OpenAIProvider):
        return None
    # The operator's own config: its key goes to its own provider's host (tokenbench
    # settings are never sent).
    secrets = Secrets(owner_bindings([provider]), os.environ, "this gateway")
    try:
        return secrets.get(provider.api_key_env, provider.base_url, provider.name)
    except ProviderSetupError as exc:
        raise RuntimeError(str(exc)) from None


def is_passed(name: str) -> bool:
    """True for an upstream header the client gets back (``name`` lower-case)."""
    return _PASSED_HEADERS.match(name) is not None


class UsageFilter:
    """Removes the usage-only SSE event that the gateway asked for on the client's behalf.

    Only complete events are released (an SSE client acts on nothing before an event's
    blank line anyway); every other event passes byte for byte.
    """

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """The complete events of ``chunk`` (with what was pending), filtered."""
        data = self._pending + chunk
        ends = list(_EVENT_END.finditer(data))
        if not ends:
            self._pending = data
            return b""
        cut = ends[-1].end()
        complete, self._pending = data[:cut], data[cut:]
        if not _EMPTY_CHOICES.search(complete):
            return complete
        out, start = [], 0
        for end in _EVENT_END.finditer(complete):
            event = complete[start : end.end()]
            if not _is_usage_only(event):
                out.append(event)
            start = end.end()
        return b"".join(out)

    def flush(self) -> bytes:
        """Whatever was left unterminated at the end of the stream."""
        rest, self._pending = self._pending, b""
        return rest


def _is_usage_only(event: bytes) -> bool:
    for line in event.splitlines():
        if line.startswith(b"data:"):
            try:
                message = orjson.loads(line[5:].strip())
            except orjson.JSONDecodeError:
                return False
            return (
                isinstance(message, dict)
                and message.get("choices") == []
                and isinstance(message.get("usage"), dict)
            )
    return False
