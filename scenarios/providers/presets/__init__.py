"""Provider presets: the shipped catalog of hosted APIs, and completing a scenario entry
that names one (``preset: groq``) into a full provider of the preset's kind.

The catalog (``catalog.yaml``) is data: base URL, auth style, usual key variable, model
ids and list prices with the date and basis (``listed`` or ``estimate``) of each price
table. Resolution works on the raw mapping, before the provider's kind is looked at, so
the rest of the system only ever sees complete providers; any key given in the scenario
wins over the preset's value.

Each preset also names the hosts its key variables are bound to on every worker
(:func:`preset_secret_hosts`): ``preset: groq`` with ``GROQ_API_KEY`` needs no binding
of its own, and that key is never sent anywhere but ``api.groq.com`` (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, field_validator

from scenarios.base import StrictModel
from scenarios.providers.base import Pricing
from scenarios.security.host_rules import host_matches, parse_rule

__all__ = [
    "Preset",
    "PriceTable",
    "hosted_preset",
    "load_presets",
    "preset_names",
    "preset_secret_hosts",
    "resolve_preset",
]

CATALOG_PATH = Path(__file__).parent / "catalog.yaml"


class PriceTable(StrictModel):
    """Prices of a preset's models and how much to trust them."""

    basis: Literal["listed", "estimate"] = Field(
        description="listed: read from the provider's price page on as_of; estimate: unverified."
    )
    as_of: date = Field(description="When the prices were taken (or estimated).")
    source: str = Field(description="Where they come from.")
    models: dict[str, Pricing] = Field(default_factory=dict)


class Preset(StrictModel):
    """One hosted provider."""

    title: str
    kind: str = Field(description="Provider kind the preset resolves to.")
    auth: str = Field(description="How the key is sent (documentation only).")
    docs: str
    defaults: dict[str, Any] = Field(
        description="Provider keys filled in when the scenario does not give them."
    )
    hosts: list[str] = Field(
        description=(
            "Hosts the key variables are bound to on workers (https, port 443; ``*`` = one "
            "DNS label, ``{aws-region}`` = one AWS region label)."
        )
    )
    key_variables: list[str] | None = Field(
        default=None,
        description="Variables bound to ``hosts``; default: the ``api_key_env`` of defaults.",
    )
    prices: PriceTable

    @field_validator("hosts")
    @classmethod
    def _rules(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            parse_rule(host)  # InvalidHostRule is a ValueError: reported with its path
        return hosts

    def bound_variables(self) -> list[str]:
        """The key variables this preset binds to its hosts."""
        if self.key_variables is not None:
            return list(self.key_variables)
        variable = self.defaults.get("api_key_env")
        return [variable] if isinstance(variable, str) else []


class _Catalog(StrictModel):
    presets: dict[str, Preset]


@cache
def load_presets() -> dict[str, Preset]:
    """The shipped presets by id (read once per process)."""
    data = yaml.safe_load(CATALOG_PATH.read_text(encoding="utf-8"))
    return _Catalog.model_validate(data).presets


def preset_secret_hosts() -> dict[str, tuple[str, ...]]:
    """Built-in secret bindings: every preset's key variables to that preset's hosts."""
    bindings: dict[str, tuple[str, ...]] = {}
    for preset in load_presets().values():
        for variable in preset.bound_variables():
            known = bindings.get(variable, ())
            bindings[variable] = tuple(dict.fromkeys([*known, *preset.hosts]))
    return {variable: hosts for variable, hosts in bindings.items() if hosts}


def hosted_preset(host: str) -> str | None:
    """The preset whose hosts include ``host``, or whose API host's domain does
    (``x.groq.com`` beside ``api.groq.com``): a hosted API. None otherwise."""
    name = host.lower().rstrip(".")
    for preset_id, preset in load_presets().items():
        for rule in preset.hosts:
            pattern = parse_rule(rule).host
            labels = pattern.split(".")
            domain = ".".join(labels[1:])
            if host_matches(name, pattern) or (
                len(labels) >= 3
                and not any(c in domain for c in "*{")
                and (name == domain or name.endswith("." + domain))
            ):
                return preset_id
    return None


def preset_names() -> list[str]:
    """Ids of the shipped presets, in catalog order."""
    return list(load_presets())


def resolve_preset(value: Any) -> Any:
    """Complete a provider mapping that names a ``preset``; anything else passes through.

    Raises ValueError (reported by pydantic with the entry's path) for an unknown preset
    or a ``kind`` that contradicts the preset's.
    """
    if not isinstance(value, Mapping) or "preset" not in value:
        return value
    given = {key: item for key, item in value.items() if key != "preset"}
    preset_id = value["preset"]
    presets = load_presets()
    preset = presets.get(preset_id) if isinstance(preset_id, str) else None
    if preset is None:
        raise ValueError(f"unknown preset {preset_id!r}; known presets: {', '.join(presets)}")
    if given.get("kind", preset.kind) != preset.kind:
        raise ValueError(f"preset {preset_id!r} is of kind {preset.kind!r}, not {given['kind']!r}")
    if given.get("cache_reset") is not None:
        raise ValueError(
            f"cache_reset: preset {preset_id!r} is a hosted API: its cache is not ours to "
            "reset (docs/providers.md, cache reset)"
        )
    resolved: dict[str, Any] = {"kind": preset.kind, "name": preset_id, **preset.defaults}
    price = preset.prices.models.get(str(given.get("model")))
    if price is not None:
        resolved["pricing"] = price.model_dump()
    resolved.update(given)
    return resolved
