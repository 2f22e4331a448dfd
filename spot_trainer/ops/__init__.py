"""A user's commands on a deployed job, by its name: status, logs, outputs, pause and resume.

They run on the user's machine with the usual AWS region and credentials, find the job's bucket,
group and log group in the outputs of its stack `SpotTrainer-<job>`, and say every problem in one line.

It may import the agent's records and status text (agent.records.status, agent.cli), storage and costs; never the
training program, torch or the rendezvous. matplotlib is imported only to draw (job_plot.py), so every
other command runs without it.
"""
