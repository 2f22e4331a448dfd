"""The console parameters' AllowedPattern texts: CloudFormation's regular expressions for what a value
may be, each the console's form of the rule the job file and the agent check in words.

Torch-free and import-light: the settings table (settings.py) names them, and stacks/ builds the
template's parameters from that table.
"""

from __future__ import annotations

from .aws_names import RESERVED_BUCKET_PREFIXES, RESERVED_BUCKET_SUFFIXES

# Empty (the on-demand price caps it) or a plain decimal above 0 and below 1000 USD
# (MAX_PRICE_USD in stacks/job/capacity_fields.py).
PRICE = r"^$|^(?=[^1-9]*[1-9])[0-9]{0,3}(\.[0-9]+)?$"
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
# Empty (no SSH) or an IPv4 range narrower than the whole internet (/0 refused, as in the job file).
CIDR = rf"^$|^({_OCTET}\.){{3}}{_OCTET}/([1-9]|[12][0-9]|3[0-2])$"
# S3's rules (aws_names.py): 3-63 of [a-z0-9.-], no "..", not an IP address, no reserved affix.
BUCKET_RULE = "empty, or a bucket name S3 accepts (3-63 of a-z 0-9 . -)"
BUCKET = (r"^$|^(?!.*\.\.)(?![0-9]+(\.[0-9]+){3}$)"
          rf"(?!{'|'.join(RESERVED_BUCKET_PREFIXES)})(?!.*({'|'.join(RESERVED_BUCKET_SUFFIXES)})$)"
          r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# A key prefix ending in "/" (so "cifar/" never matches "cifar2/"), or empty for the whole bucket.
DATA_PREFIX = r"^$|^[^/\s][^\s]*/$"
# Values the agent reads from its environment file must be one line (user data refuses others at boot).
ONE_LINE = r"^[^\r\n]*$"
ONE_LINE_RULE = "one line"
# Empty (the wheel shipped with the stack), a wheel in S3, a URL, or a requirement pinned to one version.
PACKAGE = (r"^$|^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/\S+\.whl$|^(?!s3:)[a-z+]+://\S+$"
           r"|^[A-Za-z0-9][^\s/\\=<>!~,]*===?[A-Za-z0-9.+!_-]+$")
# Exactly "builtin", or a command that does not start with the word builtin (`builtin;` exits 0 at once).
COMMAND = r"^builtin$|^(?!builtin(?:[\s;&|#]|$))[^\r\n]*[^\s][^\r\n]*$"
ABSOLUTE_PATH = r"^/[^\s]*$"
NODES = r"^([0-9]|[1-5][0-9]|6[0-4])$"  # 0..MAX_NODES (64)
MIN_NODES = r"^([1-9]|[1-5][0-9]|6[0-4])$"  # 1..MAX_NODES: a round of zero nodes trains nothing
KEEP = r"^[1-9][0-9]{0,2}$"  # 1..MAX_KEEP_CHECKPOINTS (999)
VOLUME = r"^([89]|[1-9][0-9]{1,3}|1[0-5][0-9]{3}|16[0-2][0-9]{2}|163[0-7][0-9]|1638[0-4])$"  # 8..16384
DAYS = r"^[1-9][0-9]*$"
# The job file's forms (capacity/policy.py reads them): whole numbers with units d h m s, not zero.
_DURATION = r"(?=[0-9dhms]*[1-9])([0-9]+[dhms])+"
_UTC_TIMESTAMP = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?Z"
DEADLINE = rf"^$|^{_UTC_TIMESTAMP}$|^{_DURATION}$"
DURATION = rf"^{_DURATION}$"
OPTIONAL_DURATION = rf"^$|^{_DURATION}$"
DURATION_RULE = "a duration like 36h, 90m or 1d12h (units d h m s)"
EMAIL = r"^$|^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$"
STALL = r"^([0-9]|[1-9][0-9]|[1-9][0-9]{2}|1[0-3][0-9]{2}|14[0-3][0-9]|1440)$"  # 0..MAX_STALL_MINUTES
TOTAL_STEPS = r"^$|^[1-9][0-9]{0,14}$"
BUDGET = r"^$|^(?=[0-9.]*[1-9])[0-9]{1,9}(\.[0-9]{1,6})?$"  # schedule_fields.budget_text's form
