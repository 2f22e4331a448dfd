"""The built-in training program: the resumable loop, models, data, the training state and how exact
a resumed run is (determinism.py, ordered_reduce.py, platform_record.py).

It runs as the agent's child process (`python -m spot_trainer train`) and talks to the agent only
through the checkpoint directory contract, so it imports `spot_trainer.storage.files.local` for its
checkpoints and knows nothing of `spot_trainer.agent`. This is the room that imports torch; its command line
is the annex's `builtin_arguments.py` (standard library only), which the stack and the agent read too.
"""
