"""Sharded FSDP checkpoints of a user's unmodified script on one CUDA GPU: HF Trainer with
`fsdp="full_shard"` and SHARDED_STATE_DICT (`checkpoint-<N>/` with the DCP folders `pytorch_model_fsdp_0/`
and `optimizer_0/`), and Lightning's `FSDPStrategy(state_dict_type="sharded")` (`epoch=0-step=<N>.ckpt/`
with `.distcp`, `.metadata` and `meta.pt`). The runtime's checkpoint layouts, which the uploader and the
restore ask, judge the newest save whole and read the framework's step from it, and judge it not whole
once a shard, a `.metadata` or the file the framework writes last is missing or cut short; the framework
then resumes at that step from it.

Skipped without CUDA (CI has none); `make gpu-check` runs it on a bare GPU machine (no boto3: only the
layouts are imported). SPOT_SHARDED_CHECK_ON_CPU=1 runs it here on the CPU, through a shim that lifts the
frameworks' refusal of FSDP without a GPU (accelerate applies the FSDP plugin only to GPU-like devices,
Lightning's FSDPStrategy asks for CUDA, FSDP1 for an accelerator): the saves, the judgment and the resume
are the same code, on gloo instead of NCCL.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from spot_trainer.storage.saves import layouts, shards
from spot_trainer.storage.saves.layout_kinds import Classified, Layout

ON_CPU = os.environ.get("SPOT_SHARDED_CHECK_ON_CPU") == "1"
pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() or ON_CPU), reason="needs a CUDA device")

SCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "plain_scripts"
DEVICE = "cpu" if ON_CPU else "cuda"
STEPS, SAVE_EVERY, MORE_STEPS = 12, 4, 16

# Runs the script named next, in this process, after lifting the CPU refusals (the CPU check only).
CPU_SHIM = '''
import runpy, sys
import torch
if sys.argv[1] == "hf":
    import accelerate.state as state
    from accelerate.utils import DistributedType
    original = state.AcceleratorState.__init__
    def init(self, *args, fsdp_plugin=None, **kwargs):
        original(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
        if fsdp_plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
            self.distributed_type, self.fsdp_plugin = DistributedType.FSDP, fsdp_plugin
    state.AcceleratorState.__init__ = init
else:
    from lightning.pytorch.trainer.connectors import accelerator_connector
    from torch.distributed.fsdp import _common_utils, _init_utils, fully_sharded_data_parallel
    accelerator_connector._AcceleratorConnector._check_strategy_and_fallback = lambda self: None
    def device_handle(state, module, ignored_params, device_id):
        state._device_handle = _common_utils._FSDPDeviceHandle(torch.device("cpu"))
        return state
    _init_utils._init_device_handle = fully_sharded_data_parallel._init_device_handle = device_handle
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


@dataclass(frozen=True)
class Case:
    framework: str  # its script is plain_scripts/<framework>_fsdp_one_gpu.py, its lines say "<framework>: "
    torchrun: bool  # launched by torchrun, else by python (Lightning starts its own process group)
    folder_flag: str  # the script's flag for the folder it saves into
    name: Callable[[int], str]  # the framework's name of the save of a step
    layout: Layout
    files: frozenset[str]  # what a save of one rank holds at the least
    damages: dict[str, str]  # "[cut-]<what>": the file removed (or cut to half) from the newest save
    resume: Callable[[Path], list[str]]  # the script's flags to resume, given the save the runtime judged newest


CASES = [
    Case("hf", True, "--output_dir", lambda step: f"checkpoint-{step}", Layout.HF,
         frozenset({"pytorch_model_fsdp_0/.metadata", "pytorch_model_fsdp_0/__0_0.distcp", "optimizer_0/.metadata",
                    "optimizer_0/__0_0.distcp", layouts.HF_STATE_FILE}),
         {"shard": "pytorch_model_fsdp_0/__0_0.distcp", "cut-shard": "pytorch_model_fsdp_0/__0_0.distcp",
          "optimizer-shard": "optimizer_0/__0_0.distcp", "cut-optimizer-shard": "optimizer_0/__0_0.distcp",
          "metadata": "pytorch_model_fsdp_0/.metadata", "cut-metadata": "pytorch_model_fsdp_0/.metadata",
          "optimizer-metadata": "optimizer_0/.metadata", "trainer-state": layouts.HF_STATE_FILE,
          "cut-trainer-state": layouts.HF_STATE_FILE},
         lambda newest: ["--resume"]),
    Case("lightning", False, "--dirpath", lambda step: f"epoch=0-step={step}.ckpt", Layout.LIGHTNING,
         frozenset({".metadata", "__0_0.distcp", layouts.LIGHTNING_SHARDED_META}),
         {"shard": "__0_0.distcp", "cut-shard": "__0_0.distcp", "metadata": ".metadata", "cut-metadata": ".metadata",
          "meta": layouts.LIGHTNING_SHARDED_META, "cut-meta": layouts.LIGHTNING_SHARDED_META},
         lambda newest: ["--ckpt_path", str(newest)]),
]


def run(tmp_path: Path, case: Case, folder: Path, steps: int, more: list[str]) -> dict[str, str]:
    """Run the user's script to its end and return its own lines (said)."""
    framework = case.framework
    script = [str(SCRIPTS / f"{framework}_fsdp_one_gpu.py"), case.folder_flag, str(folder), "--max_steps", str(steps),
              "--save_steps", str(SAVE_EVERY), *more]
    if ON_CPU:
        shim = tmp_path / "cpu_shim.py"
        shim.write_text(CPU_SHIM)
        script = [str(shim), framework, *script]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"] \
        if case.torchrun else [sys.executable]
    env = {key: value for key, value in os.environ.items() if key not in ("CHECKPOINT_DIR", "RESUME_FROM")}
    env |= {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([*launcher, *script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{framework} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return said(done.stdout, framework)


def said(output: str, framework: str) -> dict[str, str]:
    """The script's own lines: {'start': '12 on cuda', 'first': '13', ...}."""
    prefix = f"{framework}: "
    found = {}
    for line in output.splitlines():
        if line.startswith(prefix):
            what, _, value = line.removeprefix(prefix).partition(" step ")
            found[what.removesuffix(" at")] = value
    return found


def judged_newest(folder: Path) -> layouts.Checkpoint | None:
    """The newest whole step as the uploader sees it while the writer may still run, and as the restore
    reads this disk (strictly, the writer gone): both must agree."""
    online = layouts.newest_complete(folder)
    assert layouts.newest_complete(folder, writer_done=True, strict=True) == online
    return online


def assert_damage_is_seen(folder: Path, newest: Path, damages: dict[str, str], tmp_path: Path) -> None:
    """Each damage done to a copy of the folder makes its newest save not whole: the step before it wins."""
    for name, relative in damages.items():
        copy = tmp_path / f"damaged-{name}"
        shutil.copytree(folder, copy, symlinks=True)
        target = copy / newest.name / relative
        assert target.is_file(), f"{relative} not in {sorted(p.name for p in (copy / newest.name).rglob('*'))}"
        if name.startswith("cut"):
            target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
        else:
            target.unlink()
        found = judged_newest(copy)
        assert found is not None and found.step == STEPS - SAVE_EVERY, f"{name}: judged {found}"


@pytest.mark.parametrize("case", CASES, ids=[case.framework for case in CASES])
def test_a_sharded_fsdp_save_is_whole_at_the_frameworks_step_and_the_framework_resumes_from_it(
        case: Case, tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    first = run(tmp_path, case, folder, STEPS, [])
    assert first["start"] == f"0 on {DEVICE}" and first["finished"] == str(STEPS), first

    newest = folder / case.name(STEPS)
    held = {str(path.relative_to(newest)) for path in newest.rglob("*") if path.is_file()}
    assert shards.is_sharded(newest) and case.files <= held, f"not a sharded save: {sorted(held)}"
    for step in range(SAVE_EVERY, STEPS + 1, SAVE_EVERY):
        assert layouts.classify(folder / case.name(step)) == Classified(case.layout, step)
    assert judged_newest(folder) == layouts.Checkpoint(STEPS, newest, case.layout)
    assert_damage_is_seen(folder, newest, case.damages, tmp_path)

    resumed = run(tmp_path, case, folder, MORE_STEPS, case.resume(newest))
    assert resumed["start"] == f"{STEPS} on {DEVICE}" and resumed["first"] == str(STEPS + 1), resumed
    assert resumed["finished"] == str(MORE_STEPS), resumed
    assert judged_newest(folder) == layouts.Checkpoint(MORE_STEPS, folder / case.name(MORE_STEPS), case.layout)
