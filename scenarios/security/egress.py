"""Egress policy: which addresses a worker may connect to, and the guard that enforces it.

Two places apply the same rules. The control plane checks a scenario's URLs when it is
accepted, without DNS (:func:`check_url`), so that a bad URL is a 422 naming its field.
The worker's HTTP transport checks every connection it opens (:class:`EgressGuard`): it
resolves the name once, checks every address, and connects to exactly those addresses,
so a name that resolves differently the second time (DNS rebinding) is still connected
to the address that was checked. Host header and TLS server name stay the URL's.

Rules, applied to each address after unwrapping the IPv4 address an IPv6 one embeds
(IPv4-mapped ``::ffff:0:0/96``, IPv4-translated ``::ffff:0:0:0/96``, IPv4-compatible
``::/96``, NAT64 ``64:ff9b::/96`` and ``64:ff9b:1::/48``, 6to4 ``2002::/16``, Teredo
``2001::/32``), in order:

1. always refused: link-local and cloud metadata/management addresses (AWS, GCP, Azure
   169.254.0.0/16 and fe80::/10; Alibaba's 100.100.100.200 in CGNAT 100.64.0.0/10;
   Azure WireServer 168.63.129.16; AWS IPv6 metadata fd00:ec2::/32), 192.0.0.0/24,
   unspecified, multicast, broadcast and reserved addresses;
2. loopback only with ``TOKENBENCH__EGRESS__ALLOW_LOOPBACK=true``;
3. private ranges (RFC 1918, ULA, ...) only with ``TOKENBENCH__EGRESS__ALLOW_PRIVATE=true``;
4. the host name must match a pattern of ``TOKENBENCH__EGRESS__ALLOW`` (default ``*``).

Endpoints the worker starts itself (simulated providers on loopback) are trusted by
exact address and port (:meth:`EgressGuard.trust`), whatever the policy says.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from scenarios.errors import Refused
from scenarios.settings import EgressSettings, env_name

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Answers the addresses (as text) a host name resolves to; injectable for tests.
Resolver = Callable[[str, int], Awaitable[list[str]]]
SockAddr = tuple[int, tuple[str, int]]  # address family, (address, port)

_ALLOW = env_name("egress.allow")
_ALLOW_LOOPBACK = f"{env_name('egress.allow_loopback')}=true"
_ALLOW_PRIVATE = f"{env_name('egress.allow_private')}=true"

# Refused whatever the settings say: metadata and management endpoints of every cloud,
# and addresses no provider can live at.
_ALWAYS_REFUSED: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.ip_network(network), reason)
    for network, reason in (
        ("169.254.0.0/16", "link-local, cloud metadata"),
        ("fe80::/10", "link-local"),
        ("100.64.0.0/10", "shared CGNAT space, Alibaba Cloud metadata"),
        ("168.63.129.16/32", "Azure WireServer"),
        ("fd00:ec2::/32", "AWS IPv6 metadata"),
        ("192.0.0.0/24", "IETF protocol assignment"),
        ("0.0.0.0/8", "this network"),
        ("240.0.0.0/4", "reserved"),
        ("255.255.255.255/32", "broadcast"),
        ("224.0.0.0/4", "multicast"),
        ("ff00::/8", "multicast"),
        ("::/128", "unspecified"),
    )
)
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")
# Legacy IPv4 spellings getaddrinfo accepts (127.1, 0x7f.0.0.1, 2130706433).
_LEGACY_IPV4 = re.compile(r"^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}$", re.IGNORECASE)

# Fields of a provider that name a URL the worker connects to.
_URL_FIELDS = ("base_url", "endpoint", "endpoint_url")
# Bedrock's endpoint when the scenario gives none (the adapter uses the same).
BEDROCK_DEFAULT_ENDPOINT = "https://bedrock-runtime.{region}.amazonaws.com"


class EgressDenied(Refused, ValueError):
    """A URL or address the policy refuses; the message says why and what to set."""


def embedded_ipv4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 address(es) an IPv6 address carries (empty when it carries none).

    A NAT64 local-use prefix (64:ff9b:1::/48) may be any RFC 6052 length inside the /48,
    so every layout that fits is returned and each is checked.
    """
    if ip.version == 4:
        return []
    assert isinstance(ip, ipaddress.IPv6Address)
    value = int(ip)
    low32 = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if ip in _MAPPED or ip in _TRANSLATED or ip in _NAT64:
        return [low32]
    if ip in _COMPATIBLE:
        return [] if value <= 1 else [low32]  # :: and ::1 are not IPv4-compatible
    if ip in _SIX_TO_FOUR:
        return [ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)]
    if ip in _TEREDO:
        return [ipaddress.IPv4Address(~value & 0xFFFFFFFF)]  # the client, obfuscated
    if ip in _NAT64_LOCAL:
        return [low32, *(_rfc6052(value, length) for length in (48, 56, 64))]
    return []


def _rfc6052(value: int, prefix_length: int) -> ipaddress.IPv4Address:
    """The IPv4 address of an RFC 6052 address with a ``prefix_length`` prefix: its 32
    bits follow the prefix, skipping bits 64-71 (the ``u`` octet)."""
    bits = 128 - prefix_length  # after the prefix, most significant first
    collected = 0
    taken = 0
    position = bits - 1
    while taken < 32 and position >= 0:
        bit_index = 127 - position  # index from the most significant bit
        if not 64 <= bit_index <= 71:
            collected = (collected << 1) | ((value >> position) & 1)
            taken += 1
        position -= 1
    return ipaddress.IPv4Address(collected)


def address_refusal(ip: IPAddress, policy: EgressSettings) -> str | None:
    """Why ``ip`` may not be contacted under ``policy``, or None if it may."""
    candidates: list[IPAddress] = [*embedded_ipv4(ip)] or [ip]
    for candidate in candidates:
        reason = _refusal(candidate, policy)
        if reason is not None:
            return reason if candidate == ip else f"{ip} embeds {candidate}: {reason}"
    return None


def _refusal(ip: IPAddress, policy: EgressSettings) -> str | None:
    for network, kind in _ALWAYS_REFUSED:
        if ip.version == network.version and ip in network:
            return f"{ip} is in {network} ({kind}): always refused"
    if ip.is_loopback:
        if policy.allow_loopback:
            return None
        return f"{ip} is a loopback address; the operator may allow it with {_ALLOW_LOOPBACK}"
    if ip.version == 6 and ip.is_reserved:
        return f"{ip} is a reserved address, always refused"
    private = ip.is_private or (ip.version == 6 and ip.is_site_local)
    if private and not policy.allow_private:
        return f"{ip} is a private address; the operator may allow it with {_ALLOW_PRIVATE}"
    return None


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` spells literally (IPv4 legacy forms and a trailing dot
    included, as resolvers accept them), else None."""
    host = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _LEGACY_IPV4.match(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def normalise_host(host: str) -> str:
    """A host name as compared with patterns: lower case, no brackets, no trailing dot."""
    return host.strip("[]").rstrip(".").lower()


def check_host_pattern(host: str, policy: EgressSettings) -> None:
    """Raise EgressDenied unless ``host`` matches a pattern of ``policy.allow``."""
    name = normalise_host(host)
    if not any(fnmatch.fnmatchcase(name, normalise_host(p)) for p in policy.allow):
        patterns = ", ".join(policy.allow) or "none"
        raise EgressDenied(f"host {name!r} matches no pattern of {_ALLOW} (allowed: {patterns})")


def check_address(host: str, ip: IPAddress, policy: EgressSettings) -> None:
    """Raise EgressDenied if ``host``'s address ``ip`` may not be contacted."""
    reason = address_refusal(ip, policy)
    if reason is not None:
        raise EgressDenied(f"host {normalise_host(host)!r}: {reason}")


def url_host(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port of ``url`` as the HTTP client parses it (so that what is
    checked is what will be connected to); EgressDenied for anything but http(s)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise EgressDenied(f"{url!r} is not a valid URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise EgressDenied(f"{url!r} is not an http(s) URL with a host")
    return parsed.scheme, parsed.host, parsed.port


def check_url(url: str, policy: EgressSettings, resolve: bool = False) -> None:
    """Raise EgressDenied if ``url`` may not be contacted; ``resolve`` also checks every
    address the name resolves to now (the transport checks again when it connects)."""
    _, host, port = url_host(url)
    check_host_pattern(host, policy)
    literal = literal_address(host)
    addresses: list[IPAddress] = []
    if literal is not None:
        addresses = [literal]
    elif normalise_host(host) == "localhost" or normalise_host(host).endswith(".localhost"):
        addresses = [ipaddress.ip_address("127.0.0.1")]
    elif resolve:
        try:
            infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise EgressDenied(f"cannot resolve {host!r}: {exc.strerror}") from None
        addresses = [ipaddress.ip_address(str(info[4][0])) for info in infos]
    for address in addresses:
        check_address(host, address, policy)


@dataclass(frozen=True)
class Endpoint:
    """A URL a provider connects to, and the scenario field that names it."""

    field: str
    url: str


def provider_endpoints(provider: Any) -> list[Endpoint]:
    """Every URL a provider of any kind connects to (none for simulated endpoints, which
    the worker starts itself), with the field naming it; Bedrock's default endpoint
    counts when no ``endpoint_url`` is given."""
    endpoints = [
        Endpoint(name, value)
        for name in _URL_FIELDS
        if isinstance(value := getattr(provider, name, None), str)
    ]
    if getattr(provider, "kind", None) == "bedrock" and not endpoints:
        region = str(getattr(provider, "region", "us-east-1"))
        endpoints.append(Endpoint("endpoint_url", BEDROCK_DEFAULT_ENDPOINT.format(region=region)))
    return endpoints


def metrics_endpoints(provider: Any) -> list[Endpoint]:
    """The server-telemetry URL a provider's shards scrape (``metrics_url``), if it is a
    URL: a simulated provider's is a path of the endpoint the worker starts itself.
    Checked like every other URL, but a refusal on the worker is a recorded scrape
    error, not a failed shard (docs/telemetry.md)."""
    url = getattr(provider, "metrics_url", None)
    if isinstance(url, str) and not url.startswith("/"):
        return [Endpoint("metrics_url", url)]
    return []


async def _system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class EgressGuard:
    """The egress policy at connection time: one resolution, every address checked, and
    exactly the checked addresses handed to ``connect``.

    Used by the worker's HTTP transport for every connection it opens (redirects would be
    new connections too, but worker clients never follow them).
    """

    def __init__(self, policy: EgressSettings, resolver: Resolver | None = None) -> None:
        self.policy = policy
        self._resolve = resolver or _system_resolver
        self._trusted: set[tuple[str, int]] = set()

    def trust(self, address: str, port: int) -> None:
        """Allow exactly ``address``:``port`` whatever the policy (an endpoint the worker
        started itself, e.g. a simulated provider on loopback)."""
        self._trusted.add((str(ipaddress.ip_address(address)), port))

    def distrust(self, address: str, port: int) -> None:
        """Withdraw :meth:`trust` of ``address``:``port`` (the endpoint stopped: another
        process may bind that port next, and the policy decides for it again)."""
        self._trusted.discard((str(ipaddress.ip_address(address)), port))

    async def addresses(self, host: str, port: int) -> list[SockAddr]:
        """The addresses to connect to for ``host``:``port``, every one checked; raises
        EgressDenied if the host or any address it resolves to is refused."""
        literal = literal_address(host)
        if literal is not None and (str(literal), port) in self._trusted:
            return [_sockaddr(literal, port)]
        check_host_pattern(host, self.policy)
        if literal is not None:
            resolved = [literal]
        else:
            try:
                resolved = [ipaddress.ip_address(a) for a in await self._resolve(host, port)]
            except socket.gaierror as exc:
                raise OSError(exc.errno, f"cannot resolve {host!r}: {exc.strerror}") from None
        if not resolved:
            raise OSError(f"no address for {host!r}")
        unique = list(dict.fromkeys(resolved))
        for ip in unique:
            if (str(ip), port) not in self._trusted:
                check_address(host, ip, self.policy)
        return [_sockaddr(ip, port) for ip in unique]


def _sockaddr(ip: IPAddress, port: int) -> SockAddr:
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    return family, (str(ip), port)


def check_provider_egress(provider: Any, policy: EgressSettings, resolve: bool = False) -> None:
    """Raise EgressDenied, naming the provider and field, if any URL of ``provider`` is
    refused (``resolve``: the addresses its names resolve to now are checked too)."""
    for endpoint in provider_endpoints(provider):
        try:
            check_url(endpoint.url, policy, resolve)
        except EgressDenied as exc:
            name = getattr(provider, "name", "?")
            raise EgressDenied(f"provider {name!r}: {endpoint.field}: {exc}") from None
