"""``python -m api.gateway --config FILE ...``: the gateway command on its own (the same
function ``tokenbench gateway`` runs)."""

import typer

from api.gateway.cli import gateway

if __name__ == "__main__":
    typer.run(gateway)
