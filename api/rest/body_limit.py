"""ASGI middleware bounding request body size (413), whether or not Content-Length is sent."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimitMiddleware:
    """Refuse bodies larger than ``max_bytes``, or than the cap ``route_max_bytes`` gives
    a (method, path) of its own (e.g. dataset uploads)."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        route_max_bytes: dict[tuple[str, str], int] | None = None,
    ) -> None:
        self.app = app
        self.default_max_bytes = max_bytes
        self.route_max_bytes = dict(route_max_bytes or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = (scope.get("method", ""), scope.get("path", "").rstrip("/"))
        max_bytes = self.route_max_bytes.get(route, self.default_max_bytes)
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > max_bytes:
                await _too_large(send, max_bytes)
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
                await _too_large(send, max_bytes)


class _BodyTooLarge(Exception):
    pass


async def _too_large(send: Send, limit: int) -> None:
    # The error body shape of api/rest/errors.py; this middleware answers before any handler.
    body = f'{{"detail":"request body larger than {limit} bytes","error":"bad_input"}}'.encode()
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
