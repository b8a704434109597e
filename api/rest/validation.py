"""Turning request bodies into validated scenarios, and the egress check on accept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analytics.datasets.uploads import DatasetInfo, DatasetStore, dataset_problems
from api.rest.errors import ProviderEgressDenied
from api.schemas import RunOverrides
from scenarios.gateway_config import GatewayConfig
from scenarios.limits import MAX_DURATION_S, MAX_TOTAL_REQUESTS
from scenarios.loader import Problem, ScenarioError, parse_scenario, validate_scenario
from scenarios.model import Scenario
from scenarios.overrides import apply_overrides
from scenarios.providers.kinds import SimulatedProvider
from scenarios.security.egress import EgressDenied, check_url, metrics_endpoints, provider_endpoints
from scenarios.settings import EgressSettings


def scenario_from_body(body: bytes) -> Scenario:
    """A scenario from a YAML or JSON request body (ScenarioError on any problem)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError([Problem("", "body is not UTF-8 text")]) from None
    return parse_scenario(text, "body")


def scenario_with_overrides(data: dict[str, Any], overrides: RunOverrides | None) -> Scenario:
    """Apply per-run overrides to scenario data (as the command line does:
    scenarios/overrides.py), then validate the result."""
    if overrides is not None:
        data = apply_overrides(data, overrides)
    return validate_scenario(data)


def check_gateway_egress(config: GatewayConfig, policy: EgressSettings) -> None:
    """Refuse a shadow session's config naming a URL the egress policy forbids, as a 422
    at the field under ``config``: ``primary.base_url``, ``shadows.N.base_url`` or
    ``fallbacks.N.base_url`` (each provider's every URL field, as for a scenario). The
    fallbacks are providers the gateway forwards to like the primary, so they are held
    to the same policy (no DNS here either: the transport checks what it connects to)."""
    groups: list[tuple[list[str | int], Any]] = [(["primary"], config.primary)]
    groups += [(["shadows", index], shadow) for index, shadow in enumerate(config.shadows)]
    groups += [(["fallbacks", index], spare) for index, spare in enumerate(config.fallbacks)]
    for position, provider in groups:
        for endpoint in [*provider_endpoints(provider), *metrics_endpoints(provider)]:
            try:
                check_url(endpoint.url, policy, resolve=False)
            except EgressDenied as exc:
                denied = ProviderEgressDenied(0, exc, root="config")
                denied.path = [*position, endpoint.field]
                raise denied from None


def check_scenario_egress(scenario: Scenario, policy: EgressSettings) -> None:
    """Refuse a scenario naming a URL the egress policy forbids, as a 422 naming the
    field (``providers.N.base_url``, ``.endpoint``, ``.endpoint_url`` or ``.metrics_url``).
    No DNS lookup here: the worker's transport checks every address it connects to."""
    for index, provider in enumerate(scenario.providers):
        for endpoint in [*provider_endpoints(provider), *metrics_endpoints(provider)]:
            try:
                check_url(endpoint.url, policy, resolve=False)
            except EgressDenied as exc:
                denied = ProviderEgressDenied(index, exc)
                denied.path = ["providers", index, endpoint.field]
                raise denied from None


# The same words whatever the path is: the answer must not reveal whether it exists.
PATH_REFUSED = (
    "a scenario submitted over REST cannot name a file: upload it with POST /v1/datasets "
    "(or use `tokenbench submit`, which does it) and give {dataset: ID} instead of path"
)


HUB_DATASET_REFUSED = (
    "a scenario submitted over REST cannot name a hub dataset: the control plane fetches "
    "nothing for a submitter. `tokenbench submit` resolves it on your machine and uploads "
    "it; or upload its file with POST /v1/datasets and give {dataset: ID}"
)


SIMULATOR_PATH_REFUSED = (
    "a scenario submitted over REST cannot name a file: give the simulated endpoint's "
    "tokenizer as a Hugging Face hub name (resolved from the worker's cache)"
)


UPSTREAMS_REFUSED = (
    "a scenario submitted over REST cannot declare upstreams: they bind ports on the "
    "machine that runs them; run it locally with `tokenbench run` (docs/failover.md)"
)


def check_scenario_upstreams(scenario: Scenario) -> None:
    """Refuse a REST scenario declaring ``upstreams`` (422 at the field): a submitter
    must not bind ports on the shared worker fleet or the control plane's machine."""
    if scenario.upstreams:
        raise ScenarioError([Problem("upstreams", UPSTREAMS_REFUSED)])


def check_scenario_datasets(
    scenario: Scenario,
    datasets: DatasetStore,
    readable: Callable[[str], bool] | None = None,
) -> None:
    """Refuse a REST scenario naming a path (never looked at), an unknown dataset, or a
    dataset not valid for its use, as a 422 at the field. A dataset ``readable`` says
    the caller may not read is refused exactly as an unknown one."""

    def find(dataset_id: str) -> DatasetInfo | None:
        info = datasets.find(dataset_id)
        if info is not None and readable is not None and not readable(dataset_id):
            return None  # another team's private dataset: as if there were none
        return info

    problems = _simulator_paths(scenario)
    for use, source in (
        ("prompts", scenario.workload.prompts),
        ("replay", scenario.workload.replay),
        ("tokenizer", scenario.workload.tokenizer),
    ):
        if source is None:
            continue
        if source.path is not None:
            problems.append(Problem(f"workload.{use}.path", PATH_REFUSED))
            continue
        if source.dataset is None:
            continue  # a tokenizer's hub name: resolved by the workers
        info = find(source.dataset)
        if info is None:
            message = f"no dataset {source.dataset}: upload the file with POST /v1/datasets"
            problems.append(Problem(f"workload.{use}.dataset", message))
        elif use not in info.kinds:
            message = (
                f"dataset {source.dataset} cannot be replayed (every line needs timestamp "
                f"and max_tokens): {info.replay_problem}"
                if use == "replay" and "prompts" in info.kinds
                else f"dataset {source.dataset} is not usable as {use} (it is: "
                f"{', '.join(info.kinds)})"
            )
            problems.append(Problem(f"workload.{use}.dataset", message))
        elif use == "replay":
            problems += _replay_bounds(scenario, datasets, source.dataset)
    problems += _dataset_workload(scenario, find)
    if problems:
        raise ScenarioError(problems)


def _dataset_workload(
    scenario: Scenario, find: Callable[[str], DatasetInfo | None]
) -> list[Problem]:
    """``workload.dataset`` over REST: an uploaded dataset of prompts, never a path or a
    hub name (the same words whatever they name)."""
    spec = scenario.workload.dataset
    if spec is None:
        return []
    if spec.path is not None:
        return [Problem("workload.dataset.path", PATH_REFUSED)]
    if spec.hub is not None:
        return [Problem("workload.dataset.hub", HUB_DATASET_REFUSED)]
    info = find(spec.dataset or "")
    if info is None:
        message = f"no dataset {spec.dataset}: upload the file with POST /v1/datasets"
        return [Problem("workload.dataset.dataset", message)]
    return dataset_problems(scenario.workload, info, "workload.dataset.dataset")


def _simulator_paths(scenario: Scenario) -> list[Problem]:
    """A simulated endpoint's tokenizer is read by the worker that starts it: over REST
    a hub name only, never a path."""
    return [
        Problem(f"providers.{index}.simulate.prompt_tokenizer.path", SIMULATOR_PATH_REFUSED)
        for index, provider in enumerate(scenario.providers)
        if isinstance(provider, SimulatedProvider)
        and provider.simulate.prompt_tokenizer is not None
        and provider.simulate.prompt_tokenizer.path is not None
    ]


def _replay_bounds(scenario: Scenario, datasets: DatasetStore, dataset_id: str) -> list[Problem]:
    """A replay's length and size come from its dataset, not from the scenario's own
    fields: the same bounds apply (a stage's duration, a run's total requests)."""
    replay = scenario.workload.replay
    assert replay is not None
    count, span_s = datasets.replay_span(dataset_id, scenario.load.requests_per_level)
    problems = []
    lasts_s = span_s * replay.time_scale
    if lasts_s > MAX_DURATION_S and (scenario.load.duration_s or lasts_s) > MAX_DURATION_S:
        message = (
            f"this replay lasts {lasts_s:.0f} s (its timestamps' span × time_scale), more "
            f"than the {MAX_DURATION_S:.0f} s a stage may last: lower time_scale or set "
            "load.duration_s"
        )
        problems.append(Problem("workload.replay.time_scale", message))
    total = count * len(scenario.providers) * len(scenario.regions)
    if total > MAX_TOTAL_REQUESTS:
        message = (
            f"this replay sends {total} requests (lines × providers × regions), more than "
            f"the {MAX_TOTAL_REQUESTS} a run may send: set load.requests_per_level"
        )
        problems.append(Problem("workload.replay.dataset", message))
    return problems
