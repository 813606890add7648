"""``python -m ope`` runs the command line."""

from ope.cli import main

raise SystemExit(main())
