"""What a job has cost: instance lifetimes priced at the spot prices in effect and at on-demand prices.

The instance records every agent keeps under `<job>/instances/` give each instance's type, AZ, market
and lifetime; a spot price source (EC2's price history, or a trace file for the local cloud) prices
the spot hours, a maintained table the on-demand ones; the job's events give the work redone after
interruptions. It imports the standard library, boto3 clients it is handed, and `spot_trainer.storage`
(to read the records); never `spot_trainer.agent`, the training program, or anything outside `spot_trainer/`.
"""
