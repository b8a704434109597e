"""The shadow-traffic gateway: an OpenAI-compatible front of a primary provider that
mirrors a sampled share of live requests to shadow providers (docs/shadow.md).

``gateway`` and ``shadow_app`` are the command-line entry points; ``print_shadow_report``
prints a session's comparison for ``tokenbench report``.
"""

from api.gateway.cli import gateway, shadow_app
from api.gateway.report import print_shadow_report

__all__ = ["gateway", "print_shadow_report", "shadow_app"]
