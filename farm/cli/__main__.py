"""`python -m farm.cli`: the `farm` command."""

from farm.cli.main import main

if __name__ == "__main__":
    main()
