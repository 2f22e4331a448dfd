"""`python -m spot_trainer.distributed.launch <torchrun arguments>`: torchrun, with the `s3`
rendezvous registered in-process, so it works whether or not the package's entry points are
installed (a wheel on an instance, or the runtime on PYTHONPATH in the local spot cloud)."""

from __future__ import annotations

import os
import sys

from torch.distributed import run as torchrun
from torch.distributed.elastic.agent.server.api import WorkerGroup
from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.rendezvous import api as rendezvous_api

from .handler import LeavingRendezvousHandler, leave_after_a_signal, register
from .master_port import master_port

PEER_DEAD_SHUTDOWN_SECONDS = 3  # ranks blocked on a dead peer cannot save: no use waiting for them


def stop_workers_for_a_new_round(agent: LocalElasticAgent, worker_group: WorkerGroup) -> None:
    """torch stops the workers for a new round with a fixed 30 s before SIGKILL, whatever its
    shutdown timeout says. With a peer of the round dead (no heartbeat, no leave) their collectives
    cannot complete and no save can succeed, so they get a few seconds; otherwise the configured
    shutdown timeout (the agent's grace period), in which they finish a save in progress (rank 0's
    files after a peer that saved with it left) or, for a joiner's round, save the step they are at."""
    handler = worker_group.spec.rdzv_handler
    quick = isinstance(handler, LeavingRendezvousHandler) and handler.peer_dead
    agent._shutdown(timeout=PEER_DEAD_SHUTDOWN_SECONDS if quick else agent._shutdown_timeout)


# The name torch's rendezvous module calls get_free_port by, newest first (2.5 imported it as _get_free_port).
FREE_PORT_NAMES = ("get_free_port", "_get_free_port")


def master_ports_below_the_ephemeral_range() -> bool:
    """Rank 0's node picks each round's MASTER_PORT in RendezvousStoreInfo.build with torch's
    get_free_port: from now on, a free port no outgoing connection can take (master_port.py). False
    where this torch picks it some other way (an older one): its own pick stands."""
    name = next((name for name in FREE_PORT_NAMES if callable(getattr(rendezvous_api, name, None))), None)
    if name is None:
        return False
    torch_pick = getattr(rendezvous_api, name)
    setattr(rendezvous_api, name, lambda: master_port(torch_pick))
    return True


def main(argv: list[str] | None = None) -> None:
    # torch shares one TCP store across rounds, hosted by whoever was rank 0 when it began, and skips
    # publishing its address again while that node lives: a node that joins later, or a new rank 0,
    # then waits for an address nobody writes. Each round publishes its own address instead.
    os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    LocalElasticAgent._stop_workers = stop_workers_for_a_new_round  # type: ignore[method-assign]
    master_ports_below_the_ephemeral_range()
    register()
    try:
        torchrun.main(argv if argv is not None else sys.argv[1:])
    except ChildFailedError as error:  # a round ended: the agent decides what follows, from the exit code
        rank, failure = error.get_first_failure()
        sys.exit(f"torchrun: rank {rank} exited with code {failure.exitcode}; this round is over")
    except SignalException as error:  # the agent's stop signal: the workers have saved and exited
        leave_after_a_signal()
        sys.exit(f"torchrun: stopped by {error.sigval.name}")


if __name__ == "__main__":
    main()
