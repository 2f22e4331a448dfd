"""What the two training scripts of benchmarks/rng_per_rank.py share: their arguments and what a run
leaves in its folder for the comparison."""

import argparse
import json
from pathlib import Path

import torch


def run_arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--max-steps", type=int, required=True)
    parser.add_argument("--save-steps", type=int, required=True)
    parser.add_argument("--resume-from", default=None)
    return parser


def write_run(run_dir: Path, rank: int, records: list[dict], metrics: dict[str, float],
              weights: dict[str, torch.Tensor]) -> None:
    """records_<rank>.json from every rank; metrics.json and final.pt from rank 0. Then every rank
    closes the process group together: a rank left to exit with it open may abort in gloo's threads."""
    (run_dir / f"records_{rank}.json").write_text(json.dumps(records))
    if rank == 0:
        (run_dir / "metrics.json").write_text(json.dumps(metrics))
        torch.save({name: tensor.detach().clone() for name, tensor in weights.items()}, run_dir / "final.pt")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
