"""``python -m ope`` runs the command line (the same as the ``ope`` console script)."""

from ope.cli import run

if __name__ == "__main__":
    run()
