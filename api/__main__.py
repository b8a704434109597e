"""``python -m api``: the tokenbench command line (same as the ``tokenbench`` script)."""

from api.cli import main

if __name__ == "__main__":
    main()
