"""``python -m beamcrawl.simweb``: run the synthetic web server (see ``server.py``)."""

from __future__ import annotations

import sys

from beamcrawl.simweb.server import main

if __name__ == "__main__":
    sys.exit(main())
