"""Click commands that live in their own modules; `farm/cli.py` registers them with `cli.add_command`."""
