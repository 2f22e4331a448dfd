"""Area 4: bad flags of `python -m spot_trainer {status,train,agent}` and `python -m localcloud demo`."""

from __future__ import annotations

import sys
from pathlib import Path

from hostile.job_files import changed, toml_text
from hostile.judging import AWS_OFFLINE, REPO, Probe, judge_cli

DEMO_STUB = """
import sys
sys.path.insert(0, sys.argv.pop(1))
import localcloud.__main__ as cli

class NoDemo(cli.LocalCloud):
    # The real synth runs first (it checks the job file); moto, the deploy and the instances do not.
    def __enter__(self):
        print("hostile-inputs: every check passed; a real demo would start moto here", file=sys.stderr)
        raise SystemExit(97)

def no_destroy():
    raise SystemExit(97)

cli.LocalCloud = NoDemo
cli.destroy = no_destroy
sys.exit(cli.main(sys.argv[1:]))
"""

TRAIN = ["train", "--model", "lm", "--synthetic", "--checkpoint-dir", "{dir}/ck"]


def demo_flag(flag: str, value: str) -> tuple[str, str, list[str]]:
    """`python -m localcloud demo FLAG VALUE`, whose line must name FLAG."""
    return f"demo {flag} {value}", flag, ["localcloud", "demo", flag, value]


def cli_cases() -> list[tuple[str, str, list[str]]]:
    """(case, the flag the line must name, argv after `python -m`); "{dir}" is the case's folder."""
    status = ["spot_trainer", "status"]
    demo = ["localcloud", "demo"]
    return [
        ("status --bucket 'My Bucket'", "--bucket", [*status, "--job", "cifar", "--bucket", "My Bucket"]),
        ("status without --job", "--job", [*status, "--bucket", "some-bucket"]),
        ("status without --bucket", "--bucket", [*status, "--job", "cifar"]),
        ("status --bucket s3://some-bucket", "--bucket", [*status, "--job", "cifar", "--bucket", "s3://some-bucket"]),
        ("status --job ../x", "--job", [*status, "--job", "../x", "--bucket", "some-bucket"]),
        ("status --region Mars", "--region", [*status, "--job", "mine", "--bucket", "some-bucket", "--region", "Mars"]),
        ("status --jb (typo)", "--job", [*status, "--jb", "cifar", "--bucket", "some-bucket"]),
        ("spot_trainer trian (typo)", "trian", ["spot_trainer", "trian"]),
        ("spot_trainer with no command", "agent,train,status", ["spot_trainer"]),
        ("train --steps abc", "--steps", ["spot_trainer", *TRAIN, "--steps", "abc"]),
        ("train --steps 0", "--steps", ["spot_trainer", *TRAIN, "--steps", "0"]),
        ("train --model nope", "--model", ["spot_trainer", "train", "--model", "nope", "--synthetic", "--steps", "2",
                                           "--checkpoint-dir", "{dir}/ck"]),
        ("train --checkpoint-dir a file", "--checkpoint-dir",
         ["spot_trainer", "train", "--model", "lm", "--synthetic", "--steps", "2", "--checkpoint-dir", "{dir}/a-file"]),
        ("train without --checkpoint-dir or $CHECKPOINT_DIR", "--checkpoint-dir",
         ["spot_trainer", "train", "--model", "lm", "--synthetic", "--steps", "2"]),
        ("train unknown flag --fast", "--fast", ["spot_trainer", *TRAIN, "--steps", "2", "--fast"]),
        ("train --lr -1", "--lr", ["spot_trainer", *TRAIN, "--steps", "2", "--lr", "-1"]),
        ("train --data missing folder", "--data", ["spot_trainer", "train", "--model", "lm", "--steps", "2",
                                                   "--data", "{dir}/no-such-data", "--checkpoint-dir", "{dir}/ck"]),
        ("agent --bogus", "--bogus", ["spot_trainer", "agent", "--bogus"]),
        ("demo --job nope", "nope", [*demo, "--job", "nope"]),
        ("demo --job a file with a bad field", "capacity.nodes", [*demo, "--job", "{dir}/badfield.toml"]),
        ("demo --job a Latin-1 file", "UTF-8", [*demo, "--job", "{dir}/latin.toml"]),
        demo_flag("--interruptions", "-1"),
        demo_flag("--spot-outage", "abc"),
        ("demo --price-trace missing file", "--price-trace", [*demo, "--price-trace", "{dir}/no-such-trace.json"]),
        ("demo --price-trace not JSON", "--price-trace", [*demo, "--price-trace", "{dir}/a-file"]),
        demo_flag("--rate", "-5"),
        ("demo --interruptions with --rate", "--rate", [*demo, "--interruptions", "2", "--rate", "3"]),
        demo_flag("--hard-kill", "5"),
        demo_flag("--spot-discount", "1.5"),
        demo_flag("--notice-seconds", "-1"),
        demo_flag("--timeout", "0"),
        demo_flag("--early-replacement", "-1"),
        ("demo --env FOO (no =)", "--env", [*demo, "--env", "FOO"]),
        ("demo --json into a missing folder", "--json", [*demo, "--json", "{dir}/no-such-dir/report.json"]),
        ("demo --train-args '--steps abc'", "--train-args", [*demo, "--train-args=--model lm --synthetic --steps abc"]),
        demo_flag("--seed", "x"),
        ("localcloud dmeo (typo)", "dmeo", ["localcloud", "dmeo"]),
    ]


def cli_probe(index: int, case: tuple[str, str, list[str]], root: Path) -> Probe:
    name, expect, argv = case
    folder = root / "cli" / f"{index:03d}"
    folder.mkdir(parents=True)
    (folder / "a-file").write_text("not a directory, not JSON")
    (folder / "badfield.toml").write_text(toml_text(changed("capacity", "nodes", 0)))
    (folder / "latin.toml").write_bytes('description = "café"\n'.encode("latin-1"))
    args = [word.format(dir=folder) for word in argv]
    if args[0] == "localcloud":
        command = [sys.executable, "-c", DEMO_STUB, str(REPO), *args[1:]]
    else:
        command = [sys.executable, "-m", *args]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
           **AWS_OFFLINE}
    # `train` runs torch; a demo that passes its flag checks runs a real `cdk synth`.
    return Probe("cli", name, command, folder, env, expect, judge_cli, timeout=120,
                 heavy="train" in args[1:2] or args[0] == "localcloud")
