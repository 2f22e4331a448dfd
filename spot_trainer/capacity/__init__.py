"""Which capacity market a job runs on: spot while it keeps its deadline, on-demand when it would not.

`policy` is pure and stdlib-only: the agent on the training node and the P8 benchmark decide with the
same functions. `market` reads and sets the job's own group's on-demand share. `watch` is the stack's
Lambda, inlined into the template, so it imports only the standard library and boto3 and repeats the
policy's line in a few lines of its own. Nothing here imports the agent, storage or the program, but
`latest.json`'s record (storage's `s3.latest_record`, standard library only), which the regions controller reads.
"""
