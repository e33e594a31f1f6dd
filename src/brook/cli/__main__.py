"""`python -m brook.cli`: the `brook` command."""

from brook.cli import main

main()
