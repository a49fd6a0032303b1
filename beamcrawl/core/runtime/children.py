"""Servers the crawl starts for itself end when the crawl ends, however it ends.

A server a crawl launches for its own use (the Flink job server with its mini-cluster, a
Bigtable emulator) is stopped by the launcher's ``finally`` on a normal exit, a Ctrl-C or
a SIGTERM. A SIGKILL or an OOM kill runs no ``finally``: the server is reparented to init
and runs on, holding its memory (a job server's JVM: half a gigabyte) and its ports, until
someone finds it. :func:`dying_with_parent` wraps the server's command so that, before it
becomes the server, it asks the kernel to send it SIGTERM when the process that started it
ends (Linux's ``PR_SET_PDEATHSIG``), so it stops as it would have been stopped.

The request is made by a small Python program that then execs the server (the same pid),
not by a ``preexec_fn``: a ``preexec_fn`` makes ``subprocess`` fork the whole launcher and
run code in the copy, with the fork handlers of every library loaded, and gRPC's restart
their threads in it. A launcher that had used gRPC (Beam, the Bigtable client) then had its
job server die in the copy before it ran, with a gRPC poller's complaint in its log. Without
a ``preexec_fn``, ``subprocess`` starts the child with ``vfork``: nothing runs before the exec.

The signal comes when the *thread* that started the child ends, not the whole process:
start such servers from a thread that lives as long as they should (the CLI's main thread).
Elsewhere than Linux the command is run as it is.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys

__all__ = ["dying_with_parent"]

# argv: the launcher's pid, then the server's command (its program already a path).
_WRAPPER = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):  # the launcher ended before the request was made
    sys.exit(128 + signal.SIGTERM)
try:
    os.execv(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write(f"cannot run {sys.argv[2]}: {exc.strerror}\\n")
    sys.exit(127)
"""


def dying_with_parent(cmd: list[str]) -> list[str]:
    """``cmd`` as a command whose process gets SIGTERM when this one ends (Linux; elsewhere
    ``cmd`` itself). Start it without a ``preexec_fn``.

    Raises:
        FileNotFoundError: ``cmd``'s program is not found (as ``subprocess.Popen`` would
            raise it for ``cmd``).
    """
    if not sys.platform.startswith("linux"):
        return list(cmd)
    program = shutil.which(cmd[0])
    if program is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cmd[0])
    return [sys.executable, "-I", "-S", "-c", _WRAPPER, str(os.getpid()), program, *cmd[1:]]
