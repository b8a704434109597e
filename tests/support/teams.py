"""Two teams on one control plane: tokens minted into its database before it starts,
objects each team owns, and every read and write path tried across teams and roles.

Team **red** keeps its results to itself (``visibility: team``), team **blue** shares
them with the organisation (``org``, the default). Each has a viewer and a submitter
token; the bootstrap token (``TOKENBENCH__API__TOKENS``) is the admin. The control plane
is a subprocess, so tokens cannot be minted through its registry in memory: they are
written with :class:`~api.access.tokens.TokenRegistry` into ``api_tokens`` of the
database file before it starts (only their hashes, as the registry always does).

:func:`probe_matrix` is the access matrix: each route tried by each role on its own
team's object and on the other team's, with the status each must get. The security
test asserts it; ``benchmarks/access_matrix.py`` prints it as a markdown table.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from analytics.store.db import connect
from api.access.caller import Role
from api.access.tokens import TokenRegistry
from tests.support.polls import wait_until

TEAMS = {"red": "team", "blue": "org"}
# Region of the runs (a worker serves it) and of the shadow sessions (none does: a
# session there waits for workers, and nothing is sent).
RUN_REGION = "teams"
SESSION_REGION = "teams-nowhere"
NDJSON = {"content-type": "application/x-ndjson"}
# A caller: "admin", or "<team>-<role>".
CALLERS = ("admin", "red-viewer", "red-submitter", "blue-viewer", "blue-submitter")


def mint_team_tokens(db: Path, admin_token: str) -> dict[str, str]:
    """Mint a viewer and a submitter token for red and blue (and an expired and a
    revoked red submitter token) into ``db`` (created, migrated), set the teams'
    visibility, and close it: the control plane may then open the file. Returns the
    tokens by caller name, ``admin`` being ``admin_token`` (a bootstrap token)."""
    con = connect(db)
    try:
        registry = TokenRegistry(con)
        now = dt.datetime.now(dt.UTC)
        tokens = {"admin": admin_token}
        for team, visibility in TEAMS.items():
            con.execute(
                "INSERT INTO teams (team, visibility, created_at, updated_at) VALUES (?, ?, ?, ?)",
                [team, visibility, now, now],
            )
            for role in (Role.VIEWER, Role.SUBMITTER):
                name = f"{team}-{role.value}"
                tokens[name], _ = registry.mint(team, role, name, None, None)
        past = now - dt.timedelta(days=1)
        tokens["expired"], _ = registry.mint("red", Role.SUBMITTER, "expired", past, None)
        tokens["revoked"], record = registry.mint("red", Role.SUBMITTER, "revoked", None, None)
        registry.revoke(record.token_id)
    finally:
        con.close()
    return tokens


def scenario(name: str = "teams", requests: int = 2, **workload: Any) -> dict[str, Any]:
    """A small scenario on the worker's simulated endpoint."""
    return {
        "name": name,
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 2, "itl_ms": 1}}
        ],
        "workload": {
            **workload,
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ],
        },
        "load": {"concurrency": [1], "requests_per_level": requests},
        "regions": [RUN_REGION],
    }


def gateway_config(name: str) -> dict[str, Any]:
    """A shadow session's gateway: nothing serves its region, so nothing is sent."""
    return {
        "name": name,
        "primary": {
            "name": "prod",
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
        },
        "shadows": [{"name": "cand", "kind": "simulated", "simulate": {"ttft_ms": 5}}],
        "sample_rate": 1.0,
        "regions": [SESSION_REGION],
    }


@contextlib.contextmanager
def team_stack(env: dict[str, str], redis_url: str, tmp: Path) -> Iterator[Teams]:
    """A worker (region ``RUN_REGION``) and a control plane on a database holding the
    teams' tokens; its clients, one per caller. ``env`` points at Redis and allows
    loopback egress (tests/conftest.py ``worker_env``)."""
    from tests.conftest import API_TOKEN, start_control_plane, start_worker

    db = tmp / "teams.duckdb"
    tokens = mint_team_tokens(db, API_TOKEN)
    worker = start_worker(RUN_REGION, env, tmp / "worker-teams.log", redis_url)
    try:
        plane, base = start_control_plane(env, db, tmp / "api-teams.log")
    except BaseException:
        worker.stop(3)
        raise
    teams = Teams(base, tokens, db, plane.log)
    try:
        yield teams
    finally:
        teams.close()
        plane.stop()
        worker.stop(3)


@dataclass
class TeamObjects:
    """What one team owns: a dataset, a stored scenario, a finished run of it, a
    schedule of it, a shadow session."""

    dataset: str
    dataset_bytes: bytes
    scenario: str
    run: str
    schedule: str
    session: str
    # Deleted by the route tries: by the team (free_*) and by the admin (spare_*).
    spare_schedule: str
    free_scenario: str = ""
    spare_scenario: str = ""
    free_dataset: str = ""
    spare_dataset: str = ""


class Teams:
    """Clients of the control plane at ``base``, one per caller."""

    def __init__(self, base: str, tokens: dict[str, str], db: Path, log: Path) -> None:
        self.base = base
        self.tokens = tokens
        self.db = db
        self.log = log
        self.clients = {
            name: httpx.Client(
                base_url=base, headers={"authorization": f"Bearer {token}"}, timeout=60
            )
            for name, token in tokens.items()
        }

    def __getitem__(self, caller: str) -> httpx.Client:
        return self.clients[caller]

    def close(self) -> None:
        """Close every client."""
        for client in self.clients.values():
            client.close()

    def wait_for_run(self, run_id: str, timeout_s: float = 120) -> dict[str, Any]:
        """The run's view once it ended (read as admin)."""
        admin = self["admin"]
        views: list[dict[str, Any]] = []

        def ended() -> bool:
            views.append(admin.get(f"/v1/runs/{run_id}").json())
            return views[-1].get("state") not in ("pending", "running", "queued")

        wait_until(ended, timeout_s, f"run {run_id}")
        return views[-1]

    def seed(self, team: str) -> TeamObjects:
        """Create, as ``team``'s submitter, one object of each kind."""
        client = self[f"{team}-submitter"]
        lines = [json.dumps({"prompt": f"{team} prompt {i}"}) for i in range(4)]
        content = ("\n".join(lines) + "\n").encode()
        dataset = client.post(
            f"/v1/datasets?name={team}-prompts.jsonl", content=content, headers=NDJSON
        )
        assert dataset.status_code == 201, dataset.text
        stored = client.post("/v1/scenarios", json=scenario(f"{team}-scenario"))
        assert stored.status_code == 201, stored.text
        scenario_id = stored.json()["id"]
        run = client.post("/v1/runs", json={"scenario_id": scenario_id})
        assert run.status_code == 201, run.text
        run_id = run.json()["id"]
        schedules = [
            client.post(
                "/v1/schedules",
                json={"scenario_id": scenario_id, "cron": "0 0 1 1 *", "name": f"{team}-{n}"},
            )
            for n in ("yearly", "spare")
        ]
        for schedule in schedules:
            assert schedule.status_code == 201, schedule.text
        session = client.post(
            "/v1/shadow-sessions",
            json={"config": gateway_config(f"{team}-session"), "wait_for_workers": True},
        )
        assert session.status_code == 201, session.text
        view = self.wait_for_run(run_id)
        assert view["state"] == "finished", view
        deletable: list[str] = []
        for n in ("free", "spare"):
            other = client.post("/v1/scenarios", json=scenario(f"{team}-{n}"))
            assert other.status_code == 201, other.text
            data = f'{{"prompt": "{team} {n}"}}\n'.encode()
            upload = client.post("/v1/datasets", content=data, headers=NDJSON)
            assert upload.status_code == 201, upload.text
            deletable += [other.json()["id"], upload.json()["id"]]
        return TeamObjects(
            dataset.json()["id"], content, scenario_id, run_id, schedules[0].json()["id"],
            session.json()["id"], schedules[1].json()["id"], deletable[0], deletable[2],
            deletable[1], deletable[3],
        )  # fmt: skip


@dataclass
class Probe:
    """One route tried by one caller on one team's object, and the status it must get."""

    route: str
    caller: str
    owner: str  # the team whose object it is ("" for routes on no object)
    expected: int
    status: int = 0
    body: str = ""

    @property
    def role(self) -> str:
        """The caller's role."""
        return "admin" if self.caller == "admin" else self.caller.split("-")[1]

    @property
    def relation(self) -> str:
        """same team, other team's private object, other team's org-visible object."""
        if self.caller == "admin":
            return "any team"
        if not self.owner:
            return "-"
        team = self.caller.split("-")[0]
        if team == self.owner:
            return "same team"
        return "other team, private" if TEAMS[self.owner] == "team" else "other team, org-visible"


@dataclass
class Route:
    """A route and how to call it on an object; ``kind``: read, change or create."""

    label: str
    kind: str
    call: Callable[[httpx.Client, TeamObjects], httpx.Response]
    ok: int = 200
    # The status of a request the route refuses for content, not access (e.g. a
    # dataset of another team used in a run: 422 as an unknown one).
    other_private: int | None = None
    notes: list[str] = field(default_factory=list)


def _expected(route: Route, caller: str, owner: str) -> int:
    """The rule: admins may do everything; a viewer never changes or creates (403
    before anything else); another team's private object is 404 (or the route's own
    answer for an unknown id); another team's visible object reads 200 and changes 403."""
    if caller == "admin":
        return route.ok
    team, role = caller.split("-")
    if route.kind in ("change", "create") and role == "viewer":
        return 403
    if not owner or team == owner:
        return route.ok
    if TEAMS[owner] == "team":
        return route.other_private if route.other_private is not None else 404
    return 403 if route.kind == "change" else route.ok


def _sql(query: str) -> dict[str, Any]:
    return {"query": query, "max_staleness_s": 0}


ROUTES = [
    Route("GET /v1/runs/{id}", "read", lambda c, o: c.get(f"/v1/runs/{o.run}")),
    Route("GET /v1/runs/{id}/report", "read", lambda c, o: c.get(f"/v1/runs/{o.run}/report")),
    Route(
        "GET /v1/runs/{id}/report?format=markdown",
        "read",
        lambda c, o: c.get(f"/v1/runs/{o.run}/report?format=markdown"),
    ),
    Route(
        "GET /v1/runs/{id}/report?compare={id}",
        "read",
        lambda c, o: c.get(f"/v1/runs/{o.run}/report?compare={o.run}"),
    ),
    Route("GET /v1/runs/{id}/records", "read", lambda c, o: c.get(f"/v1/runs/{o.run}/records")),
    Route("GET /v1/scenarios/{id}", "read", lambda c, o: c.get(f"/v1/scenarios/{o.scenario}")),
    Route("GET /v1/datasets/{id}", "read", lambda c, o: c.get(f"/v1/datasets/{o.dataset}")),
    Route("GET /v1/schedules/{id}", "read", lambda c, o: c.get(f"/v1/schedules/{o.schedule}")),
    Route(
        "GET /v1/schedules/{id}/runs",
        "read",
        lambda c, o: c.get(f"/v1/schedules/{o.schedule}/runs"),
    ),
    Route(
        "GET /v1/trends?schedule_id=",
        "read",
        lambda c, o: c.get(f"/v1/trends?schedule_id={o.schedule}"),
    ),
    Route(
        "GET /v1/trends?scenario_id=",
        "read",
        lambda c, o: c.get(f"/v1/trends?scenario_id={o.scenario}"),
    ),
    Route(
        "GET /v1/shadow-sessions/{id}",
        "read",
        lambda c, o: c.get(f"/v1/shadow-sessions/{o.session}"),
    ),
    Route(
        "GET /v1/shadow-sessions/{id}/comparison",
        "read",
        lambda c, o: c.get(f"/v1/shadow-sessions/{o.session}/comparison"),
    ),
    Route(
        "GET /v1/shadow-sessions/{id}/pairs",
        "read",
        lambda c, o: c.get(f"/v1/shadow-sessions/{o.session}/pairs"),
    ),
    Route(
        "GET /v1/shadow-sessions/{id}/replay",
        "read",
        lambda c, o: c.get(f"/v1/shadow-sessions/{o.session}/replay"),
    ),
    Route(
        "POST /v1/runs (stored scenario)",
        "create",
        lambda c, o: c.post("/v1/runs", json={"scenario_id": o.scenario}),
        ok=201,
    ),
    Route(
        "POST /v1/runs (dataset)",
        "create",
        lambda c, o: c.post(
            "/v1/runs", json={"scenario": scenario(prompts={"dataset": o.dataset})}
        ),
        ok=201,
        other_private=422,
    ),
    Route(
        "POST /v1/scenarios (dataset)",
        "create",
        lambda c, o: c.post("/v1/scenarios", json=scenario(prompts={"dataset": o.dataset})),
        ok=201,
        other_private=422,
    ),
    Route(
        "POST /v1/schedules (scenario)",
        "create",
        lambda c, o: c.post("/v1/schedules", json={"scenario_id": o.scenario, "cron": "0 0 1 1 *"}),
        ok=201,
    ),
    Route(
        "POST /v1/runs/{id}/cancel",
        "change",
        lambda c, o: c.post(f"/v1/runs/{o.run}/cancel"),
        ok=202,
    ),
    Route(
        "POST /v1/schedules/{id}/pause",
        "change",
        lambda c, o: c.post(f"/v1/schedules/{o.schedule}/pause"),
    ),
    Route(
        "POST /v1/schedules/{id}/resume",
        "change",
        lambda c, o: c.post(f"/v1/schedules/{o.schedule}/resume"),
    ),
    Route(
        "POST /v1/shadow-sessions/{id}/stop",
        "change",
        lambda c, o: c.post(f"/v1/shadow-sessions/{o.session}/stop?drain_s=0"),
        ok=202,
    ),
    # Last: what they delete is gone for good afterwards.
    Route(
        "DELETE /v1/schedules/{id}",
        "change",
        lambda c, o: c.delete(f"/v1/schedules/{o.schedule}"),
        ok=204,
    ),
    Route(
        "DELETE /v1/scenarios/{id}",
        "change",
        lambda c, o: c.delete(f"/v1/scenarios/{o.free_scenario}"),
        ok=204,
    ),
    Route(
        "DELETE /v1/datasets/{id}",
        "change",
        lambda c, o: c.delete(f"/v1/datasets/{o.free_dataset}"),
        ok=204,
    ),
]
# Routes on no object: the caller's role alone decides.
UNOWNED_ROUTES = [
    Route("GET /v1/runs", "read", lambda c, o: c.get("/v1/runs")),
    Route("GET /v1/scenarios", "read", lambda c, o: c.get("/v1/scenarios")),
    Route("GET /v1/datasets", "read", lambda c, o: c.get("/v1/datasets")),
    Route("GET /v1/schedules", "read", lambda c, o: c.get("/v1/schedules")),
    Route("GET /v1/shadow-sessions", "read", lambda c, o: c.get("/v1/shadow-sessions")),
    Route("GET /v1/trends?name=", "read", lambda c, o: c.get("/v1/trends?name=red-scenario")),
    Route("POST /v1/sql", "read", lambda c, o: c.post("/v1/sql", json=_sql("SELECT 1 AS one"))),
    Route(
        "POST /v1/datasets",
        "create",
        lambda c, o: c.post("/v1/datasets", content=b'{"prompt": "x"}\n', headers=NDJSON),
        ok=201,
    ),
    Route(
        "POST /v1/shadow-sessions",
        "create",
        lambda c, o: c.post(
            "/v1/shadow-sessions",
            json={"config": gateway_config("probe"), "wait_for_workers": True},
        ),
        ok=201,
    ),
    # Spans name a provider, not an object: another team's runs refuse them inside a 200
    # (tests/security/test_otlp_receiver.py); a viewer may send none.
    Route(
        "POST /v1/otlp/v1/traces",
        "create",
        lambda c, o: c.post("/v1/otlp/v1/traces", json={"resourceSpans": []}),
    ),
]


def probe_matrix(teams: Teams, objects: dict[str, TeamObjects]) -> list[Probe]:
    """Every route by every caller on each team's object; each probe's status filled in.
    Changes by the owner team's submitter come after the other callers' (a schedule is
    deleted only once every other caller has tried it)."""
    probes: list[Probe] = []
    for route in UNOWNED_ROUTES:
        for caller in CALLERS:
            probe = Probe(route.label, caller, "", _expected(route, caller, ""))
            _run(probe, route, teams[caller], objects["red"])
            probes.append(probe)
    for route in ROUTES:
        for owner in ("red", "blue"):
            # The owner's own submitter and the admin last: their change succeeds.
            order = sorted(CALLERS, key=lambda c: (c == "admin", c == f"{owner}-submitter"))
            for caller in order:
                probe = Probe(route.label, caller, owner, _expected(route, caller, owner))
                target = objects[owner]
                if route.label.startswith("DELETE") and caller == "admin":
                    target = replace(
                        target,
                        schedule=target.spare_schedule,
                        free_scenario=target.spare_scenario,
                        free_dataset=target.spare_dataset,
                    )
                _run(probe, route, teams[caller], target)
                probes.append(probe)
    return probes


def _run(probe: Probe, route: Route, client: httpx.Client, objects: TeamObjects) -> None:
    answer = route.call(client, objects)
    probe.status = answer.status_code
    probe.body = answer.text[:300]


COLUMNS = [
    ("admin", "any team"),
    ("viewer", "same team"),
    ("viewer", "other team, org-visible"),
    ("viewer", "other team, private"),
    ("submitter", "same team"),
    ("submitter", "other team, org-visible"),
    ("submitter", "other team, private"),
]


def matrix_markdown(probes: list[Probe]) -> str:
    """The table route × role × same/other team → status: a row per route, a column per
    role and whose object it is (routes on no object: the same answer in each column of
    a role; statuses that differ between probes of one cell are shown ``a / b``)."""
    cells: dict[str, dict[tuple[str, str], set[int]]] = {}
    for probe in probes:
        row = cells.setdefault(probe.route, {})
        relations = (
            [probe.relation]
            if probe.owner or probe.role == "admin"
            else [relation for role, relation in COLUMNS if role == probe.role]
        )
        for relation in relations:
            row.setdefault((probe.role, relation), set()).add(probe.status)
    header = ["route", *(f"{role}: {relation}" for role, relation in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for route, row in cells.items():
        shown = [" / ".join(str(s) for s in sorted(row.get(column, set()))) for column in COLUMNS]
        lines.append(f"| `{route}` | " + " | ".join(shown) + " |")
    return "\n".join(lines)
