"""``cache_reset``: empty a self-hosted engine's prefix cache before each stage.

A target hit rate (``workload.prefix_cache``) or a cold-cache comparison needs every
stage to start from an empty cache. vLLM empties its prefix cache on ``POST
/reset_prefix_cache`` (served when the server runs with ``VLLM_SERVER_DEV_MODE=1``),
SGLang on ``POST /flush_cache``, both at the server's root; any other engine is given
the URL to POST to. The request goes only to the provider's own ``base_url`` origin
(same scheme, host and port) and never to a hosted API: a preset, or a ``base_url`` on a
preset's hosts, is refused at validation (docs/providers.md, "Cache reset").
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scenarios.base import StrictModel, Url
from scenarios.security.egress import EgressDenied, url_host
from scenarios.security.host_rules import DEFAULT_PORTS

__all__ = ["ENGINE_PATHS", "CacheReset", "CacheResetUrl", "cache_reset_url", "same_origin"]

# Where each engine empties its prefix cache, under the server's root.
ENGINE_PATHS = {"vllm": "/reset_prefix_cache", "sglang": "/flush_cache"}


class CacheResetUrl(StrictModel):
    """A URL of the provider's own server that empties its prefix cache on POST."""

    url: Url = Field(
        description=(
            "POSTed before each stage; on the provider's base_url origin (same scheme, "
            "host and port) only."
        )
    )


CacheReset = Literal["vllm", "sglang"] | CacheResetUrl


def _origin(url: str) -> tuple[str, str, int]:
    scheme, host, port = url_host(url)
    return scheme, host.lower().rstrip("."), port or DEFAULT_PORTS[scheme]


def same_origin(url: str, base_url: str) -> bool:
    """Whether ``url`` is on ``base_url``'s scheme, host and port."""
    try:
        return _origin(url) == _origin(base_url)
    except EgressDenied:
        return False


def cache_reset_url(setting: CacheReset, base_url: str) -> str:
    """The URL to POST for ``setting`` on a server whose API is at ``base_url``: an
    engine's path at the root of its origin, or the configured URL (checked to be on
    that origin; ValueError otherwise)."""
    if isinstance(setting, CacheResetUrl):
        if not same_origin(setting.url, base_url):
            raise ValueError(
                f"cache_reset.url {setting.url!r} is not on the provider's base_url origin"
            )
        return setting.url
    scheme, host, port = _origin(base_url)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}{ENGINE_PATHS[setting]}"
