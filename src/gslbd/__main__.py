"""`python -m gslbd` is the same as the `gslbd` command."""

from gslbd.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
