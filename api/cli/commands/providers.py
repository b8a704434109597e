"""``tokenbench providers check SCENARIO``: one tiny request per provider, before a long run.

For each provider of the scenario it reports, without a traceback: whether the key
variables are set here, whether the endpoint is reachable, whether the key is accepted,
whether the model exists, whether the answer streams (several token events) and whether
the server reports token usage. The request goes through the same adapter a worker uses,
so what passes here is what a run will send. Keys are read from this process's
environment; for a distributed run, run the check where the workers run. As with
``tokenbench run`` on the embedded default, the user owns this machine: each provider's
key variables are bound to that provider's own hosts (``TOKENBENCH*`` variables are
still refused), and loopback and private addresses are allowed (metadata addresses
never are).

Exit codes: 0 every provider passed, 1 at least one failed, 2 bad scenario file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.console import Console
from rich.table import Table

from api.cli.errors import exit_for
from scenarios.loader import ScenarioError, load_scenario
from scenarios.providers.base import ProviderBase
from scenarios.security.egress import EgressGuard
from scenarios.settings import get_settings
from workers.client.adapters import AdapterContext, ProviderSetupError, build_adapter
from workers.client.errors import ErrorClass
from workers.client.http import make_client
from workers.client.result import RequestResult
from workers.client.secrets import Secrets, owner_bindings, worker_secrets
from workers.prompts.plan import PlannedRequest
from workers.simulator.pool import SimulatorPool

providers_app = typer.Typer(
    help="Check providers before a run.", no_args_is_help=True, add_completion=False
)
_out = Console(width=None if Console().is_terminal else 200)
_err = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 200)


@providers_app.callback()
def providers() -> None:
    """Check the providers of a scenario."""  # a group even with one command: `providers check`


# Small enough to cost nothing, long enough for a streaming server to send several events.
PROBE = PlannedRequest(seq=0, prompt_tokens=12, output_tokens=8, prompt="Count from one to ten.")


@dataclass
class Check:
    """Outcome of one provider's probe; ``None`` means not determined."""

    provider: str
    kind: str
    keys: bool
    reachable: bool | None = None
    auth: bool | None = None
    model: bool | None = None
    streaming: bool | None = None
    usage: bool | None = None
    ttft_ms: float | None = None
    message: str = ""

    @property
    def passed(self) -> bool:
        """Every determined property holds and the probe answered."""
        return self.keys and all(
            value is True for value in (self.reachable, self.auth, self.model, self.streaming)
        )


def judge(check: Check, result: RequestResult) -> Check:
    """Fill ``check`` from the probe's result."""
    failure = result.failure
    if failure is None:
        check.reachable = check.auth = check.model = True
        check.streaming = len(result.token_stamps) >= 2
        check.usage = result.token_count_source == "usage"
        if result.first_token is not None:
            check.ttft_ms = round((result.first_token - result.sent) / 1e6, 1)
        if not check.streaming:
            check.message = f"{len(result.token_stamps)} token event(s): the answer did not stream"
        elif not check.usage:
            check.message = "no usage in the stream: token counts will come from events"
        return check
    check.message = failure.message
    if failure.error_class in (ErrorClass.CONNECT, ErrorClass.TIMEOUT):
        check.reachable = False
        return check
    check.reachable = True
    status = failure.http_status
    if status in (401, 403):
        check.auth = False
    elif status == 404 or (status in (400, 422) and "model" in failure.message.lower()):
        check.auth, check.model = True, False
    elif failure.error_class == ErrorClass.HTTP_429:
        check.auth = True
        check.message = f"rate limited: {failure.message}"
    return check


async def _probe(
    provider: ProviderBase, http: httpx.AsyncClient, secrets: Secrets, simulators: SimulatorPool
) -> Check:
    check = Check(provider.name, str(getattr(provider, "kind", "?")), keys=True)
    missing = [name for name in provider.secret_env_vars() if not os.environ.get(name)]
    if missing:
        check.keys = False
        check.message = f"environment variable {', '.join(missing)} is not set"
        return check
    async with contextlib.AsyncExitStack() as held:
        try:
            endpoint = await held.enter_async_context(simulators.lease(provider))
            context = AdapterContext(http, secrets, endpoint)
            adapter = await build_adapter(provider, context)  # type: ignore[arg-type]
        except (ProviderSetupError, RuntimeError, OSError) as exc:
            check.message = str(exc)
            return check
        return judge(check, await adapter.measure(http, PROBE, 0))


async def run_checks(providers: list[ProviderBase]) -> list[Check]:
    """Probe every provider, one after another (a check must not load an endpoint)."""
    settings = get_settings()
    policy = settings.egress.model_copy(update={"allow_loopback": True, "allow_private": True})
    guard = EgressGuard(policy)
    simulators = SimulatorPool(on_start=guard.trust, on_stop=guard.distrust)
    secrets = worker_secrets(settings.worker.secret_hosts, "this machine").with_bindings(
        owner_bindings(providers)
    )
    async with make_client(guard=guard) as http:
        try:
            return [await _probe(provider, http, secrets, simulators) for provider in providers]
        finally:
            await simulators.close()


def _mark(value: bool | None) -> str:
    return {True: "[green]yes[/green]", False: "[red]no[/red]", None: "[dim]-[/dim]"}[value]


def render(checks: list[Check]) -> Table:
    """The checks as a table, one row per provider."""
    table = Table(title="provider checks")
    for column in (
        "provider",
        "kind",
        "keys",
        "reachable",
        "auth",
        "model",
        "streaming",
        "usage",
        "ttft ms",
        "message",
    ):
        table.add_column(column)
    for check in checks:
        table.add_row(
            check.provider,
            check.kind,
            _mark(check.keys),
            _mark(check.reachable),
            _mark(check.auth),
            _mark(check.model),
            _mark(check.streaming),
            _mark(check.usage),
            "" if check.ttft_ms is None else f"{check.ttft_ms:.1f}",
            check.message,
        )
    return table


@providers_app.command()
def check(
    scenario_path: Annotated[Path, typer.Argument(help="Scenario file (YAML or JSON).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Send one tiny request per provider and report what works."""
    try:
        scenario = load_scenario(scenario_path)
    except ScenarioError as exc:
        raise exit_for(exc, f"invalid scenario\n{exc}") from None
    checks = asyncio.run(run_checks(list(scenario.providers)))
    if as_json:
        _out.print_json(json.dumps([asdict(c) | {"passed": c.passed} for c in checks]))
    else:
        _out.print(render(checks))
    failed = [c.provider for c in checks if not c.passed]
    if failed:
        _err.print(f"[red]failed: {', '.join(failed)}", highlight=False)
        raise typer.Exit(1)
