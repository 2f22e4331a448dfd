"""One-line callbacks for the training frameworks users bring: Hugging Face Trainer (`hf`),
Lightning (`lightning`) and, for a loop of the user's own on Accelerate, a call after each step
(`accelerate`).

Added to a script's trainer, a callback turns the agent's stop signal into a checkpoint at the
next step boundary, saved where and how the framework saves its own, and then ends the process,
so an announced interruption costs no completed step. It prints the progress lines of
`spot_trainer.progress` so the agent and the report see the framework's steps. Like the built-in
program, it talks to the agent only through the signal, the environment and the checkpoint
directory: it imports `spot_trainer.progress`, never `spot_trainer.agent` or `spot_trainer.builtin`, and imports its
framework only when the user's script does.

`auto_resume` goes further and needs no line at all: loaded into every Python process of a command
of the user's own by `python-startup/sitecustomize.py` (the agent puts that folder first on the
command's PYTHONPATH), it makes the first `train()`/`fit()` that names no checkpoint resume from the
newest in CHECKPOINT_DIR, and a Lightning ModelCheckpoint without a dirpath save there. It patches a
framework only once the script imports it (`post_import`).

`missing_reads`, installed the same way in every process of such a command, has a rank fetch from S3 what
its node left out of a step restored in part before DCP reads it, so no rank loads a hole as zeros.

`checkpoint_names` holds the names of a framework's saves that the checkpoint layouts must know too
(`last.ckpt`), and `byte_ranges` the merging of a file's byte ranges that a node's restore and a rank's reads
share; they import nothing, and they are the modules of this room the storage side reads (storage/saves/).
"""
