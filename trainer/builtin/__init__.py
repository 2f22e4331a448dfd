"""The built-in training program: the resumable loop, models, data, the training state and how exact
a resumed run is (determinism.py, ordered_reduce.py, platform_record.py).

It runs as the agent's child process (`python -m spot_trainer train`) and talks to the agent only
through the checkpoint directory contract, so it imports `trainer.storage.local` for its
checkpoints and knows nothing of `trainer.agent`. This is the room that imports torch, except
`arguments.py`, its command line: standard library only, so the stack checks a job's train_args with it.
"""
