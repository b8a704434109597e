"""scenarios/settings.py ``env_name``: a settings path becomes the variable a user sets,
a path naming no setting is refused, and every variable a message of the code names is
one that sets something."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scenarios.settings import Settings, env_name

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("path", "variable"),
    [
        ("egress.allow_loopback", "TOKENBENCH__EGRESS__ALLOW_LOOPBACK"),
        ("egress.allow", "TOKENBENCH__EGRESS__ALLOW"),
        ("worker.secret_hosts", "TOKENBENCH__WORKER__SECRET_HOSTS"),
        ("control.stall_timeout_s", "TOKENBENCH__CONTROL__STALL_TIMEOUT_S"),
        ("regions", "TOKENBENCH__REGIONS"),
    ],
)
def test_a_path_is_named_by_its_variable(path: str, variable: str) -> None:
    assert env_name(path) == variable


def test_the_variable_sets_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env_name("egress.allow_loopback"), "true")
    monkeypatch.setenv(env_name("control.max_attempts"), "7")
    settings = Settings()
    assert settings.egress.allow_loopback is True
    assert settings.control.max_attempts == 7


@pytest.mark.parametrize("path", ["egress.nope", "nope", "egress.allow.deeper", "", "egress."])
def test_a_path_naming_no_setting_is_refused(path: str) -> None:
    with pytest.raises(KeyError):
        env_name(path)


def _settings_paths() -> set[str]:
    paths = set()
    for name, field in Settings.model_fields.items():
        group = field.annotation
        if isinstance(group, type) and hasattr(group, "model_fields"):
            paths |= {f"{name}.{sub}" for sub in group.model_fields}
        else:
            paths.add(name)
    return paths


def test_every_variable_named_in_the_code_sets_something() -> None:
    known = {env_name(path) for path in _settings_paths()}
    named = set()
    for package in ("api", "workers", "analytics", "scenarios"):
        for source in (REPO / package).rglob("*.py"):
            named |= set(re.findall(r"TOKENBENCH__[A-Z_]*[A-Z]", source.read_text()))
    assert named, "the code names no variable"
    assert named <= known, sorted(named - known)
