"""The console's side of the template: the parameters a person fills in (AWS-specific types, defaults
from the job file, grouped and labelled), made by walking the settings table with what each takes from
the job, and the Rules that check one parameter against another.

It may import `stacks.job` and `stacks.instance` (what the job's user data version supports).
"""
