"""What an error message may carry once it leaves the process that saw it.

A failed request's message quotes what a provider answered (an error body, an exception
text), and providers echo what they were sent: keys, signed URLs, prompts' ids. Every
message a worker records goes through :func:`redact` (workers/shard/rows.py), and the report
applies it again to what it shows, so a file written by an older version shows nothing
more. The rules, in order (docs/security.md, "Error messages"):

1. secrets: the caller's known secret values; ``Bearer …``/``Basic …``; the value after
   ``api_key``, ``x-api-key``, ``authorization``, ``token``, ``secret``, ``password``,
   ``signature`` and ``credential`` labels; ``sk-…`` keys, AWS access key ids, JWTs, and
   long runs of letters and digits (32 or more, or 40 or more with ``+``/``/``), which is
   what keys and tokens look like → ``[redacted]``;
2. URLs: their user:password part and their query string and fragment → ``[redacted]``
   (signed URLs carry their credentials there);
3. values that differ from one request to the next, so that one cause reads as one
   message: UUIDs and other ids (runs of 12 or more letters and digits with both, hex
   runs of 8 or more with a digit) → ``<id>``, ISO timestamps → ``<time>``, free-standing
   numbers of four or more digits (a request id, a token count) → ``<n>``; a port after
   ``host:``, digits inside a word (``gpt-4o``, ``70B``), an address, ``HTTP 503`` and
   ``[Errno 111]`` are kept;
4. control characters (a terminal escape sequence from a hostile server) and runs of
   whitespace become one space, and the length is capped at :data:`MAX_MESSAGE_CHARS`.

The rules are idempotent: redacting a redacted message changes nothing.

A URL a user gave to be called back (a schedule's ``webhook_url``) is shown by
:func:`public_url`: its scheme, host and port only, because webhooks carry their
credentials in every other part (``user:password@``, ``?token=``, and Slack's, Discord's
or Teams' hooks in the path itself).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["MAX_MESSAGE_CHARS", "REDACTED", "public_url", "redact"]

MAX_MESSAGE_CHARS = 300
REDACTED = "[redacted]"

_VALUE = r"[^\s\"',;}&]+"
_LABELLED = re.compile(
    # A label, an optional closing quote, then ``=`` or ``:`` (``api key`` also a space),
    # then the value, optionally quoted and after a scheme word (``Bearer``).
    r"(?i)((?:x-)?api[-_ ]?key|authorization|access[-_]?token|refresh[-_]?token|"
    r"secret(?:[-_]?access)?[-_]?key|client[-_]?secret|secret|password|passwd|token|"
    r"signature|credentials?)"
    r"([\"']?\s*[=:]\s*[\"']?(?:(?:bearer|basic|token)\s+)?)" + _VALUE
)
_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+(?!\[redacted\])" + _VALUE)
_KEY_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_-]{8,}"  # OpenAI-style keys (sk-live-…, sk-proj-…)
    r"|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"  # AWS access key ids
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # JWTs
    # base64 with + or /: mixed case and a digit, so that a long path is not taken for one
    r"|(?<![A-Za-z0-9+/])(?=[A-Za-z0-9+/]*[+/])(?=[A-Za-z0-9+/]*\d)"
    r"(?=[A-Za-z0-9+/]*[A-Z])(?=[A-Za-z0-9+/]*[a-z])[A-Za-z0-9+/]{40,}=*"
    r"|(?<![A-Za-z0-9])(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{32,}=*"
)
_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s\"'<>]*)")
_UUID = re.compile(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
_MIXED_ID = re.compile(
    r"(?<![A-Za-z0-9<])(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{12,}(?![A-Za-z0-9>])"
)
_HEX_ID = re.compile(
    r"(?<![A-Za-z0-9<])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}(?![A-Za-z0-9>])"
)
# Not after a letter, digit, ``.``, ``:`` or ``-`` (a word, an address, a port, a model's
# date suffix), and not before a letter or ``.digit``.
_NUMBER = re.compile(r"(?<![\w.:\-<])\d{4,}(?![\w>]|\.\d)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _url(match: re.Match[str]) -> str:
    scheme, rest = match.group(1), match.group(2)
    authority, sep, tail = rest.partition("/")
    if "@" in authority:
        authority = REDACTED + "@" + authority.rpartition("@")[2]
    rest = authority + sep + tail
    for mark in ("?", "#"):
        head, found, after = rest.partition(mark)
        if found and after and not after.startswith(REDACTED):
            rest = head + mark + REDACTED
    return scheme + rest


def redact(message: str, secrets: tuple[str, ...] = ()) -> str:
    """``message`` without secrets, URL credentials and queries, with varying ids and
    numbers replaced by placeholders, whitespace collapsed and at most
    :data:`MAX_MESSAGE_CHARS` characters long (the module's rules, in order)."""
    for secret in secrets:
        if secret:
            message = message.replace(secret, REDACTED)
    message = _CONTROL.sub(" ", message)
    message = _LABELLED.sub(lambda m: m.group(1) + m.group(2) + REDACTED, message)
    message = _SCHEME.sub(lambda m: m.group(1) + " " + REDACTED, message)
    message = _KEY_SHAPES.sub(REDACTED, message)
    message = _URL.sub(_url, message)
    message = _UUID.sub("<id>", message)
    message = _TIMESTAMP.sub("<time>", message)
    message = _MIXED_ID.sub("<id>", message)
    message = _HEX_ID.sub("<id>", message)
    message = _NUMBER.sub("<n>", message)
    message = " ".join(message.split())
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    return message


def public_url(url: str) -> str:
    """``url`` as a reader may see it: ``scheme://host[:port]/``, followed by
    ``[redacted]`` when it had anything else (user and password, path, query or
    fragment), and a user part shown as ``[redacted]@``. Idempotent."""
    masked = f"{REDACTED}@"
    had_user = masked in url
    try:
        parts = urlsplit(url.strip().replace(masked, "", 1))
        port = parts.port
    except ValueError:
        return REDACTED
    host = parts.hostname or ""
    if not parts.scheme or not host:
        return REDACTED
    shown_host = f"[{host}]" if ":" in host else host
    authority = shown_host if port is None else f"{shown_host}:{port}"
    if had_user or parts.username is not None or parts.password is not None:
        authority = f"{REDACTED}@{authority}"
    rest = (parts.path not in ("", "/")) or parts.query or parts.fragment
    return f"{parts.scheme.lower()}://{authority}/{REDACTED if rest else ''}"
