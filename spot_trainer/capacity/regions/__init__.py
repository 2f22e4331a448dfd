"""Where a job runs when it lists several regions: the controller's decision as typed values.

Pure and stdlib-only, so the home region's controller (a Lambda, inlined or packaged) and the region
benchmark decide with the same functions. `launch_failures` reads why a group's launch failed,
`placement_scores` keeps one cached Spot placement score per job, `observations` holds what the
controller sees of each region, and `moves` decides: stay, move, or hand over to the on-demand rules
of spot_trainer/capacity/policy.py. Nothing here calls AWS except through a client it is given.
"""
