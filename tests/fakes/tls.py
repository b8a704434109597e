"""A throw-away self-signed certificate for TLS tests (made with the openssl command)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def self_signed(folder: Path, host: str) -> tuple[Path, Path]:
    """Certificate and key files for ``host`` in ``folder``; skips the test when the
    openssl command is missing."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl not available to make a test certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", f"/CN={host}", "-addext", f"subjectAltName=DNS:{host}",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
