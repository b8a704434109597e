"""api/access/audit.py: an entry names the caller by token id, team and role, holds its
detail as JSON, and a call without a caller (the service itself) leaves them empty."""

from __future__ import annotations

from pathlib import Path

import orjson

from analytics.store.db import connect
from api.access.audit import audit
from api.access.caller import Caller, Role


def test_an_entry_names_the_caller_and_keeps_the_detail(tmp_path: Path) -> None:
    con = connect(tmp_path / "a.duckdb")
    caller = Caller("tok-0123456789ab", "search", Role.ADMIN, "ci")
    audit(con, caller, "token.mint", "token", "tok-ba9876543210", team="x", cap=None)
    audit(con, None, "run.cancel", "run", "r-1", "failed")
    audit(con, caller, "team.update", "team", "x", "refused")
    rows = con.execute(
        "SELECT token_id, team, role, action, object_kind, object_id, outcome, detail "
        "FROM audit_log ORDER BY seq"
    ).fetchall()
    con.close()
    first, second, third = rows
    assert first[:7] == (
        "tok-0123456789ab", "search", "admin", "token.mint", "token", "tok-ba9876543210", "ok"
    )  # fmt: skip
    assert orjson.loads(first[7]) == {"team": "x", "cap": None}
    assert second[:3] == (None, None, None) and second[6] == "failed"
    assert third[6] == "refused" and third[7] is None
