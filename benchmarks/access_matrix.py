"""The access matrix of a shared control plane: every route × role × same/other team →
the status it answers.

    python benchmarks/access_matrix.py [--out FILE.md]

Starts a private Redis, a worker and `tokenbench serve` on loopback, with two teams'
tokens minted into its database before it starts: team red keeps its results to itself
(visibility ``team``), team blue shares them (``org``); each has a viewer and a
submitter, and the bootstrap token is the admin. Each team stores one object of each
kind (dataset, scenario, run, schedule, shadow session), then every route is tried by
every role on each team's object (tests/support/teams.py, the same probes
tests/security/test_teams.py asserts). Prints the table as markdown (and writes it to
``--out``); a status other than the rule's is marked ``(expected N)``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from api.local.redis_server import start_redis_server  # noqa: E402
from tests.support.teams import matrix_markdown, probe_matrix, team_stack  # noqa: E402


def main() -> int:
    """Run the probes and print the table; exit 1 if any status breaks the rules."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="Also write the table to this file.")
    args = parser.parse_args()
    server = start_redis_server()
    try:
        env = {
            **os.environ,
            "TOKENBENCH__REDIS__URL": server.url,
            "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true",
        }
        with (
            tempfile.TemporaryDirectory(prefix="access-matrix-") as tmp,
            team_stack(env, server.url, Path(tmp)) as teams,
        ):
            objects = {team: teams.seed(team) for team in ("red", "blue")}
            probes = probe_matrix(teams, objects)
    finally:
        server.stop()
    for probe in probes:
        if probe.status != probe.expected:
            probe.route += f" (expected {probe.expected})"
    table = matrix_markdown(probes)
    print(table)
    if args.out is not None:
        args.out.write_text(table + "\n")
    wrong = sum(probe.status != probe.expected for probe in probes)
    print(f"\n{len(probes)} requests, {wrong} answered otherwise than the rules")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
