"""The built-in trainer's command line under its earlier name: it lives in the annex
(`builtin_arguments.py`), which the agent and the stack read too."""

from ..builtin_arguments import ArgumentsError, arguments_problem, check_arguments, total_steps

__all__ = ["ArgumentsError", "arguments_problem", "check_arguments", "total_steps"]
