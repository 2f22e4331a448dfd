"""The job file, read and checked: a TOML table becomes a typed `JobSpec`, every problem one line
naming its field.

The spec's sections and defaults (`spec`), the field-by-field checks (`fields`), those of the schedule
and notifications, the checkpoint folder, a command's own launcher and the instance types, and what an
unknown key most likely means. It imports no other wing: every wing reads the `JobSpec` it makes. Of
user data it knows the version's name only; what a version can carry is `stacks.instance`'s to say.
"""
