"""``python -m sp4rk`` runs the command-line interface."""

from sp4rk.cli import main

raise SystemExit(main())
