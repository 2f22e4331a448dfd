"""CDK constructs and the stack that turn a job file into one CloudFormation stack."""
