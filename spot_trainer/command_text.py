"""What a training command's text may hold: the job file checks it at synth and the agent at start,
by these same rules, so a console value synth never saw fails the first start with the same reason."""

from __future__ import annotations

from dataclasses import dataclass

BUILTIN = "builtin"  # the built-in trainer, exactly; its arguments go in train_args


@dataclass(frozen=True)
class Program:
    """What trains: the built-in trainer or the user's own command, told apart once, from the command's text."""

    command: str  # exactly BUILTIN, or the user's shell command

    @property
    def builtin(self) -> bool:
        """The built-in trainer: it resumes by contract, writes a COMMITTED marker and takes train_args."""
        return self.command == BUILTIN


def shadows_builtin(command: str) -> bool:
    """`builtin; …` or `builtin --steps 5`: the shell's own `builtin`, which exits 0 at once, so the job
    would end DONE after zero steps."""
    words = command.split(maxsplit=1)
    return command != BUILTIN and bool(words) and words[0].rstrip(";&|") == BUILTIN


def has_control_character(text: str) -> bool:
    """A character below space (tab aside) or DEL: an environment file line cannot carry it unchanged."""
    return any(ord(char) < 32 and char != "\t" or ord(char) == 127 for char in text)
