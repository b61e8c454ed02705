"""The one text progress bar of ``compile``, ``tune`` and ``smallgemm.nn``."""

from __future__ import annotations

import sys
from typing import TextIO


class ProgressBar:
    """``prefix [#########.........] done/total suffix`` on one line of ``stream``.

    On a terminal the line is redrawn in place at every ``update``.  Elsewhere (a log
    file, a pipe, CI) a redrawn line would pile up carriage returns: each update is a
    line of its own where ``log_each`` is set (a few slow steps, such as the entries
    of ``compile``), else only ``close`` writes its line (many quick steps, such as
    a training epoch's batches).
    """

    def __init__(
        self,
        total: int,
        prefix: str = "",
        width: int = 30,
        stream: TextIO | None = None,
        log_each: bool = False,
    ) -> None:
        self.total = total
        self.prefix = prefix
        self.width = width
        self.stream = stream if stream is not None else sys.stdout  # looked up now: it may be redirected
        self.log_each = log_each
        isatty = getattr(self.stream, "isatty", None)
        self.terminal = bool(isatty and isatty())

    def line(self, done: int, suffix: str = "") -> str:
        """The bar's text for ``done`` steps of ``total``."""
        filled = self.width * min(done, self.total) // max(self.total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        text = f"[{bar}] {done}/{self.total}"
        return " ".join(part for part in (self.prefix, text, suffix) if part)

    def update(self, done: int, suffix: str = "") -> None:
        """Show ``done`` steps, with ``suffix`` after the count."""
        if self.terminal:
            self.stream.write(f"\r{self.line(done, suffix)}\033[K")
        elif self.log_each:
            self.stream.write(self.line(done, suffix) + "\n")
        else:
            return
        self.stream.flush()

    def close(self, suffix: str = "") -> None:
        """End the line with the full bar and a final ``suffix`` (written once in a log,
        where ``log_each`` wrote the last step already and ``suffix`` adds nothing)."""
        if self.terminal:
            self.stream.write(f"\r{self.line(self.total, suffix)}\033[K\n")
        elif not self.log_each or suffix:
            self.stream.write(self.line(self.total, suffix) + "\n")
        self.stream.flush()
