"""What every runner's setup shares: Beam's arguments read as data, and the one error setup raises.

``runners.py`` (the local runner, Prism, the embedded store's check) and ``flink.py`` (Flink's
job server) both read the runner's name and options from a Beam argument list and keep their
built or fetched binaries under one cache folder; they raise :class:`RunnerSetupError` with a
one-line message when a runner cannot be prepared.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

#: Where built runner binaries (Prism) and fetched or built job-server jars (Flink) are kept.
CACHE = Path(os.environ.get("BEAMCRAWL_CACHE", Path.home() / ".cache" / "beamcrawl"))
LOCAL_RUNNER = "FnApiRunner"
LOCAL_MASTERS = ("[local]", "[auto]", "")


class RunnerSetupError(Exception):
    """A runner cannot be prepared; the message is one line saying why and what to do."""


def option_value(args: Sequence[str], name: str) -> str | None:
    """The value of ``--name`` in a Beam argument list (``--name=v`` or ``--name v``)."""
    flag = f"--{name}"
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def runner_name(args: Sequence[str]) -> str:
    return option_value(args, "runner") or LOCAL_RUNNER
