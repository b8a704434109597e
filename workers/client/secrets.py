"""Which worker secret may be sent where: the one lookup adapters read keys through.

A worker holds its organisation's provider keys in its environment; a scenario only
names the *variable* holding a key (``api_key_env`` and the like). A submitter does not
own those keys, so naming a variable must not be enough to send its value anywhere: the
worker sends a value only to the places the variable is bound to, each a rule
``[scheme://]host[:port]`` (scenarios/security/host_rules.py): over TLS to port 443 unless the
rule says ``http://`` or names a port, to a host matching the rule's pattern (``*`` is
one DNS label).

Bindings come from two places, merged:

* the preset catalog (``scenarios/providers/presets/catalog.yaml``): each preset's key variables
  to that preset's hosts, so ``preset: groq`` with ``GROQ_API_KEY`` works as is (and
  goes to ``https://api.groq.com`` only);
* the operator: ``TOKENBENCH__WORKER__SECRET_HOSTS``, a JSON object of variable → rules,
  e.g. ``{"MY_VLLM_KEY": ["http://vllm.internal:8000"]}``.

``tokenbench run`` on the embedded default and ``tokenbench providers check`` add the
bindings of the user's own scenario (:func:`owner_bindings`: each URL's own scheme, host
and port): it is their machine.

Every variable whose name starts with ``TOKENBENCH`` (the service's own settings) is
refused even if bound. A refusal is a :class:`SecretRefused` (a ProviderSetupError):
the shard fails with a message naming the variable, the host, scheme and port asked
for, the rules the variable is bound to and how to bind it, and nothing is sent. Values
are read when asked for and kept only by the adapter that asked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scenarios.errors import Refused
from scenarios.providers.presets import preset_secret_hosts
from scenarios.security.egress import (
    EgressDenied,
    metrics_endpoints,
    normalise_host,
    provider_endpoints,
    url_host,
)
from scenarios.security.host_rules import (
    DEFAULT_PORTS,
    HostRule,
    InvalidHostRule,
    host_matches,
    parse_rule,
)
from scenarios.settings import env_name
from workers.client.provider_setup import ProviderSetupError

SECRET_HOSTS_VARIABLE = env_name("worker.secret_hosts")
RESERVED_PREFIX = "TOKENBENCH"

Bindings = Mapping[str, tuple[str, ...]]


class SecretRefused(Refused, ProviderSetupError):
    """A variable may not be sent to a host: it is not bound there, or it is reserved."""


def host_of(url: str) -> str:
    """The host ``url`` connects to, as the HTTP client parses it (normalised)."""
    return normalise_host(url_host(url)[1])


def merge_bindings(*sources: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
    """Union of binding maps (hosts of one variable in first-seen order)."""
    merged: dict[str, tuple[str, ...]] = {}
    for source in sources:
        for variable, hosts in source.items():
            merged[variable] = tuple(dict.fromkeys([*merged.get(variable, ()), *hosts]))
    return merged


def is_reserved(variable: str) -> bool:
    """True for the service's own settings (``TOKENBENCH*``), never sent to a provider."""
    return variable.upper().startswith(RESERVED_PREFIX)


@dataclass(frozen=True)
class Secrets:
    """Secret values by variable, released only for hosts the variable is bound to."""

    bindings: Bindings = field(default_factory=preset_secret_hosts)
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    holder: str = "this worker"

    def bound_hosts(self, variable: str) -> tuple[str, ...]:
        """Rules ``variable`` may be sent to, as bound (empty for reserved variables)."""
        return () if is_reserved(variable) else self.bindings.get(variable, ())

    def check(self, variable: str, url: str, provider: str) -> None:
        """Raise SecretRefused unless ``variable`` may be sent with a request to ``url``
        (its scheme, host and port: see scenarios/security/host_rules.py)."""
        try:
            scheme, raw_host, port = url_host(url)
        except EgressDenied as exc:
            raise SecretRefused(
                f"provider {provider!r}: variable {variable} is sent to http(s) URLs only: {exc}"
            ) from None
        name = normalise_host(raw_host)
        effective = DEFAULT_PORTS[scheme] if port is None else port
        where = f"host {name!r} ({scheme}, port {effective})"
        if is_reserved(variable):
            raise SecretRefused(
                f"provider {provider!r}: variable {variable} is a tokenbench setting and is "
                f"never sent to a provider ({where})"
            )
        written = self.bound_hosts(variable)
        rules = _rules(written)
        if any(rule.allows(scheme, name, port) for rule in rules):
            return
        if not written:
            bound = "it is bound to no host"
        else:
            bound = f"it is bound to {', '.join(written)} (that is {', '.join(map(str, rules))})"
            if any(host_matches(name, rule.host) for rule in rules):
                bound += (
                    "; a key travels over https to port 443 unless its binding says "
                    "http:// or names the port"
                )
        target = _rule_text(scheme, name, effective)
        example = json.dumps({variable: [target]})
        raise SecretRefused(
            f"provider {provider!r}: variable {variable} may not be sent to {where} "
            f"from {self.holder}: {bound}. The operator binds it on the worker with "
            f"{SECRET_HOSTS_VARIABLE}='{example}'"
        )

    def get(self, variable: str | None, url: str, provider: str) -> str | None:
        """The value of ``variable`` for a request to ``url`` (None if no variable is
        named); SecretRefused if it may not go there, ProviderSetupError if unset."""
        if variable is None:
            return None
        self.check(variable, url, provider)
        value = self.environ.get(variable)
        if not value:
            raise ProviderSetupError(
                f"provider {provider!r}: environment variable {variable} is not set on "
                f"{self.holder}"
            )
        return value

    def with_bindings(self, extra: Mapping[str, Iterable[str]]) -> Secrets:
        """The same lookup with ``extra`` bindings added."""
        return Secrets(merge_bindings(self.bindings, extra), self.environ, self.holder)


def worker_secrets(configured: Mapping[str, Iterable[str]], holder: str) -> Secrets:
    """A worker's lookup: the presets' bindings plus the operator's (``configured``)."""
    return Secrets(merge_bindings(preset_secret_hosts(), configured), os.environ, holder)


def owner_bindings(providers: Iterable[Any]) -> dict[str, tuple[str, ...]]:
    """Bindings a scenario's owner grants by running it on their own machine: each
    provider's key variables to the hosts of that provider's own URLs."""
    bindings: dict[str, list[str]] = {}
    for provider in providers:
        hosts = _hosts(provider_endpoints(provider))
        metrics_hosts = _hosts(metrics_endpoints(provider))
        metrics_vars: list[str] = getattr(provider, "metrics_secret_env_vars", list)()
        for variable in provider.secret_env_vars():
            # The metrics token goes to the metrics host (and the API key to the API's
            # hosts), unless the scenario names one variable for both.
            api_var = variable != getattr(provider, "metrics_api_key_env", None) or (
                variable == getattr(provider, "api_key_env", None)
            )
            if api_var:
                bindings.setdefault(variable, []).extend(hosts)
            if variable in metrics_vars:
                bindings.setdefault(variable, []).extend(metrics_hosts)
    return merge_bindings(bindings)


def _hosts(endpoints: Iterable[Any]) -> list[str]:
    """The rule of each endpoint's URL: its own scheme, host and port exactly."""
    hosts = []
    for endpoint in endpoints:
        try:
            scheme, host, port = url_host(endpoint.url)
        except EgressDenied:
            continue  # not a URL the worker would connect to
        rule = _rule_text(scheme, normalise_host(host), port or DEFAULT_PORTS[scheme])
        try:
            parse_rule(rule)
        except InvalidHostRule:
            continue  # a host no rule can name (the workers' settings would refuse it)
        hosts.append(rule)
    return hosts


def _rule_text(scheme: str, host: str, port: int) -> str:
    """``scheme://host`` with the port only where it is not the scheme's default (the
    form an operator writes)."""
    shown = f"[{host}]" if ":" in host else host
    default = port == DEFAULT_PORTS[scheme]
    if scheme == "https":
        return shown if default else f"{shown}:{port}"
    return f"http://{shown}" if default else f"http://{shown}:{port}"


def _rules(written: Iterable[str]) -> list[HostRule]:
    """The parsed rules; one that does not parse allows nothing (settings and presets
    are validated when loaded, so this is only a last guard)."""
    rules = []
    for entry in written:
        try:
            rules.append(parse_rule(entry))
        except InvalidHostRule:
            continue
    return rules


def bindings_json(bindings: Mapping[str, Iterable[str]]) -> str:
    """``bindings`` as the JSON value of TOKENBENCH__WORKER__SECRET_HOSTS."""
    return json.dumps({variable: list(hosts) for variable, hosts in bindings.items()})
