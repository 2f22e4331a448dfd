"""CDK constructs and the stack that turn a job file into one CloudFormation stack.

Wings, each importing only the wings before it: `job` (the job file read and checked into a JobSpec),
`instance` (what goes onto the instance), `console` (the console's parameters and rules), `resources`
(the AWS resources); `synth` (what a synth says beside the template) reads `job` only. At the top, and
imported by no wing: `training_stack.py` composes the wings into the job's stack, `job_file.py` turns a
job file into a checked JobSpec (its fields, then what its user data version can carry), and the
commands run as `python -m stacks.<name>` (`preflight`, `console_template`, `settings_reference`).
"""
