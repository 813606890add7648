"""``python -m ope`` runs the command line (the same as the ``ope`` console script)."""

from ope.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
