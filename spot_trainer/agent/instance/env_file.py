"""Read an environment file exactly as systemd's `EnvironmentFile=` does, so the agent and its unit agree.

The states and rules are systemd's `parse_env_file_internal`: an unquoted value is taken as written
(quotes inside it stay, trailing blanks go, `\\x` is `x`); '…' is literal; "…" unescapes only \\ \" \\`
\\$ and keeps any other backslash; quoted and unquoted parts join (`"a" "b"` is `ab`: blanks after a
closing quote are skipped); `#` or `;` first on a line starts a comment; backslash-newline continues.
One departure: a quote still open at the end of the file is an error, where systemd takes the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto

BLANKS = " \t"
NEWLINES = "\n\r"  # systemd ends a line at either, so CRLF files read the same
DOUBLE_QUOTE_ESCAPES = '"\\`$'


class State(Enum):
    PRE_KEY = auto()
    KEY = auto()
    PRE_VALUE = auto()  # at the start of a value and after each closing quote: blanks are skipped
    VALUE = auto()
    VALUE_ESCAPE = auto()
    SINGLE_QUOTE = auto()
    DOUBLE_QUOTE = auto()
    DOUBLE_QUOTE_ESCAPE = auto()
    COMMENT = auto()
    COMMENT_ESCAPE = auto()


@dataclass
class EnvFile:
    """The entries systemd would set, and one message per line it would ignore or we refuse."""

    entries: dict[str, str] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line, what is wrong)


@dataclass
class _Reader:
    result: EnvFile = field(default_factory=EnvFile)
    state: State = State.PRE_KEY
    key: list[str] = field(default_factory=list)
    value: list[str] = field(default_factory=list)
    trailing_blanks: int | None = None
    line: int = 1
    entry_line: int = 1

    def feed(self, char: str) -> None:
        handler = getattr(self, f"_{self.state.name.lower()}")
        handler(char)
        if char == "\n":
            self.line += 1

    def finish(self) -> EnvFile:
        if self.state in (State.SINGLE_QUOTE, State.DOUBLE_QUOTE, State.DOUBLE_QUOTE_ESCAPE):
            self.result.errors.append((self.entry_line, f"{''.join(self.key).strip()}: a quote is never closed"))
        elif self.state == State.KEY:
            self._bad_line()
        elif self.state not in (State.PRE_KEY, State.COMMENT, State.COMMENT_ESCAPE):
            self._push()
        return self.result

    def _pre_key(self, char: str) -> None:
        if char in "#;":
            self.state = State.COMMENT
        elif char not in BLANKS + NEWLINES:
            self.state, self.key, self.entry_line = State.KEY, [char], self.line

    def _key(self, char: str) -> None:
        if char in NEWLINES:
            self._bad_line()
            self.state = State.PRE_KEY
        elif char == "=":
            self.state, self.value, self.trailing_blanks = State.PRE_VALUE, [], None
        else:
            self.key.append(char)

    def _pre_value(self, char: str) -> None:
        if char in NEWLINES:
            self._push()
        elif char == "'":
            self.state = State.SINGLE_QUOTE
        elif char == '"':
            self.state = State.DOUBLE_QUOTE
        elif char == "\\":
            self.state = State.VALUE_ESCAPE
        elif char not in BLANKS:
            self.state = State.VALUE
            self.value.append(char)

    def _value(self, char: str) -> None:
        if char in NEWLINES:
            if self.trailing_blanks is not None:
                del self.value[self.trailing_blanks:]
            self._push()
        elif char == "\\":
            self.state, self.trailing_blanks = State.VALUE_ESCAPE, None
        else:
            if char not in BLANKS:
                self.trailing_blanks = None
            elif self.trailing_blanks is None:
                self.trailing_blanks = len(self.value)
            self.value.append(char)

    def _value_escape(self, char: str) -> None:
        self.state = State.VALUE
        if char not in NEWLINES:  # backslash-newline: the line goes on
            self.value.append(char)

    def _single_quote(self, char: str) -> None:
        if char == "'":
            self.state = State.PRE_VALUE
        else:
            self.value.append(char)

    def _double_quote(self, char: str) -> None:
        if char == '"':
            self.state = State.PRE_VALUE
        elif char == "\\":
            self.state = State.DOUBLE_QUOTE_ESCAPE
        else:
            self.value.append(char)

    def _double_quote_escape(self, char: str) -> None:
        self.state = State.DOUBLE_QUOTE
        if char in DOUBLE_QUOTE_ESCAPES:
            self.value.append(char)
        elif char != "\n":
            self.value.extend(("\\", char))

    def _comment(self, char: str) -> None:
        if char == "\\":
            self.state = State.COMMENT_ESCAPE
        elif char in NEWLINES:
            self.state = State.PRE_KEY

    def _comment_escape(self, char: str) -> None:
        self.state = State.COMMENT

    def _push(self) -> None:
        key = "".join(self.key).strip(BLANKS)
        if key.isidentifier() and key.isascii():
            self.result.entries[key] = "".join(self.value)
        else:
            self.result.errors.append((self.entry_line, f"{key!r} is not a variable name"))
        self.state = State.PRE_KEY

    def _bad_line(self) -> None:
        self.result.errors.append((self.entry_line, f"expected KEY=VALUE, got {''.join(self.key).strip()!r}"))


def read_env_text(text: str) -> EnvFile:
    reader = _Reader()
    for char in text:
        reader.feed(char)
    return reader.finish()
