"""The `farm` command line: one thin module per command (`python -m farm.cli`)."""
