"""`python -m bot` is `opbot`."""

from bot.cli import main

main(prog_name="opbot")
