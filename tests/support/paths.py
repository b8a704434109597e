"""Where the repository and its test data are, independent of how deep a test module sits."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROVIDER_DATA = REPO / "tests" / "data" / "providers"
EXAMPLES = REPO / "scenarios" / "examples"
