"""The job's built environment (its venv and the runtime), kept in the job's bucket so a replacement
restores it instead of installing it again.

User data runs this room before the runtime is installed, with the image's own `python3` (3.9 on Amazon
Linux 2023) and the runtime's wheel on PYTHONPATH: it imports the standard library only, no other room
of the runtime and no boto3, and talks to S3 through the aws CLI every image has. Nothing imports it.
"""
