"""ASGI middleware bounding request body size (413), whether or not Content-Length is sent."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimitMiddleware:
    """Refuse bodies larger than ``max_bytes``, or than the cap ``route_max_bytes`` gives
    a (method, path) of its own (e.g. dataset uploads). The 413 names the setting that
    raises the cap (``setting``, or the route's in ``route_settings``) when given."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        route_max_bytes: dict[tuple[str, str], int] | None = None,
        *,
        setting: str | None = None,
        route_settings: dict[tuple[str, str], str] | None = None,
    ) -> None:
        self.app = app
        self.default_max_bytes = max_bytes
        self.route_max_bytes = dict(route_max_bytes or {})
        self.setting = setting
        self.route_settings = dict(route_settings or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = (scope.get("method", ""), scope.get("path", "").rstrip("/"))
        max_bytes = self.route_max_bytes.get(route, self.default_max_bytes)
        setting = self.route_settings.get(route, self.setting)
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > max_bytes:
                await _too_large(send, max_bytes, setting)
                return
        seen = 0
        responded = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > max_bytes:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal responded
            responded = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge:
            if not responded:
                await _too_large(send, max_bytes, setting)


class _BodyTooLarge(Exception):
    pass


async def _too_large(send: Send, limit: int, setting: str | None) -> None:
    # The error body shape of api/rest/errors.py; this middleware answers before any handler.
    detail = f"request body larger than {limit} bytes" + (f" ({setting})" if setting else "")
    body = json.dumps({"detail": detail, "error": "bad_input"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
