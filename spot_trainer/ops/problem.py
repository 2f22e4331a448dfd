"""The one kind of failure the job commands report: a line that names what is wrong, nothing changed."""

from __future__ import annotations


class JobProblem(Exception):
    """Bad input or a job in the wrong state: printed as one line, exit code `code`."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
