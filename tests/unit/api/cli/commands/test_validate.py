"""api/cli/commands/validate.py: ``validate`` prints a scenario's normalised form (exit 0) or each
problem with its file, line and field (exit 2); ``schema`` prints the JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from api.cli.commands.validate import schema, validate
from scenarios.loader import load_scenario

EXAMPLES = sorted((Path(__file__).parents[5] / "scenarios" / "examples").glob("*.yaml"))

app = typer.Typer()
app.command()(validate)
app.command()(schema)
runner = CliRunner()


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_the_normalised_form_is_the_same_scenario(example: Path, tmp_path: Path) -> None:
    shown = runner.invoke(app, ["validate", str(example)])
    assert shown.exit_code == 0, shown.output
    normalised = tmp_path / "normalised.json"
    normalised.write_text(shown.stdout)
    assert load_scenario(normalised) == load_scenario(example)
    # Normalising is idempotent: the normalised form validates to itself.
    assert runner.invoke(app, ["validate", str(normalised)]).stdout == shown.stdout


def test_each_problem_is_named_with_its_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nproviders:\n  - name: a\n    kind: nope\n")
    shown = runner.invoke(app, ["validate", str(bad)])
    assert shown.exit_code == 2
    assert shown.stdout == ""
    lines = shown.stderr.splitlines()
    assert lines[0] == "invalid scenario"
    assert any(line.startswith(f"{bad}:4: providers.0.kind:") for line in lines)
    assert any(line.startswith(f"{bad}:1: load: Field required") for line in lines)


def test_a_missing_file_is_bad_input(tmp_path: Path) -> None:
    shown = runner.invoke(app, ["validate", str(tmp_path / "absent.yaml")])
    assert shown.exit_code == 2
    assert "cannot read file" in shown.stderr


def test_schema_describes_every_field_of_a_scenario() -> None:
    shown = runner.invoke(app, ["schema"])
    assert shown.exit_code == 0
    document = json.loads(shown.stdout)
    assert {"name", "providers", "workload", "load", "regions"} <= set(document["properties"])
    for example in EXAMPLES:
        assert set(load_scenario(example).model_dump(exclude_none=True)) <= set(
            document["properties"]
        ), example.name


def test_the_examples_are_found() -> None:
    """The examples above are looked up from this file's place: a move must not lose them."""
    assert EXAMPLES
