"""Where the suite's CPU goes: CPU seconds (user + sys) per test module and per kind of process.

Load it with `-p tests.support.cpu_profile` and name a folder in CPU_PROFILE_DIR; each pytest process
(each xdist worker) writes one JSON file there. Then `python -m tests.support.cpu_profile DIR` prints
the top modules and kinds of process.

A module's CPU is the change, from before its first test to after its last (module fixtures' teardown
included), of: this process's own time, its waited children's, and every live descendant's own time and
its waited children's. A descendant that dies while its parent lives moves into the parent's figure; one
that is orphaned (its parent gone before it) leaves the tree and is not counted. A session fixture's
set-up is charged to the first module that asks for it.

Per kind of process, a thread reads each descendant's own time every SAMPLE_SECONDS: a process is
counted at its last reading, so one shorter than that is missed, and one's last moments are.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SAMPLE_SECONDS = 0.25
TORCH_LIBRARY = b"libtorch_cpu"  # mapped once a process has imported torch: each such import costs seconds
TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU seconds, waited children's CPU seconds) of a live process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    # After the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15), counted from state as 1.
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS, (int(fields[13]) + int(fields[14])) / TICKS


def _descendants(root: int) -> dict[int, tuple[float, float]]:
    parents: dict[int, int] = {}
    times: dict[int, tuple[float, float]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found is not None:
                parents[int(entry.name)] = found[0]
                times[int(entry.name)] = found[1:]
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    out: dict[int, tuple[float, float]] = {}
    stack = list(children[root])
    while stack:
        pid = stack.pop()
        out[pid] = times[pid]
        stack.extend(children[pid])
    return out


def kind_of(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [a.decode(errors="replace") for a in argv if a]
    if not words:
        return "?"
    exe = Path(words[0]).name
    line = " ".join(words)
    if exe.startswith("node"):
        if "jsii-runtime" in line or "lib/program.js" in line:
            return "node: jsii runtime (in-process CDK)"
        if re.search(r"\bcdk\b", line):
            return "node: cdk CLI"
        return "node: other"
    if exe.startswith("python") or exe in {"pytest", "torchrun"}:
        if "moto" in line:
            return "python: moto server"
        if "-m" in words:
            at = words.index("-m") + 1
            module = words[at] if at < len(words) else "?"
            # The runtime's own processes by entry: the agent, the built-in trainer, a job command by name.
            if module == "spot_trainer" and at + 1 < len(words):
                return f"python -m spot_trainer {words[at + 1]}"
            return f"python -m {module}"
        if "-c" in words:
            return "python -c"
        script = next((w for w in words[1:] if not w.startswith("-")), "")
        return f"python {Path(script).name}" if script else "python"
    if exe in {"bash", "sh"}:
        script = next((w for w in words[1:] if not w.startswith("-")), "")
        return f"{exe} {Path(script).name}" if script and "/" in script else exe
    return exe


def no_figures() -> dict[str, float]:
    return {"seconds": 0.0, "processes": 0, "torch": 0}


def has_torch(pid: int) -> bool:
    try:
        return TORCH_LIBRARY in Path(f"/proc/{pid}/maps").read_bytes()
    except OSError:
        return False


class CpuProfile:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.modules: dict[str, float] = defaultdict(float)
        self.kinds: dict[int, tuple[str, float]] = {}
        # pid -> the kind it had when torch was found mapped: a fork of a worker shows the worker's libtorch
        # until it execs another program, so the mark counts only if the pid ends as that kind.
        self.torch_kinds: dict[int, str] = {}
        self.current: tuple[str, float] | None = None
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._sample, daemon=True, name="cpu-profile")
        self.thread.start()

    def total(self) -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        waited = resource.getrusage(resource.RUSAGE_CHILDREN)
        live = sum(a + b for a, b in _descendants(os.getpid()).values())
        return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime + live

    def _sample(self) -> None:
        rounds = 0
        while not self.stop.wait(SAMPLE_SECONDS):
            rounds += 1
            for pid, (own, _) in _descendants(os.getpid()).items():
                # Read again each time: a forked child shows its parent's command line until it execs.
                kind = kind_of(pid)
                with self.lock:
                    if kind == "?" and pid in self.kinds:
                        kind = self.kinds[pid][0]
                    self.kinds[pid] = (kind, own)
                    if rounds % 4 == 0 and self.torch_kinds.get(pid) != kind and has_torch(pid):
                        self.torch_kinds[pid] = kind

    def enter(self, module: str) -> None:
        if self.current is not None and self.current[0] == module:
            return
        self.leave()
        self.current = (module, self.total())

    def leave(self) -> None:
        if self.current is not None:
            module, start = self.current
            self.modules[module] += self.total() - start
            self.current = None

    def write(self) -> None:
        self.leave()
        self.stop.set()
        self.thread.join()
        own = resource.getrusage(resource.RUSAGE_SELF)
        by_kind: dict[str, dict[str, float]] = defaultdict(no_figures)
        with self.lock:
            for pid, (kind, seconds) in self.kinds.items():
                by_kind[kind]["seconds"] += seconds
                by_kind[kind]["processes"] += 1
                by_kind[kind]["torch"] += self.torch_kinds.get(pid) == kind
        by_kind["pytest worker itself"] = {"seconds": own.ru_utime + own.ru_stime, "processes": 1,
                                           "torch": int("torch" in sys.modules)}
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / f"{worker}-{os.getpid()}.json").write_text(
            json.dumps({"modules": self.modules, "kinds": by_kind}, indent=1))


_profile: CpuProfile | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _profile
    out = os.environ.get("CPU_PROFILE_DIR")
    # Under xdist the controller runs no test: only the workers profile.
    if out and (hasattr(config, "workerinput") or not config.getoption("numprocesses", None)):
        _profile = CpuProfile(Path(out))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if _profile is not None:
        _profile.enter(item.nodeid.split("::")[0])
    yield


def pytest_unconfigure(config: pytest.Config) -> None:
    if _profile is not None:
        _profile.write()


def merge(folder: Path) -> dict[str, Any]:
    modules: dict[str, float] = defaultdict(float)
    kinds: dict[str, dict[str, float]] = defaultdict(no_figures)
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text())
        for name, seconds in data["modules"].items():
            modules[name] += seconds
        for name, figures in data["kinds"].items():
            kinds[name]["seconds"] += figures["seconds"]
            kinds[name]["processes"] += figures["processes"]
            kinds[name]["torch"] += figures.get("torch", 0)
    return {"modules": modules, "kinds": kinds}


def main(argv: list[str]) -> int:
    merged = merge(Path(argv[0]))
    top = int(argv[1]) if len(argv) > 1 else 15
    total = sum(merged["modules"].values())
    print("| module | CPU s | share |\n|---|---:|---:|")
    for name, seconds in sorted(merged["modules"].items(), key=lambda kv: -kv[1])[:top]:
        print(f"| {name} | {seconds:.1f} | {100 * seconds / total:.0f}% |")
    print(f"| all {len(merged['modules'])} modules | {total:.1f} | |\n")
    print("| kind of process | CPU s | processes | of them with torch |\n|---|---:|---:|---:|")
    for name, figures in sorted(merged["kinds"].items(), key=lambda kv: -kv[1]["seconds"])[:top]:
        print(f"| {name} | {figures['seconds']:.1f} | {int(figures['processes'])} | {int(figures['torch'])} |")
    kinds = merged["kinds"].values()
    print(f"\n{int(sum(k['torch'] for k in kinds))} of {int(sum(k['processes'] for k in kinds))} processes "
          "imported torch")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
