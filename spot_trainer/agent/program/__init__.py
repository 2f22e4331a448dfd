"""The user's training command as a process: its start with the job's environment and secrets, its
output read line by line, and its stop (the stop signal, the grace it is given, the kill).

It may import the `instance`, `records` and `watches` wings, `spot_trainer.storage` and the shelf.
"""
