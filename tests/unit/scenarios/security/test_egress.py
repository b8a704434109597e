"""The egress policy (scenarios/security/egress.py) and its guard in the worker's transport.

Pure rules first: embedded IPv4 addresses are unwrapped before the rules apply, every
metadata/management range is refused whatever the settings, loopback and private ranges
only when allowed, and every message names the variable an operator sets. Then the
guard on real loopback sockets, with an injected resolver: one resolution per
connection, exactly the checked address connected to (DNS rebinding), a refused address
never connected to, the worker's own endpoints trusted by exact address and port, Host
header and TLS server name unchanged, redirects never followed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import select
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scenarios.model import Scenario
from scenarios.security.egress import (
    EgressDenied,
    EgressGuard,
    address_refusal,
    check_url,
    embedded_ipv4,
    metrics_endpoints,
    provider_endpoints,
)
from scenarios.settings import EgressSettings
from tests.fakes.tls import self_signed
from workers.client.adapters.openai_chat import ChatParser
from workers.client.errors import ErrorClass, classify_exception
from workers.client.http import make_client
from workers.client.streaming import HttpCall, Limits, measure_request
from workers.client.transport import ArrivalTransport, EgressRefused

DEFAULT = EgressSettings()
OPEN = EgressSettings(allow_loopback=True, allow_private=True)


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


# ------------------------------------------------------------------ pure rules


@pytest.mark.parametrize(
    ("address", "embedded"),
    [
        ("::ffff:169.254.169.254", "169.254.169.254"),  # IPv4-mapped
        ("::ffff:0:a9fe:a9fe", "169.254.169.254"),  # IPv4-translated
        ("::a9fe:a9fe", "169.254.169.254"),  # IPv4-compatible
        ("64:ff9b::a9fe:a9fe", "169.254.169.254"),  # NAT64 well-known prefix
        ("2002:a9fe:a9fe::1", "169.254.169.254"),  # 6to4
        ("2001:0:4136:e378:8000:63bf:5601:5601", "169.254.169.254"),  # Teredo client
    ],
)
def test_embedded_ipv4_is_unwrapped(address: str, embedded: str) -> None:
    assert ip(embedded) in embedded_ipv4(ip(address))


def test_nat64_local_use_prefix_checks_every_rfc6052_layout() -> None:
    # 169.254.169.254 behind a /48 local-use prefix (bits 48-63 and 72-87) and a /96 one.
    assert ip("169.254.169.254") in embedded_ipv4(ip("64:ff9b:1:a9fe:a9:fe00::"))
    assert ip("169.254.169.254") in embedded_ipv4(ip("64:ff9b:1::a9fe:a9fe"))


@pytest.mark.parametrize("address", ["::", "::1", "2606:4700::1111", "10.0.0.1"])
def test_addresses_without_an_embedded_ipv4(address: str) -> None:
    assert embedded_ipv4(ip(address)) == []


ALWAYS_REFUSED = [
    "169.254.169.254",  # AWS/GCP/Azure IMDS
    "169.254.170.2",  # ECS task metadata
    "fe80::1",
    "100.100.100.200",  # Alibaba metadata
    "100.64.1.1",  # CGNAT
    "168.63.129.16",  # Azure WireServer
    "fd00:ec2::254",  # AWS IPv6 IMDS
    "192.0.0.192",
    "0.0.0.0",
    "0.1.2.3",
    "::",
    "224.0.0.1",
    "ff02::1",
    "255.255.255.255",
    "240.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:100.100.100.200",
    "::ffff:168.63.129.16",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b:1::a9fe:a9fe",
    "2002:a9fe:a9fe::",
    "2002:a83f:8110::",  # 6to4 of Azure WireServer
    "2001:0:4136:e378:8000:63bf:5601:5601",
    "::a9fe:a9fe",
]


@pytest.mark.parametrize("address", ALWAYS_REFUSED)
def test_metadata_and_management_addresses_are_refused_even_when_everything_is_allowed(
    address: str,
) -> None:
    reason = address_refusal(ip(address), OPEN)
    assert reason is not None and "always refused" in reason


@pytest.mark.parametrize("address", ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1"])
def test_loopback_needs_its_setting(address: str) -> None:
    reason = address_refusal(ip(address), DEFAULT)
    assert reason is not None and "TOKENBENCH__EGRESS__ALLOW_LOOPBACK=true" in reason
    assert address_refusal(ip(address), EgressSettings(allow_loopback=True)) is None


@pytest.mark.parametrize(
    "address",
    ["10.1.2.3", "172.16.0.1", "192.168.1.1", "fd12::1", "::ffff:10.0.0.1", "64:ff9b::a00:1"],
)
def test_private_ranges_need_their_setting(address: str) -> None:
    reason = address_refusal(ip(address), DEFAULT)
    assert reason is not None and "TOKENBENCH__EGRESS__ALLOW_PRIVATE=true" in reason
    assert address_refusal(ip(address), EgressSettings(allow_private=True)) is None


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700::1111", "64:ff9b::808:808"])
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ip(address), DEFAULT) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://[::ffff:169.254.169.254]/v1",
        "http://[::ffff:100.100.100.200]/v1",
        "http://168.63.129.16/v1",
        "http://100.64.1.1/v1",
        "http://[fd00:ec2::254]/v1",
        "http://[64:ff9b::a9fe:a9fe]/v1",
        "http://[2002:a9fe:a9fe::]/v1",
        "http://2852039166/v1",  # 169.254.169.254 as one decimal number
        "http://0xa9.0xfe.0xa9.0xfe/v1",
        "http://169.254.43518/v1",
        "http://[fe80::1%25eth0]/v1",
    ],
)
def test_urls_are_checked_without_dns_as_the_client_parses_them(url: str) -> None:
    with pytest.raises(EgressDenied, match="always refused"):
        check_url(url, OPEN)


def test_host_patterns_name_their_variable() -> None:
    policy = EgressSettings(allow=["*.together.xyz"])
    check_url("https://api.together.xyz/v1", policy)
    with pytest.raises(EgressDenied, match="TOKENBENCH__EGRESS__ALLOW "):
        check_url("https://evil.example/v1", policy)
    with pytest.raises(EgressDenied, match="not an http"):
        check_url("file:///etc/passwd", policy)


def test_every_url_field_of_every_kind_is_an_endpoint() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "t",
            "providers": [
                {"name": "b", "kind": "bedrock", "model": "m", "region": "eu-west-1"},
                {"name": "be", "kind": "bedrock", "model": "m", "endpoint_url": "http://x.test"},
                {"name": "a", "kind": "azure-openai", "model": "m", "api_key_env": "K",
                 "endpoint": "https://r.openai.azure.com"},
                {"name": "s", "kind": "simulated"},
            ],
            "workload": {"mix": [{"prompt_tokens": {"dist": "fixed", "value": 4},
                                  "output_tokens": {"dist": "fixed", "value": 2}}]},
            "load": {"concurrency": [1], "requests_per_level": 1},
        }
    )  # fmt: skip
    found = [[(e.field, e.url) for e in provider_endpoints(p)] for p in scenario.providers]
    assert found == [
        [("endpoint_url", "https://bedrock-runtime.eu-west-1.amazonaws.com")],
        [("endpoint_url", "http://x.test")],
        [("endpoint", "https://r.openai.azure.com")],
        [],
    ]


def test_a_metrics_url_is_a_url_to_check_unless_it_is_a_simulator_path() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "t",
            "providers": [
                {"name": "v", "kind": "openai", "base_url": "http://10.0.0.5:8000/v1",
                 "model": "m", "metrics_url": "http://10.0.0.6:9400/metrics"},
                {"name": "s", "kind": "simulated", "metrics_url": "/metrics"},
                {"name": "t", "kind": "tgi", "base_url": "http://10.0.0.7"},
            ],
            "workload": {"mix": [{"prompt_tokens": {"dist": "fixed", "value": 4},
                                  "output_tokens": {"dist": "fixed", "value": 2}}]},
            "load": {"concurrency": [1], "requests_per_level": 1},
        }
    )  # fmt: skip
    found = [[(e.field, e.url) for e in metrics_endpoints(p)] for p in scenario.providers]
    assert found == [[("metrics_url", "http://10.0.0.6:9400/metrics")], [], []]
    # The measurement URLs are unchanged: a refused metrics URL never fails a shard.
    assert [e.field for e in provider_endpoints(scenario.providers[0])] == ["base_url"]
    with pytest.raises(EgressDenied, match="private"):
        check_url(metrics_endpoints(scenario.providers[0])[0].url, EgressSettings())


# ------------------------------------------------------------------ the guard, real sockets


class Recorder:
    """A loopback HTTP server recording connections, Host headers and request lines."""

    def __init__(self, address: str = "127.0.0.1", port: int = 0, answer: bytes = b"") -> None:
        self.listener = socket.create_server((address, port))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self.answer = (
            answer or b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
        )
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data:
                    piece = conn.recv(65536)
                    if not piece:
                        break
                    data += piece
                self.requests.append(data)
                conn.sendall(self.answer)

    def pending(self) -> bool:
        """Whether a connection waits in the listener's queue, not yet accepted."""
        return bool(select.select([self.listener], [], [], 0)[0])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (Linux)
        self.listener.close()
        self._thread.join(10)


@pytest.fixture
def recorders() -> Iterator[list[Recorder]]:
    started: list[Recorder] = []
    yield started
    for recorder in started:
        recorder.close()


class ScriptedResolver:
    """Answers the n-th lookup with ``answers[n]`` (the last one repeats), and counts."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


def get(client: httpx.AsyncClient, url: str) -> httpx.Response:
    async def go() -> httpx.Response:
        async with client:
            return await client.get(url)

    return asyncio.run(go())


def test_a_rebinding_name_is_connected_to_the_address_that_was_checked(
    recorders: list[Recorder],
) -> None:
    # The name's first answer is 127.0.0.2; any later lookup would say 127.0.0.3, where
    # another server listens on the same port. The request must land on 127.0.0.2 and
    # the name must be resolved exactly once.
    first = Recorder("127.0.0.2")
    recorders.append(first)
    second = Recorder("127.0.0.3", first.port)
    recorders.append(second)
    resolver = ScriptedResolver(["127.0.0.2"], ["127.0.0.3"])
    guard = EgressGuard(EgressSettings(allow_loopback=True), resolver)
    response = get(make_client(guard=guard), f"http://rebind.test:{first.port}/v1/models")
    assert response.status_code == 200
    assert resolver.calls == ["rebind.test"]
    assert (first.connections, second.connections) == (1, 0)
    assert b"\r\nhost: rebind.test:%d\r\n" % first.port in first.requests[0].lower()


def test_a_name_resolving_to_a_forbidden_address_is_refused_before_any_connect(
    recorders: list[Recorder],
) -> None:
    target = Recorder()
    recorders.append(target)
    # One good address and one metadata address: the whole name is refused.
    resolver = ScriptedResolver(["127.0.0.1", "169.254.169.254"])
    guard = EgressGuard(EgressSettings(allow_loopback=True), resolver)
    with pytest.raises(EgressRefused, match=r"169\.254\.169\.254") as caught:
        get(make_client(guard=guard), f"http://meta.test:{target.port}/")
    assert classify_exception(caught.value).error_class is ErrorClass.CONNECT
    # A connect would have been accepted or be in the listener's queue by now
    # (loopback connects complete in the kernel): neither happened.
    assert target.connections == 0 and not target.pending()


def test_a_rebinding_name_turning_forbidden_is_refused_on_its_next_connection(
    recorders: list[Recorder],
) -> None:
    target = Recorder()
    recorders.append(target)
    resolver = ScriptedResolver(["127.0.0.1"], ["::ffff:169.254.169.254"])
    guard = EgressGuard(EgressSettings(allow_loopback=True), resolver)

    async def go() -> tuple[int, BaseException | None]:
        async with make_client(guard=guard) as http:
            first = await http.get(f"http://flip.test:{target.port}/")
            try:
                await http.get(f"http://flip.test:{target.port}/")  # connection: close
            except httpx.ConnectError as exc:
                return first.status_code, exc
            return first.status_code, None

    status, error = asyncio.run(go())
    assert status == 200 and isinstance(error, EgressRefused)
    assert "169.254.169.254" in str(error)
    assert target.connections == 1 and len(resolver.calls) == 2


def test_loopback_is_refused_by_default_but_the_workers_own_endpoint_is_trusted_exactly(
    recorders: list[Recorder],
) -> None:
    own, other = Recorder(), Recorder()
    recorders.extend([own, other])
    guard = EgressGuard(DEFAULT)
    guard.trust("127.0.0.1", own.port)
    assert get(make_client(guard=guard), f"http://127.0.0.1:{own.port}/").status_code == 200
    with pytest.raises(EgressRefused, match="TOKENBENCH__EGRESS__ALLOW_LOOPBACK=true"):
        get(make_client(guard=guard), f"http://127.0.0.1:{other.port}/")
    assert (own.connections, other.connections) == (1, 0)


def test_a_stopped_endpoint_is_no_longer_trusted(recorders: list[Recorder]) -> None:
    # A simulator that stopped frees its port: whatever binds it next is judged by the
    # policy again (workers/simulator/pool.py withdraws the trust).
    reused = Recorder()
    recorders.append(reused)
    guard = EgressGuard(DEFAULT)
    guard.trust("127.0.0.1", reused.port)
    guard.distrust("127.0.0.1", reused.port)
    guard.distrust("127.0.0.1", reused.port)  # twice: harmless
    with pytest.raises(EgressRefused, match="TOKENBENCH__EGRESS__ALLOW_LOOPBACK=true"):
        get(make_client(guard=guard), f"http://127.0.0.1:{reused.port}/")
    assert reused.connections == 0


@pytest.mark.parametrize(
    "host", ["[::ffff:169.254.169.254]", "168.63.129.16", "[fd00:ec2::254]", "100.100.100.200"]
)
def test_literal_addresses_are_refused_by_the_transport_too(host: str) -> None:
    guard = EgressGuard(OPEN, ScriptedResolver([]))
    with pytest.raises(EgressRefused, match="always refused"):
        get(make_client(guard=guard), f"http://{host}:80/")


def test_benchmark_transports_cannot_be_built_with_a_guard() -> None:
    with pytest.raises(ValueError, match="cannot apply the egress guard"):
        make_client("aiohttp", guard=EgressGuard(DEFAULT))
    with pytest.raises(ValueError, match="cannot apply the egress guard"):
        make_client("native", guard=EgressGuard(DEFAULT))


def test_a_redirect_is_an_error_row_and_is_never_followed(recorders: list[Recorder]) -> None:
    target = Recorder()
    recorders.append(target)
    location = f"http://127.0.0.1:{target.port}/stolen"
    redirecting = Recorder(
        answer=(
            b"HTTP/1.1 307 Temporary Redirect\r\nlocation: %s\r\ncontent-length: 0\r\n"
            b"connection: close\r\n\r\n" % location.encode()
        )
    )
    recorders.append(redirecting)
    guard = EgressGuard(EgressSettings(allow_loopback=True))
    limits = Limits(10, 10, 10, ("sk-redirect-secret",))
    call = HttpCall(
        "POST",
        f"http://127.0.0.1:{redirecting.port}/v1/chat/completions",
        {"authorization": "Bearer sk-redirect-secret"},
        b"{}",
    )

    async def go() -> Any:
        async with make_client(guard=guard) as http:
            return await measure_request(http, call, ChatParser, limits, None, 0)

    result = asyncio.run(go())
    assert result.failure is not None
    assert result.failure.error_class is ErrorClass.PROTOCOL
    assert result.failure.http_status == 307
    assert "not followed" in result.failure.message
    assert (redirecting.connections, target.connections) == (1, 0)


# ------------------------------------------------------------------ TLS: SNI unchanged


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"), "pinned.test")


def test_tls_keeps_the_server_name_while_connecting_to_the_checked_address(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    names: list[str | None] = []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    def record_name(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        names.append(name)

    context.sni_callback = record_name
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    heads: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with context.wrap_socket(conn, server_side=True) as secure:
            data = b""
            while b"\r\n\r\n" not in data:
                data += secure.recv(65536)
            heads.append(data)
            secure.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    resolver = ScriptedResolver(["127.0.0.1"])
    guard = EgressGuard(EgressSettings(allow_loopback=True), resolver)
    trusted = ssl.create_default_context(cafile=str(cert))
    client = httpx.AsyncClient(transport=ArrivalTransport(verify=trusted, guard=guard))
    try:
        response = get(client, f"https://pinned.test:{port}/v1")
    finally:
        thread.join(10)
        listener.close()
    assert response.status_code == 200
    assert names == ["pinned.test"]
    assert b"\r\nhost: pinned.test:%d\r\n" % port in heads[0].lower()
    assert resolver.calls == ["pinned.test"]
