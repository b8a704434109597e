"""The ``tokenbench`` command line: one module per command in ``api/cli/``, registered here.

Exit codes: 0 success, 1 a run that ended failed or an operational error, 2 bad input
(scenario, options), 130 interrupted; errors are mapped in one place, api/cli/errors.py.
"""

from __future__ import annotations

import os
import sys

import typer

from api.cli.console import stderr
from api.cli.gateway import gateway, shadow_app
from api.cli.plan import plan
from api.cli.providers import providers_app
from api.cli.report import report, sql
from api.cli.run import demo, run
from api.cli.schedule import schedule_app
from api.cli.serve import serve
from api.cli.simulate import simulate
from api.cli.submit import submit
from api.cli.trend import trend
from api.cli.validate import schema, validate
from api.cli.worker import worker

app = typer.Typer(
    name="tokenbench",
    help="Benchmark LLM inference providers: tail latency, throughput, cost per token.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
for command in (run, demo, serve, submit, validate, schema, worker, plan, report, sql, trend):
    app.command()(command)
app.command()(gateway)
app.add_typer(shadow_app, name="shadow")
app.command()(simulate)
app.add_typer(providers_app, name="providers")
app.add_typer(schedule_app, name="schedule")


def main() -> None:
    """Console-script entry point. An unexpected error is one line, not a traceback
    (``TOKENBENCH_DEBUG=1`` shows it)."""
    try:
        app()
    except Exception as exc:
        if os.environ.get("TOKENBENCH_DEBUG"):
            raise
        stderr.print(f"[red]error: {type(exc).__name__}: {exc}", highlight=False)
        stderr.print("(set TOKENBENCH_DEBUG=1 for the traceback)")
        sys.exit(1)
