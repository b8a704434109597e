"""A scenario from command-line flags: ``tokenbench run --target URL --model M ...``.

The flags build the same scenario document a YAML file holds, so what runs is always a
scenario that ``--save`` can write out and ``validate`` can check. With a scenario file
the flags override it; without one they start from :data:`DEFAULTS`. Every rule here is
documented in docs/cli.md ("Ad-hoc runs").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from scenarios.errors import BadInput
from scenarios.overrides import apply_overrides, parse_overrides

# A short, cheap default: two closed-loop levels, 1,024-token prompts and 128-token
# answers (the lengths `vllm bench serve` uses for random prompts), 50 requests a level.
DEFAULT_CONCURRENCY = [1, 8]
DEFAULT_REQUESTS = 50
DEFAULT_PROMPT_TOKENS = 1024
DEFAULT_OUTPUT_TOKENS = 128
TARGET_PROVIDER = "target"

# Kinds whose provider names its model and key variable with these two fields.
_MODEL_FIELD = "model"
_KEY_FIELD = "api_key_env"


@dataclass(frozen=True)
class AdHocFlags:
    """The flags of ``tokenbench run`` that shape a scenario; None means "not given"."""

    target: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    concurrency: list[int] | None = None
    rate: list[float] | None = None
    requests: int | None = None
    duration_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    name: str | None = None
    tokenizer: dict[str, str] | None = None  # {hub: NAME} or {path: FILE} (docs/lengths.md)

    def any_given(self) -> bool:
        """Whether any flag was given (else a scenario file is needed)."""
        return any(value is not None for value in vars(self).values())


def parse_list(text: str, what: str, kind: type[int] | type[float]) -> list[Any]:
    """``"1,8,64"`` as numbers; a bad entry is a :class:`BadInput` naming the flag."""
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        message = f"{what}: give comma-separated numbers, e.g. 1,8,64 (got {text!r})"
        raise BadInput(message) from None
    if not values:
        raise BadInput(f"{what}: give at least one value")
    return values


def target_base_url(target: str) -> str:
    """The provider's ``base_url`` for ``--target``: a bare server (``http://host:8000``
    or ``.../``) gets ``/v1`` appended, as OpenAI-compatible servers serve it; any other
    path is taken as given (a gateway's ``/openai/v1``, a proxy prefix)."""
    parts = urlsplit(target.strip())
    if parts.path in ("", "/"):
        parts = parts._replace(path="/v1")
    return urlunsplit(parts)


def build_document(base: dict[str, Any] | None, flags: AdHocFlags) -> dict[str, Any]:
    """The scenario document: ``base`` (a scenario file's, or None) with ``flags`` applied.

    Validation is the caller's (``scenarios.loader.validate_scenario``), so a bad value
    is reported at its field path like any scenario's.
    """
    if base is None:
        if flags.target is None or flags.model is None:
            raise BadInput("give a scenario file, or --target URL and --model NAME")
        document: dict[str, Any] = {
            "name": "adhoc",
            "providers": [],
            "workload": {"mix": [_fixed_class(DEFAULT_PROMPT_TOKENS, DEFAULT_OUTPUT_TOKENS)]},
            "load": {"concurrency": DEFAULT_CONCURRENCY, "requests_per_level": DEFAULT_REQUESTS},
        }
    else:
        document = copy.deepcopy(base)
    if flags.name is not None:
        document["name"] = flags.name
    _apply_provider(document, flags)
    document = _apply_load(document, flags)
    _apply_lengths(document, flags)
    return document


def _fixed_class(prompt_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "weight": 1,
        "prompt_tokens": {"dist": "fixed", "value": prompt_tokens},
        "output_tokens": {"dist": "fixed", "value": output_tokens},
    }


def _apply_provider(document: dict[str, Any], flags: AdHocFlags) -> None:
    if flags.target is not None:
        if flags.model is None:
            raise BadInput("--target needs --model: the model id sent in each request")
        provider: dict[str, Any] = {
            "name": TARGET_PROVIDER,
            "kind": "openai",
            "base_url": target_base_url(flags.target),
            _MODEL_FIELD: flags.model,
        }
        if flags.api_key_env is not None:
            provider[_KEY_FIELD] = flags.api_key_env
        document["providers"] = [provider]  # --target measures that one endpoint
        return
    for field, value, flag in (
        (_MODEL_FIELD, flags.model, "--model"),
        (_KEY_FIELD, flags.api_key_env, "--api-key-env"),
    ):
        if value is None:
            continue
        providers = [p for p in document.get("providers", []) if isinstance(p, dict)]
        takers = [p for p in providers if field in p or p.get("kind") == "openai"]
        if not takers:
            raise BadInput(f"{flag}: no provider of the scenario has a {field} field")
        for provider in takers:
            provider[field] = value


def _apply_load(document: dict[str, Any], flags: AdHocFlags) -> dict[str, Any]:
    """The load flags are per-run overrides, merged as REST's are (scenarios/overrides.py)."""
    if flags.concurrency is not None and flags.rate is not None:
        raise BadInput("give --concurrency (closed loop) or --rate (open loop), not both")
    overrides = parse_overrides(
        {
            "concurrency": flags.concurrency,
            "rps": flags.rate,
            "requests_per_level": flags.requests,
            "duration_s": flags.duration_s,
        }
    )
    if not overrides.touches_load():
        return document
    document = apply_overrides(document, overrides)
    load = document["load"]
    # An ad-hoc default, not an override rule: rates alone need a bound for each stage.
    if flags.rate is not None and "requests_per_level" not in load and "duration_s" not in load:
        load["requests_per_level"] = DEFAULT_REQUESTS
    return document


def _apply_lengths(document: dict[str, Any], flags: AdHocFlags) -> None:
    if flags.prompt_tokens is None and flags.output_tokens is None and flags.tokenizer is None:
        return
    workload = document.setdefault("workload", {})
    if not isinstance(workload, dict):
        return
    if flags.tokenizer is not None:
        workload["tokenizer"] = dict(flags.tokenizer)
    mix = workload.get("mix") or [_fixed_class(DEFAULT_PROMPT_TOKENS, DEFAULT_OUTPUT_TOKENS)]
    for entry in mix:
        if not isinstance(entry, dict):
            continue
        if flags.prompt_tokens is not None:
            entry["prompt_tokens"] = {"dist": "fixed", "value": flags.prompt_tokens}
        if flags.output_tokens is not None:
            entry["output_tokens"] = {"dist": "fixed", "value": flags.output_tokens}
    workload["mix"] = mix
