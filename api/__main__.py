"""``python -m api``: the tokenbench command line (same as the ``tokenbench`` script)."""

from api.cli.app import main

if __name__ == "__main__":
    main()
