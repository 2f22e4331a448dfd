"""The agent reads its environment file as systemd does: a hand-edited value means the same to both."""

from pathlib import Path

import pytest

from spot_trainer.agent.instance.config import ConfigError, parse_env_file
from spot_trainer.agent.instance.env_file import read_env_text


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ('SPOT_COMMAND=echo "x;y"', 'echo "x;y"'),  # quotes inside an unquoted value stay
        ("SPOT_COMMAND=python train.py  --a   ", "python train.py  --a"),  # inner blanks kept, trailing dropped
        ('SPOT_COMMAND="a  b" \'c  d\'', "a  bc  d"),  # quoted parts join; blanks after a quote skipped
        (r'SPOT_COMMAND="say \"hi\" \$HOME \n"', r'say "hi" $HOME \n'),  # only \ " ` $ unescape
        (r"SPOT_COMMAND='it\s $literal'", r"it\s $literal"),
        (r"SPOT_COMMAND=a\ b\\c", r"a b\c"),
        ("SPOT_COMMAND=", ""),
        ("  SPOT_COMMAND = spaced", "spaced"),
    ],
)
def test_values_read_as_systemd_reads_them(line: str, value: str) -> None:
    assert read_env_text(line + "\n").entries == {"SPOT_COMMAND": value}


def test_comments_continuations_and_crlf() -> None:
    text = "# comment \\\n still comment\r\n; another\r\nA=1\r\nB=two \\\nlines\r\nC=\"multi\nline\"\n"
    assert read_env_text(text).entries == {"A": "1", "B": "two lines", "C": "multi\nline"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('SPOT_COMMAND="never closed\n', "1: SPOT_COMMAND: a quote is never closed"),
        ("A=1\njust words\n", "2: expected KEY=VALUE, got 'just words'"),
        ("A=1\n\n2BAD=x\n", "3: '2BAD' is not a variable name"),
    ],
)
def test_a_broken_file_is_refused_with_its_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "agent.env"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        parse_env_file(path)
    assert str(raised.value) == f"{path}:{message}"


def test_not_strict_keeps_every_readable_entry(tmp_path: Path) -> None:
    path = tmp_path / "agent.env"
    path.write_text("SPOT_JOB=a\nbroken line\nSPOT_BUCKET=b\n")
    assert parse_env_file(path, strict=False) == {"SPOT_JOB": "a", "SPOT_BUCKET": "b"}
