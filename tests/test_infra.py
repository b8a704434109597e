"""infra/: the compose example and the Procfile run, as written, a scenario whose every
region has a worker there, and submit it to the port the control plane serves on."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import yaml

from api.cli.commands.submit import region_list
from scenarios.loader import load_scenario

REPO = Path(__file__).resolve().parents[1]
INFRA = REPO / "infra"


def _submit_command(text: str) -> list[str]:
    """The `tokenbench submit ...` command of a file's header comment, continuation
    lines joined, without the environment assignments before it."""
    comment = "\n".join(
        line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")
    )
    joined = comment.replace("\\\n", " ")
    [line] = [line for line in joined.splitlines() if "tokenbench submit" in line]
    words = shlex.split(line, comments=True)
    return words[words.index("tokenbench") :]


def _submitted_regions(command: list[str]) -> tuple[list[str], str]:
    """The regions the command runs from (its --regions, else its scenario's), and the
    server it submits to."""
    scenario = load_scenario(REPO / command[2])
    regions = list(scenario.regions)
    if "--regions" in command:
        regions = region_list(command[command.index("--regions") + 1])
    return regions, command[command.index("--server") + 1]


def _region_of(command: list[str]) -> str:
    return command[command.index("--region") + 1]


def test_the_compose_example_submits_to_regions_it_runs_workers_for() -> None:
    text = (INFRA / "docker-compose.yml").read_text()
    compose = yaml.safe_load(text)
    services = compose["services"]
    workers = {
        _region_of(service["command"])
        for service in services.values()
        if service.get("command", [None])[0] == "worker"
    }
    assert workers == {"eu", "us"}
    regions, server = _submitted_regions(_submit_command(text))
    assert set(regions) <= workers, f"no worker service for {set(regions) - workers}"
    # The control plane expects those regions and serves where the command submits.
    plane = services["control-plane"]
    assert set(json.loads(compose["x-tokenbench-env"]["TOKENBENCH__REGIONS"])) == workers
    port = plane["command"][plane["command"].index("--port") + 1]
    assert f"{port}:{port}" in plane["ports"]
    assert server == f"http://127.0.0.1:{port}"


def test_the_procfile_submits_to_regions_it_runs_workers_for() -> None:
    text = (INFRA / "Procfile").read_text()
    processes = dict(
        line.split(": ", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    workers = {
        _region_of(shlex.split(command))
        for command in processes.values()
        if "tokenbench worker" in command
    }
    assert workers == {"eu", "us"}
    regions, server = _submitted_regions(_submit_command(text))
    assert set(regions) <= workers, f"no worker process for {set(regions) - workers}"
    serve = shlex.split(processes["control"])
    assert server == f"http://127.0.0.1:{serve[serve.index('--port') + 1]}"
    # Every process talks to the Redis the Procfile starts.
    redis_port = shlex.split(processes["redis"])[2]
    urls = {url for command in processes.values() for url in re.findall(r"redis://\S+", command)}
    assert urls == {f"redis://127.0.0.1:{redis_port}/0"}


def _requirement_name(requirement: str) -> str:
    """The normalised distribution name of a PEP 508 requirement string."""
    name = re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_dependency_is_pinned_in_the_constraints_file() -> None:
    """CI and the README install with ``-c constraints.txt``: a dependency missing from it
    would float to whatever release is newest on the day (docs/dependencies.md)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {_requirement_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        wanted |= {_requirement_name(r) for r in extra}
    pinned = {
        _requirement_name(line.split("==")[0]): line.split("==")[1]
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert wanted - {"uvloop"} <= set(pinned), sorted(wanted - set(pinned))
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", v) for v in pinned.values())


def test_ci_and_the_readme_install_the_pinned_versions() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    test_command = next(line for line in readme.splitlines() if "python -m pytest" in line)
    assert "-c constraints.txt" in test_command
    assert test_command.strip() in ci


def test_ci_runs_the_static_checks_as_a_step_of_their_own() -> None:
    """ruff, ruff format, mypy and the import contracts run outside pytest, from one
    command that .ci/run calls after the suite (and that fails CI when they fail)."""
    checks = (REPO / "infra" / "static-checks").read_text()
    for tool in ('ruff" check', 'ruff" format --check', "-m mypy", "lint-imports"):
        assert tool in checks, tool
    assert "infra/static-checks" in (REPO / ".ci" / "run").read_text()
