"""`python -m spot_trainer.distributed.launch <torchrun arguments>`: torchrun, with the `s3`
rendezvous registered in-process, so it works whether or not the package's entry points are
installed (a wheel on an instance, or the runtime on PYTHONPATH in the local spot cloud)."""

from __future__ import annotations

import sys

from torch.distributed import run as torchrun

from .handler import register


def main(argv: list[str] | None = None) -> None:
    register()
    torchrun.main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
