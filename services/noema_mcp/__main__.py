"""``python -m noema_mcp [options]``: the same as ``noemactl mcp serve [options]``."""

import sys

from noema_cli.main import app

if __name__ == "__main__":
    app(["mcp", "serve", *sys.argv[1:]], prog_name="python -m noema_mcp")
