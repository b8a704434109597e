"""Where a worker secret may travel: the rules of a binding, parsed and matched.

A variable is bound to rules (``TOKENBENCH__WORKER__SECRET_HOSTS``, a preset's
``hosts``, the owner's own scenario); each rule is ``[scheme://]host[:port]``:

* ``host`` is compared label by label. ``*`` alone stands for exactly one DNS label
  (never a dot, never an empty label); inside a label it stands for part of that label
  (``vllm-*.internal``). ``{aws-region}`` stands for one AWS region label
  (``us-east-1``, ``us-gov-west-1``, ``eu-central-2``), so that ``bedrock-runtime.
  {aws-region}.amazonaws.com`` is Bedrock's regional endpoints and nothing else under
  ``amazonaws.com`` (``bedrock-runtime.s3.amazonaws.com`` is an S3 bucket anyone can
  name).
* ``scheme`` is ``https`` unless the rule says ``http://``: a key travels in clear only
  where the operator wrote so.
* ``port`` is the scheme's default (443, or 80 for ``http://``) unless the rule names
  one; ``:*`` allows any port (a loopback test server on a free port).

So ``api.groq.com`` lets a key go to ``https://api.groq.com`` (port 443) only, never to
``http://api.groq.com`` nor to ``https://api.groq.com:8080``.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

__all__ = ["DEFAULT_PORTS", "HostRule", "InvalidHostRule", "host_matches", "parse_rule"]

DEFAULT_PORTS = {"https": 443, "http": 80}
AWS_REGION_LABEL = "{aws-region}"
# us-east-1, eu-central-2, ap-southeast-3, us-gov-west-1, us-isob-east-1, cn-north-1.
_AWS_REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}")
_PATTERN_LABEL = re.compile(r"[a-z0-9*?\-_]+|\{aws-region\}")


class InvalidHostRule(ValueError):
    """A binding rule that is not ``[http(s)://]host[:port]``."""


def _normalise(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


def _label_matches(label: str, wanted: str) -> bool:
    if wanted == "*":
        return label != ""
    if wanted == AWS_REGION_LABEL:
        return _AWS_REGION.fullmatch(label) is not None
    return label != "" and fnmatch.fnmatchcase(label, wanted)


def host_matches(host: str, pattern: str) -> bool:
    """Whether ``host`` matches the host ``pattern`` label by label (the module's rules:
    ``*`` is one label, or part of one; ``{aws-region}`` one AWS region label)."""
    name, wanted = _normalise(host), _normalise(pattern)
    if ":" in name or ":" in wanted:  # an IPv6 address: compared whole
        return name == wanted
    host_labels, pattern_labels = name.split("."), wanted.split(".")
    return len(host_labels) == len(pattern_labels) and all(
        _label_matches(label, want) for label, want in zip(host_labels, pattern_labels, strict=True)
    )


@dataclass(frozen=True, slots=True)
class HostRule:
    """One place a secret may go: a scheme, a host pattern and a port (None: any)."""

    scheme: str
    host: str
    port: int | None

    def allows(self, scheme: str, host: str, port: int | None) -> bool:
        """Whether a request to ``scheme://host:port`` (port None: the scheme's
        default) is allowed by this rule."""
        effective = DEFAULT_PORTS.get(scheme) if port is None else port
        return (
            scheme == self.scheme
            and (self.port is None or effective == self.port)
            and host_matches(host, self.host)
        )

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{'*' if self.port is None else self.port}"


def parse_rule(entry: str) -> HostRule:
    """The rule written as ``[scheme://]host[:port]``; InvalidHostRule otherwise."""
    text = entry.strip()
    scheme, found, rest = text.partition("://")
    if not found:
        scheme, rest = "https", text
    scheme = scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidHostRule(f"{entry!r}: the scheme must be https:// or http://")
    rest = rest.rstrip("/")
    if any(mark in rest for mark in "/?#@"):
        raise InvalidHostRule(f"{entry!r}: give a host and optionally a port, no path")
    if rest.startswith("["):
        host, bracket, port_text = rest[1:].partition("]")
        if not bracket or (port_text and not port_text.startswith(":")):
            raise InvalidHostRule(f"{entry!r}: an IPv6 address is written [address]:port")
        port_text = port_text[1:] if port_text else ""
        had_port = bool(port_text)
    else:
        host, had_colon, port_text = rest.partition(":")
        had_port = bool(had_colon)
    host = _normalise(host)
    if not host or not (":" in host or all(_PATTERN_LABEL.fullmatch(x) for x in host.split("."))):
        raise InvalidHostRule(f"{entry!r}: {host!r} is not a host name or pattern")
    if not had_port:
        return HostRule(scheme, host, DEFAULT_PORTS[scheme])
    if port_text == "*":
        return HostRule(scheme, host, None)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InvalidHostRule(f"{entry!r}: the port must be a number from 1 to 65535, or *")
    return HostRule(scheme, host, int(port_text))
