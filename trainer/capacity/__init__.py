"""Which capacity market a job runs on: spot while it keeps its deadline, on-demand when it would not.

`policy` is pure and stdlib-only: the agent on the training node, the capacity watch that acts while
nothing runs, and the P8 benchmark all decide with the same functions.
"""
