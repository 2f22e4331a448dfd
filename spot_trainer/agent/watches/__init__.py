"""What the agent watches while the command trains, each a small loop with its own bound: the spot notice
and its deadline, a hung command, the saves (and a command that saves elsewhere or started over), the
budget and the deadline.

It may import the `instance` and `records` wings, `spot_trainer.storage`, `spot_trainer.capacity`, `spot_trainer.costs`
and the shelf.
"""
