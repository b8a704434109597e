"""The ``tokenbench`` command line: one module per command in ``api/cli/commands/``,
registered here; what the commands share (terminal output, errors and exit codes, the
REST client, the local database, signals) is in ``api/cli/`` beside this module.

Commands are registered lazily (:class:`LazyGroup`): a command's module, and what it
imports (DuckDB, the analytics stack, Celery, FastAPI), is imported only when that command
runs or shows its own help. ``tokenbench --help`` reads each command's one-line help from
its module's source without importing it, and a worker's start-up imports none of the
analytics stack (tests/unit/api/cli/test_lazy_imports.py, benchmarks/startup.py).

Exit codes: 0 success, 1 a run that ended failed or an operational error, 2 bad input
(scenario, options), 130 interrupted; errors are mapped in one place, api/cli/errors.py.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
from functools import cache

import typer
from typer import _click as click  # typer vendors click: its classes, not the click package's
from typer.core import TyperCommand, TyperGroup

# Command name -> (module, attribute): a function (one command) or a typer.Typer (a group),
# in the order ``--help`` lists them.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("api.cli.commands.run", "run"),
    "demo": ("api.cli.commands.run", "demo"),
    "serve": ("api.cli.commands.serve", "serve"),
    "submit": ("api.cli.commands.submit", "submit"),
    "validate": ("api.cli.commands.validate", "validate"),
    "schema": ("api.cli.commands.validate", "schema"),
    "worker": ("api.cli.commands.worker", "worker"),
    "plan": ("api.cli.commands.plan", "plan"),
    "report": ("api.cli.commands.report", "report"),
    "sql": ("api.cli.commands.report", "sql"),
    "export": ("api.cli.commands.export", "export"),
    "import": ("api.cli.commands.imports", "import_command"),
    "trend": ("api.cli.commands.trend", "trend"),
    "spend": ("api.cli.commands.spend", "spend"),
    "gateway": ("api.cli.commands.gateway", "gateway"),
    "simulate": ("api.cli.commands.simulate", "simulate"),
    "shadow": ("api.cli.commands.gateway", "shadow_app"),
    "providers": ("api.cli.commands.providers", "providers_app"),
    "schedule": ("api.cli.commands.schedule", "schedule_app"),
    "tokens": ("api.cli.commands.tokens", "tokens_app"),
    "whoami": ("api.cli.commands.tokens", "whoami"),
    "teams": ("api.cli.commands.teams", "teams_app"),
    "audit": ("api.cli.commands.audit", "audit"),
}


@cache
def short_help(module: str, attribute: str) -> str:
    """A command's first help paragraph, read from its module's source (not imported):
    the function's docstring, or a ``typer.Typer(help="...")`` assignment's help."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == attribute:
            return (ast.get_docstring(node) or "").split("\n\n")[0].replace("\n", " ")
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == attribute for t in node.targets)
            and isinstance(node.value, ast.Call)
        ):
            for keyword in node.value.keywords:
                if keyword.arg == "help" and isinstance(keyword.value, ast.Constant):
                    return str(keyword.value.value)
    return ""


def load_command(name: str) -> click.Command:
    """The click command of ``name``, importing its module now."""
    module, attribute = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        group = typer.main.get_group(target)
        group.name = name
        return group
    single = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    single.command(name)(target)
    return typer.main.get_command(single)


class LazyGroup(TyperGroup):
    """A group whose commands are imported when one is run (or its help is shown); the
    group's own help lists them from their source's help text."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        if self._listing:  # the group's --help: a stand-in with the one-line help
            return TyperCommand(cmd_name, help=short_help(*COMMANDS[cmd_name]))
        return load_command(cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="tokenbench",
    cls=LazyGroup,
    help="Benchmark LLM inference providers: tail latency, throughput, cost per token.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Benchmark LLM inference providers: tail latency, throughput, cost per token."""


def main() -> None:
    """Console-script entry point. An unexpected error is one line, not a traceback
    (``TOKENBENCH_DEBUG=1`` shows it)."""
    try:
        app()
    except Exception as exc:
        if os.environ.get("TOKENBENCH_DEBUG"):
            raise
        from api.cli.streams import stderr  # noqa: PLC0415

        stderr.print(f"[red]error: {type(exc).__name__}: {exc}", highlight=False)
        stderr.print("(set TOKENBENCH_DEBUG=1 for the traceback)")
        sys.exit(1)
