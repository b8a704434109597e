"""Error messages lose secrets, URL credentials and queries, and the ids and numbers that
differ per request, so one cause reads as one message (scenarios/security/redaction.py)."""

from __future__ import annotations

import pytest

from scenarios.security.redaction import MAX_MESSAGE_CHARS, public_url, redact

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THs"


@pytest.mark.parametrize(
    ("message", "secret", "expected"),
    [
        (
            'HTTP 401: {"error": "Incorrect API key provided: sk-proj-abcdefghijklmnop1234"}',
            "sk-proj-abcdefghijklmnop1234",
            'HTTP 401: {"error": "Incorrect API key provided: [redacted]"}',
        ),
        (
            "denied for Bearer abcd1234secret, Authorization: Basic dXNlcjpwYXNz",
            "abcd1234secret",
            "denied for Bearer [redacted], Authorization: Basic [redacted]",
        ),
        (
            'api_key=k1 x-api-key: "k2" password: hunter2 token="t3" client_secret=c4',
            "hunter2",
            'api_key=[redacted] x-api-key: "[redacted]" password: [redacted] '
            'token="[redacted]" client_secret=[redacted]',
        ),
        (f"signed with AKIAIOSFODNN7EXAMPLE and {AWS_SECRET}", AWS_SECRET,
         "signed with [redacted] and [redacted]"),
        (f"token {JWT} expired", JWT, "token [redacted] expired"),
        ("hex key 0123456789abcdef0123456789abcdef01 refused", "0123456789abcdef",
         "hex key [redacted] refused"),
    ],
)  # fmt: skip
def test_secrets_are_removed(message: str, secret: str, expected: str) -> None:
    redacted = redact(message)
    assert secret not in redacted
    assert redacted == expected


def test_known_secret_values_are_removed_whatever_they_look_like() -> None:
    assert redact("echo: my-short-key!", ("my-short-key",)) == "echo: [redacted]!"


def test_urls_lose_their_credentials_query_and_fragment_but_keep_host_and_path() -> None:
    message = (
        "ConnectError: [Errno 111] Connection refused: "
        "https://alice:s3cret@api.example.com:8443/v1/chat/completions?sig=abc&exp=1#part"
    )
    assert redact(message) == (
        "ConnectError: [Errno 111] Connection refused: "
        "https://[redacted]@api.example.com:8443/v1/chat/completions?[redacted]"
    )


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (
            "HTTP 503: overloaded, request id 1234567, retry after 2024-05-01T12:00:00.125Z",
            "HTTP 503: overloaded, request id 7654321, retry after 2024-05-01T12:00:09Z",
            "HTTP 503: overloaded, request id <n>, retry after <time>",
        ),
        (
            "HTTP 500: req_01HZX4F2K9M8N7P6Q5R4S3T2V1 trace a1b2c3d4e5f6 "
            "id 123e4567-e89b-12d3-a456-426614174000",
            "HTTP 500: req_01J0000000000000000000ZZZZ trace 9f8e7d6c5b4a "
            "id 00000000-0000-4000-8000-000000000000",
            "HTTP 500: req_<id> trace <id> id <id>",
        ),
        (
            "HTTP 400: maximum context length is 4096 tokens; you requested 5123 tokens",
            "HTTP 400: maximum context length is 4096 tokens; you requested 9000 tokens",
            "HTTP 400: maximum context length is <n> tokens; you requested <n> tokens",
        ),
    ],
)
def test_values_that_vary_per_request_read_alike(first: str, second: str, expected: str) -> None:
    assert redact(first) == redact(second) == expected


def test_what_names_the_cause_is_kept() -> None:
    message = (
        "HTTP 404: model gpt-4o-2024-08-06 not found on 10.0.0.12:8000 "
        "(meta-llama/Llama-3.1-70B-Instruct, v1.2.3456), [Errno 111], 32 of 512 tokens"
    )
    assert redact(message) == message


def test_control_characters_whitespace_and_length() -> None:
    # A terminal escape sequence from a hostile server is not passed on.
    assert redact("bad\x1b[2J\x1b]0;title\x07 answer\n\n\tnext") == "bad [2J ]0;title answer next"
    long = redact("y" * 5000)
    assert len(long) == MAX_MESSAGE_CHARS and long.endswith("…")


@pytest.mark.parametrize(
    "message",
    [
        "Bearer sk-abcdefghijkl1234 at https://u:p@h.example/x?y=1 id 12345678 on <n>",
        "api_key=[redacted] and <id> and <time>",
        "z" * 1000,
    ],
)
def test_redacting_twice_changes_nothing(message: str) -> None:
    once = redact(message)
    assert redact(once) == once


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.example.com", "https://hooks.example.com/"),
        ("https://hooks.example.com/", "https://hooks.example.com/"),
        ("HTTPS://Hooks.Example.com:8443", "https://hooks.example.com:8443/"),
        # Slack-, Discord- and Teams-style hooks keep their secret in the path.
        ("https://hooks.slack.com/services/T0/B0/XyZ", "https://hooks.slack.com/[redacted]"),
        ("https://h.example/notify?token=abc", "https://h.example/[redacted]"),
        ("https://h.example/#frag", "https://h.example/[redacted]"),
        ("https://u:pw@h.example:9/p?q=1", "https://[redacted]@h.example:9/[redacted]"),
        ("https://u@h.example", "https://[redacted]@h.example/"),
        ("http://[::1]:8000/x", "http://[::1]:8000/[redacted]"),
        ("not a url", "[redacted]"),
        ("https://h.example:99999/", "[redacted]"),
    ],
)
def test_a_public_url_shows_where_it_goes_and_nothing_else(url: str, shown: str) -> None:
    assert public_url(url) == shown
    assert public_url(shown) == shown  # idempotent
