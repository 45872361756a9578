"""`python -m optarena` is the same as the `optarena` command."""

from optarena.cli import entry

entry()
