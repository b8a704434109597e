"""Egress policy for provider base URLs: which hosts a worker may connect to.

Checked when a scenario is accepted (control plane) and again by the worker right
before it connects (after DNS resolution, so a name pointing at a forbidden address is
refused too). Cloud-metadata and link-local addresses are always refused; loopback and
private ranges only when the settings allow them; hosts must match an allow pattern.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
from urllib.parse import urlsplit

from scenarios.settings import EgressSettings

# Cloud metadata endpoints beyond 169.254.0.0/16 (AWS IPv6, Alibaba).
_METADATA = {ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")}


class EgressDenied(ValueError):
    """A base URL the policy refuses; the message says why."""


def check_url(url: str, policy: EgressSettings, resolve: bool = False) -> None:
    """Raise EgressDenied if ``url`` may not be contacted; ``resolve`` also checks DNS."""
    parts = urlsplit(url)
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise EgressDenied(f"{url!r} is not an http(s) URL with a host")
    if not any(fnmatch.fnmatch(host.lower(), p.lower()) for p in policy.allow):
        raise EgressDenied(f"host {host!r} matches no egress allow pattern")
    addresses: list[str] = []
    try:
        ipaddress.ip_address(host)
        addresses = [host]
    except ValueError:
        if host.lower() == "localhost" or host.lower().endswith(".localhost"):
            addresses = ["127.0.0.1"]
        elif resolve:
            try:
                infos = socket.getaddrinfo(host, parts.port or 443, proto=socket.IPPROTO_TCP)
            except socket.gaierror as exc:
                raise EgressDenied(f"cannot resolve {host!r}: {exc.strerror}") from None
            addresses = [str(info[4][0]) for info in infos]
    for address in addresses:
        _check_address(host, ipaddress.ip_address(address), policy)


def _check_address(
    host: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address, policy: EgressSettings
) -> None:
    if ip.is_link_local or ip in _METADATA or ip.is_multicast or ip.is_unspecified:
        raise EgressDenied(f"{host!r} resolves to {ip}: link-local/metadata addresses are refused")
    if ip.is_loopback:
        if not policy.allow_loopback:
            raise EgressDenied(f"{host!r} is loopback ({ip}); set egress.allow_loopback to allow")
        return
    if ip.is_private and not policy.allow_private:
        raise EgressDenied(f"{host!r} is a private address ({ip}); set egress.allow_private")
