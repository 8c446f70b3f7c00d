"""Exceptions raised for bad input."""
from __future__ import annotations


class GraphError(ValueError):
    """A graph's arrays break one of RoadGraph's rules (ids out of range, bad weights, ...)."""


class ParseError(ValueError):
    """A file could not be read: names the file and, where known, the 1-based line.

    Attributes
    ----------
    path : str
        The file that was being read.
    line : int or None
        1-based line number of the offending line (None when the error is not tied to a line).
    """

    def __init__(self, path, line, message):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")
