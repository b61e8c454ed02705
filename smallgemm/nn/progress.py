"""A tiny text progress bar, redrawn in place on one line."""

from __future__ import annotations

import sys
from typing import TextIO


class ProgressBar:
    """``prefix [#########.........] done/total suffix``, redrawn with a carriage return."""

    def __init__(self, total: int, prefix: str = "", width: int = 30, stream: TextIO | None = None) -> None:
        self.total = total
        self.prefix = prefix
        self.width = width
        self.stream = stream if stream is not None else sys.stdout  # looked up now: it may be redirected
        self._drawn = 0  # length of the line on screen, to blank what a shorter one leaves

    def update(self, done: int, suffix: str = "") -> None:
        filled = self.width * done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        line = f"{self.prefix} [{bar}] {done}/{self.total} {suffix}"
        self.stream.write(f"\r{line:<{self._drawn}}")
        self._drawn = len(line)
        self.stream.flush()

    def close(self, suffix: str = "") -> None:
        """Draw the full bar with a final ``suffix`` and end the line."""
        self.update(self.total, suffix)
        self.stream.write("\n")
