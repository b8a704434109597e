"""``workers.load`` is import-free: importing the package loads none of its modules, so
a process that needs one shape does not pay for the open loop's machinery."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

PROBE = """
import json, sys
import workers.load
before = sorted(m for m in sys.modules if m.startswith("workers.load."))
from workers.load.shapes import build_load
after = sorted(m for m in sys.modules if m.startswith("workers.load."))
print(json.dumps({"before": before, "after": after, "callable": callable(build_load)}))
"""


def test_importing_the_package_loads_none_of_its_modules() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=True,
    )
    found = json.loads(done.stdout)
    assert found["before"] == []
    # The documented way in: import the module itself.
    assert "workers.load.shapes" in found["after"] and found["callable"]
