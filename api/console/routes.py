"""The console's pages of runs: sign-in and out, the runs list, a run, its downloads
and cancel, the comparison of two runs, and the submit form.

Every page calls the REST routes' own functions with the session's caller (reads.py):
the same authorisation, bounds and quotas as the API.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse

from api.access.caller import Role
from api.access.ownership import Kind, check_change
from api.access.tokens import TokenRegistry
from api.console.auth import ConsoleDep, checked_form, current, form_of, need, sessions_of
from api.console.pages import render, secured
from api.console.reads import (
    ACTIVE,
    App,
    decoded,
    progress_rows,
    report_sections,
    run_list,
    run_view,
    submitted_scenario,
)
from api.console.sessions import COOKIE
from api.rest.errors import ProviderEgressDenied
from api.rest.routes import runs as rest_runs
from api.schemas import RunCreate
from scenarios.errors import BadInput, NotFound, TokenbenchError
from scenarios.limits import MAX_ID_CHARS
from scenarios.loader import ScenarioError, parse_scenario, read_yaml

router = APIRouter(include_in_schema=False)

LOGIN_COOKIE = "tb_login_csrf"
STATES = ("queued", "running", "finished", "failed", "cancelled")
DOWNLOADS = ("parquet", "csv", "html", "markdown", "json")
_SUFFIX = {"parquet": "parquet", "csv": "csv", "html": "html", "markdown": "md", "json": "json"}
RunId = Annotated[str, Query(max_length=MAX_ID_CHARS)]


def _cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(
        name, value, httponly=True, samesite="strict", path="/",
        secure=request.url.scheme == "https",
    )  # fmt: skip


@router.get("/")
async def home(request: Request) -> Response:
    """The runs when signed in, else the sign-in page."""
    target = "/runs" if current(request) is not None else "/login"
    return secured(RedirectResponse(target, status_code=303))


def _login_page(request: Request, status: int = 200, error: str | None = None) -> Response:
    # Sign-in has no session yet: its CSRF token is a cookie of its own (double submit).
    token = secrets.token_urlsafe(32)
    response = render(request, "login.html", status, login_csrf=token, error=error)
    _cookie(response, request, LOGIN_COOKIE, token)
    return response


@router.get("/login")
async def login_page(request: Request) -> Response:
    """The sign-in form."""
    return _login_page(request)


@router.post("/login")
async def login(request: Request) -> Response:
    """Exchange a token for a session (the token itself is never kept)."""
    form = await form_of(request)
    expected = request.cookies.get(LOGIN_COOKIE)
    offered = form.get("csrf", "")
    if not expected or not secrets.compare_digest(expected, offered):
        return _login_page(request, 403, "The sign-in form expired: try again.")
    registry: TokenRegistry = request.app.state.tokens
    caller = registry.authenticate(form.get("token", "").strip())
    if caller is None:
        return _login_page(request, 401, "That token is unknown, expired or revoked.")
    session = sessions_of(request).open(caller.token_id)
    response = secured(RedirectResponse("/runs", status_code=303))
    _cookie(response, request, COOKIE, session.session_id)
    response.delete_cookie(LOGIN_COOKIE, path="/")
    return response


@router.post("/logout")
async def logout(request: Request, console: ConsoleDep) -> Response:
    """End the session."""
    await checked_form(request, console)
    sessions_of(request).close(console.session.session_id)
    response = secured(RedirectResponse("/login", status_code=303))
    response.delete_cookie(COOKIE, path="/")
    return response


# ---------------------------------------------------------------------------- runs


@router.get("/runs")
async def runs_page(
    request: Request, console: ConsoleDep, q: str = "", state: str = ""
) -> Response:
    """The runs the caller may read, newest first, with a search and a state filter."""
    runs = await run_list(App.of(request), console.caller, q[:200], state)
    return render(request, "runs.html", runs=runs, q=q, state=state, states=STATES)


@router.get("/runs/table")
async def runs_fragment(
    request: Request, console: ConsoleDep, q: str = "", state: str = ""
) -> Response:
    """The runs table's body alone (polled by the page)."""
    runs = await run_list(App.of(request), console.caller, q[:200], state)
    return render(request, "runs_body.html", runs=runs)


@router.get("/runs/{run_id}")
async def run_page(request: Request, console: ConsoleDep, run_id: str) -> Response:
    """A run: live progress while it runs, its report once it ended."""
    app = App.of(request)
    view = await run_view(app, console.caller, run_id)
    sections: list[tuple[str, str]] = []
    if view["state"] not in ACTIVE:
        sections, _ = await report_sections(app, console.caller, run_id)
    may_cancel = view["state"] in ACTIVE and _may_change(app, console, run_id)
    return render(
        request, "run.html", run=view, rows=progress_rows(view), sections=sections,
        scenario=submitted_scenario(app, console.caller, run_id), downloads=DOWNLOADS,
        may_cancel=may_cancel, active=view["state"] in ACTIVE,
    )  # fmt: skip


def _may_change(app: App, console: Any, run_id: str) -> bool:
    if not console.caller.has(Role.SUBMITTER):
        return False
    try:
        check_change(app.writer, console.caller, Kind.RUN, run_id)
    except TokenbenchError:
        return False
    return True


@router.get("/runs/{run_id}/progress")
async def run_progress(request: Request, console: ConsoleDep, run_id: str) -> Response:
    """The progress fragment of a run (polled while it runs)."""
    view = await run_view(App.of(request), console.caller, run_id)
    return render(
        request, "progress.html", run=view, rows=progress_rows(view),
        active=view["state"] in ACTIVE,
    )  # fmt: skip


@router.post("/runs/{run_id}/cancel")
async def cancel(request: Request, console: ConsoleDep, run_id: str) -> Response:
    """Cancel a run: POST /v1/runs/{id}/cancel's own function (submitters of its team
    and admins; 404 for a run the caller may not read, 403 for another team's)."""
    await checked_form(request, console)
    need(console.caller, Role.SUBMITTER)
    app = App.of(request)
    await rest_runs.cancel_run(
        run_id, app.plane, app.writer, app.heavy, app.settings, console.caller
    )
    return secured(RedirectResponse(f"/runs/{run_id}", status_code=303))


@router.get("/runs/{run_id}/download/{kind}")
async def download(request: Request, console: ConsoleDep, run_id: str, kind: str) -> Response:
    """Records as Parquet, the report as CSV, HTML, markdown or JSON: the REST routes'
    own answers (GET /v1/runs/{id}/records and /report) for the session's caller."""
    if kind not in DOWNLOADS:
        raise NotFound(f"no download {kind!r}: one of {', '.join(DOWNLOADS)}")
    app = App.of(request)
    answer: Response
    if kind == "parquet":
        cursor = app.writer.cursor()
        try:
            answer = rest_runs.get_records(run_id, cursor, app.writer, console.caller, "parquet")
        finally:
            cursor.close()
    else:
        answer = await rest_runs.get_report(
            run_id, app.writer, app.heavy, console.caller, kind, None, None, False, None
        )
    filename = f"{run_id}.{_SUFFIX[kind]}".replace('"', "")
    answer.headers["content-disposition"] = f'attachment; filename="{filename}"'
    return secured(answer, page=False)


# ---------------------------------------------------------------------------- compare


@router.get("/compare")
async def compare(
    request: Request,
    console: ConsoleDep,
    a: Annotated[str, Query(max_length=MAX_ID_CHARS)] = "",
    b: Annotated[str, Query(max_length=MAX_ID_CHARS)] = "",
    run: Annotated[str, Query(max_length=MAX_ID_CHARS)] = "",
    providers: Annotated[str, Query(max_length=2 * MAX_ID_CHARS + 1)] = "",
) -> Response:
    """Two runs side by side (run B against baseline A), or two providers within one run
    (``providers=A,B``): the verdicts and the comparison sections."""
    app = App.of(request)
    runs = await run_list(app, console.caller)
    sections: list[tuple[str, str]] = []
    verdicts: dict[str, int] = {}
    comparison: dict[str, Any] | None = None
    if run and providers:
        sections, comparison = await report_sections(app, console.caller, run, providers=providers)
    elif a and b:
        sections, comparison = await report_sections(app, console.caller, b, compare=a)
    if comparison is not None:
        for row in comparison.get("rows", []):
            verdict = str(row.get("verdict") or "no verdict")
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
    return render(
        request, "compare.html", runs=runs, a=a, b=b, run=run, providers=providers,
        sections=sections, verdicts=verdicts, comparison=comparison,
    )  # fmt: skip


# ---------------------------------------------------------------------------- submit


@router.get("/submit")
async def submit_page(request: Request, console: ConsoleDep) -> Response:
    """The submit form (submitters and admins)."""
    need(console.caller, Role.SUBMITTER)
    return render(request, "submit.html", text="", problems=[], plan=None, note=None, wait=False)


def _problems(exc: TokenbenchError) -> list[dict[str, Any]]:
    """What was wrong, each at its field path (and line when known)."""
    if isinstance(exc, ScenarioError):
        return [{"path": p.path, "line": p.line, "message": p.message} for p in exc.problems]
    if isinstance(exc, ProviderEgressDenied):
        return [{"path": ".".join(map(str, exc.path)), "line": None, "message": str(exc)}]
    return [{"path": "", "line": None, "message": str(exc)}]


@router.post("/submit")
async def submit(request: Request, console: ConsoleDep) -> Response:
    """Validate, dry-run or start the pasted scenario, as POST /v1/runs does."""
    form = await checked_form(request, console)
    need(console.caller, Role.SUBMITTER)
    text = form.get("scenario", "")
    action = form.get("action", "validate")
    starter = request.app.state.starter
    plan: dict[str, Any] | None = None
    note = None
    try:
        if not text.strip():
            raise BadInput("paste a scenario (YAML or JSON) or choose a file")
        parse_scenario(text, "scenario")  # problems at their field path and line
        data, _ = read_yaml(text, "scenario")
        body = RunCreate(scenario=data, wait_for_workers=form.get("wait_for_workers") == "on")
        if action in ("start", "dry_run"):
            # POST /v1/runs's own function: the same checks, quotas, budget and audit.
            answer = await rest_runs.create_run(
                body, starter, console.caller, request.app.state.con, action == "dry_run"
            )
            if isinstance(answer, Response):
                plan = decoded(answer)
            else:
                return secured(RedirectResponse(f"/runs/{answer.id}", status_code=303))
        else:
            await starter.checked_scenario(body, console.caller)
            note = "The scenario is valid."
    except TokenbenchError as exc:
        status = exc.http_status if exc.http_status < 500 else 422
        return render(
            request, "submit.html", status, text=text, problems=_problems(exc), plan=None,
            note=None, wait=form.get("wait_for_workers") == "on",
        )  # fmt: skip
    return render(
        request, "submit.html", text=text, problems=[], plan=plan, note=note,
        wait=form.get("wait_for_workers") == "on",
    )  # fmt: skip
