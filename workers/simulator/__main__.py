"""``python -m workers.simulator``: the process form of the simulated endpoint (internal)."""

from __future__ import annotations

import argparse

from scenarios.providers.simulate import SimulateSpec
from workers.simulator.process import run


def main() -> None:
    """Parse the internal command line used by :class:`SimulatorPool` and serve."""
    parser = argparse.ArgumentParser(prog="python -m workers.simulator")
    parser.add_argument("--spec-json", required=True)
    parser.add_argument("--model", default="simulated")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent-pid", type=int, default=None)
    args = parser.parse_args()
    spec = SimulateSpec.model_validate_json(args.spec_json)
    run(spec, args.model, args.host, args.port, args.parent_pid)


if __name__ == "__main__":
    main()
