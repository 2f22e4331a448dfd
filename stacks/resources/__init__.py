"""The AWS resources the stack composes, one construct per concern: the checkpoint bucket, the spot
fleet, the instance role, the log group, the network, the topic, the stall alarm, the dashboard, the
capacity watch, dataset and secret access, and the findings the design accepts with their reasons.

Each takes plain values and the console's parameters from the stack; it may import `stacks.job`,
`stacks.instance` and `stacks.console`, and never the stack that composes them.
"""
