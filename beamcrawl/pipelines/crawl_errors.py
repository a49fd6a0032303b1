"""Why a crawl stopped: the errors the crawl loop raises, each a one-line message for the CLI."""

from __future__ import annotations


class CrawlError(Exception):
    """A crawl cannot start or continue; the message is one line naming the problem."""


class RoundInterrupted(CrawlError):
    """The operator interrupted a round (Ctrl-C); ``round_no`` was not committed, or only
    partly (``committing``), and a rerun redoes or finishes it."""

    def __init__(self, round_no: int, committing: bool = False) -> None:
        if committing:
            message = f"interrupted while committing round {round_no}; rerun to finish the commit"
        else:
            message = f"interrupted; round {round_no} was not committed, rerun to redo it"
        super().__init__(message)
        self.round_no = round_no
        self.committing = committing
