"""`python3 -m spot_trainer.environment restore|overlay|store`, as user data runs it: one line on stdout
saying what happened; restore exits 0 when the environment is in place, 1 when it must be installed."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from .key import environment_key, key_lines
from .overlay import make_overlay
from .remote import RemoteError, download
from .restore import Boot, restore
from .store import begin, finish


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m spot_trainer.environment")
    parser.add_argument("command", choices=("restore", "overlay", "store"))
    parser.add_argument("--app-dir", type=Path, required=True)
    parser.add_argument("--state-dir", type=Path)
    parser.add_argument("--wheel", type=Path, help="restore: the runtime's wheel")
    parser.add_argument("--image", default="", help="restore: the instance's image id")
    parser.add_argument("--python", default="", help="store: the job's Python")
    parser.add_argument("--log", type=Path, help="store: the bootstrap log, for the line said once stored")
    args = parser.parse_args(argv)
    if args.command == "overlay":
        make_overlay(args.app_dir / "venv")
        print(f"venv {args.app_dir / 'venv'} over {sys.executable}: what the setup command installs goes there")
        return 0
    if args.command == "store":
        line, plan = begin(args.app_dir, args.state_dir, python=args.python)
        print(line, flush=True)
        if plan is not None and os.fork() == 0:  # packs while user data goes on and the agent starts
            done = finish(args.app_dir, args.state_dir, plan, instance=os.environ.get("SPOT_INSTANCE_ID", ""))
            if args.log is not None:
                stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                with open(args.log, "a") as log:
                    log.write(f"{stamp} spot-trainer-userdata[env-store]: {done}\n")
            os._exit(0)
        return 0
    env = os.environ
    code = None
    if env.get("SPOT_CODE_URI"):  # a requirements file the setup names is in it
        code = args.state_dir / "code.zip"
        try:
            download(env["SPOT_CODE_URI"], code)
        except RemoteError as error:
            print(f"environment cache: the job's code cannot be read ({error}); installing")
            return 1
    key = environment_key(key_lines(
        image=args.image, arch=platform.machine(), runtime_wheel=args.wheel, torch=env.get("SPOT_TORCH_SPEC", ""),
        setup=env.get("SPOT_SETUP_COMMAND", ""), code=code, userdata_version=env["SPOT_USERDATA_VERSION"]))
    if (args.app_dir / "env-key").is_file() and (args.app_dir / "env-key").read_text().strip() == key:
        print(f"environment {key[:12]} already on this instance")
        return 0
    prefix = f"s3://{env['SPOT_BUCKET']}/{env['SPOT_JOB']}/env-cache/{key}"
    restored, line = restore(Boot(args.app_dir, args.state_dir, prefix, key))
    print(line)
    return 0 if restored else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
