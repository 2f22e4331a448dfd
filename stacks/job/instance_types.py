"""What the app knows about EC2 instance types: valid names, known families, on-demand prices.

cfn-lint does not check instance types inside a mixed instances policy, so the job spec checks them.
A type must be of a known family and exist in EC2 (botocore's model of the EC2 API lists every type).
Prices are on-demand USD/hour in us-east-1 (Linux), used by the local cost report; a type missing
here is still accepted.
"""

from __future__ import annotations

import functools
import re

from botocore.loaders import Loader

# family.size, e.g. g5.xlarge, p4d.24xlarge, c6in.metal-48xl
INSTANCE_TYPE_PATTERN = re.compile(
    r"^(?P<family>[a-z]+[0-9][a-z0-9-]*)\.(?P<size>nano|micro|small|medium|large|[0-9]*xlarge|metal(-[0-9]+xl)?)$"
)

KNOWN_FAMILIES = frozenset(
    """
    g4dn g4ad g5 g5g g6 g6e g6f gr6 gr6f g7e p3 p3dn p4d p4de p5 p5e p5en p6-b200 trn1 trn1n trn2 inf1 inf2 dl1 dl2q
    c5 c5a c5d c5n c6a c6g c6gd c6gn c6i c6id c6in c7a c7g c7gd c7gn c7i c8g
    m5 m5a m5d m5n m6a m6g m6gd m6i m6id m6in m7a m7g m7gd m7i m8g
    r5 r5a r5d r5n r6a r6g r6gd r6i r6id r6in r7a r7g r7gd r7i r8g
    t3 t3a t4g x2idn x2iedn z1d hpc7g i4i i7ie
    """.split()
)

ON_DEMAND_USD_PER_HOUR: dict[str, float] = {
    "g4dn.xlarge": 0.526,
    "g4dn.2xlarge": 0.752,
    "g4dn.12xlarge": 3.912,
    "g5.xlarge": 1.006,
    "g5.2xlarge": 1.212,
    "g5.12xlarge": 5.672,
    "g6.xlarge": 0.8048,
    "g6.2xlarge": 0.9776,
    "g6e.xlarge": 1.861,
    "p3.2xlarge": 3.06,
    "p4d.24xlarge": 32.7726,
    "p5.48xlarge": 98.32,
    "c5.xlarge": 0.17,
    "c6i.xlarge": 0.17,
    "c7i.xlarge": 0.1785,
    "m5.xlarge": 0.192,
    "m6i.xlarge": 0.192,
    "m7i.xlarge": 0.2016,
    "t3.medium": 0.0416,
}


# series, generation, attributes: c7gn → ("c", "7", "gn"); Graviton (arm64) types carry a "g" attribute.
_FAMILY_PARTS = re.compile(r"^(?P<series>[a-z]+)(?P<generation>[0-9]+)(?P<attributes>[a-z]*)")


def architecture(name: str) -> str:
    """"arm64" for Graviton types (g5g, c7gn, t4g, hpc7g), else "x86_64"; `name` must be valid."""
    parts = _FAMILY_PARTS.match(name)
    return "arm64" if parts and "g" in parts["attributes"] else "x86_64"


@functools.cache
def ec2_instance_types() -> tuple[str, ...]:
    """Every type EC2's API takes: the `InstanceType` enum of the installed botocore's EC2 model (the pinned
    boto3 in requirements.txt; each botocore release adds the types AWS has launched by then)."""
    model = Loader().load_service_model("ec2", "service-2")
    return tuple(model["shapes"]["InstanceType"]["enum"])


def sizes_of(family: str) -> list[str]:
    """The family's sizes, smallest first (the order the EC2 model lists them in)."""
    return [t.split(".", 1)[1] for t in ec2_instance_types() if t.split(".", 1)[0] == family]


def instance_type_problem(name: str) -> str | None:
    """Why `name` is not a usable instance type, or None when it is."""
    match = INSTANCE_TYPE_PATTERN.match(name)
    if not match:
        return f"{name!r} is not an instance type name (expected family.size, e.g. g5.xlarge)"
    if match["family"] not in KNOWN_FAMILIES:
        return f"{name!r} has unknown instance family {match['family']!r}"
    if name not in ec2_instance_types():  # g5.nano, g5.3xlarge, c7i.nano: a known family, a size it lacks
        return f"{name!r} does not exist: {match['family']} comes in {', '.join(sizes_of(match['family']))}"
    return None


MAX_INSTANCE_TYPES = 40  # overrides of one mixed instances policy


def check_instance_types(types: list[str]) -> str | None:
    if not types:
        return "needs at least one instance type"
    if len(types) > MAX_INSTANCE_TYPES:
        return f"lists {len(types)} types; a mixed instances policy takes at most {MAX_INSTANCE_TYPES}"
    if len(set(types)) != len(types):
        return "lists an instance type twice"
    if problem := next((p for p in map(instance_type_problem, types) if p), None):
        return problem
    first: dict[str, str] = {}
    for name in types:
        first.setdefault(architecture(name), name)
    if len(first) > 1:
        return (f"mixes x86_64 ({first['x86_64']}) and arm64 ({first['arm64']}) types: one image cannot boot "
                "both, so list types of one architecture")
    return None


def check_image_architecture(ami: str, types: tuple[str, ...]) -> str | None:
    """An SSM image path that names an architecture must match the instance types'."""
    wanted = architecture(types[0])
    other = "x86_64" if wanted == "arm64" else "arm64"
    if f"/{other}/" in ami or f"-{other}" in ami:
        return f"{ami!r} is an {other} image but the instance types are {wanted}"
    return None
