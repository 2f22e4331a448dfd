"""Python runs this at start-up in every process of a job's own command: the agent puts this folder
first on the command's PYTHONPATH. It installs `spot_trainer.integrations.auto_resume` (a script that
never asks to resume still resumes) and then runs the sitecustomize it stands in front of, if the
environment has one (a distribution's), so nothing the environment set up is lost. It never stops
the user's program: a failure is one line on stderr."""

import importlib
import importlib.machinery
import importlib.util
import os
import sys


def _install_auto_resume() -> None:
    try:
        importlib.import_module("spot_trainer.integrations.auto_resume").install()
    except Exception as error:
        print(f"spot-trainer: no automatic resume in this process: {error}", file=sys.stderr, flush=True)


def _run_the_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.realpath(__file__))  # real paths: this folder may be on the path twice
    rest = [entry for entry in sys.path if os.path.realpath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    except Exception as error:  # as site.py itself reports a failing sitecustomize
        print(f"Error in sitecustomize ({spec.origin}): {error}", file=sys.stderr, flush=True)


_install_auto_resume()
_run_the_next_sitecustomize()
