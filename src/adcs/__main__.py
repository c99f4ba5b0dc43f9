"""``python -m adcs``: the command line (see `adcs.cli`)."""

from adcs.cli import app

if __name__ == "__main__":
    app(prog_name="adcs")
