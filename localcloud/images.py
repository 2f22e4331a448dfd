"""What the images the jobs name really carry, so a local instance boots with what AWS would give it:
which Python is on the PATH, whether a PyTorch env is there, which package manager can add more.

Each fact has its source. A local instance sees the image's commands through a bin folder of its own
(localcloud/image_bin.py): this machine's /usr/bin less every Python the image does not have.
"""

from __future__ import annotations

from dataclasses import dataclass

from stacks.job.spec import DEFAULT_AMI


@dataclass(frozen=True)
class ImageFacts:
    name: str
    python3: str  # the version of the image's own `python3`
    package_manager: str  # the command that installs python3.11 on it: "dnf" or "apt-get"
    pytorch_env: str | None  # the interpreter of its PyTorch env, when it has one
    source: str


AMAZON_LINUX_2023 = ImageFacts(
    name="Amazon Linux 2023", python3="3.9", package_manager="dnf", pytorch_env=None,
    # "Python 3.9 is the default system Python in AL2023"; python3.11, 3.12, 3.13 are optional packages.
    source="https://docs.aws.amazon.com/linux/al2023/ug/python.html",
)
BASE_DLAMI_UBUNTU_2204 = ImageFacts(
    name="Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)", python3="3.10", package_manager="apt-get",
    pytorch_env=None,  # a base DLAMI: drivers and CUDA, no framework; python3.11 is in Ubuntu 22.04's universe
    source="https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html",
)
PYTORCH_DLAMI_UBUNTU_2404 = ImageFacts(
    name="Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.12 (Ubuntu 24.04)", python3="3.12",
    package_manager="apt-get", pytorch_env="/opt/pytorch/bin/python",  # its python_location, torch 2.12 in it
    # The env's own Python version is not in the release notes: user data checks it (>= 3.11) at boot.
    source="https://docs.amazonaws.cn/dlami/latest/devguide/aws-deep-learning-ami-gpupt212oss-ul2404-2026-08-24.html"
           " and, for python3 3.12.3, https://packages.ubuntu.com/en/noble/python3",
)
BASE_DLAMI = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
IMAGES = {
    "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64": AMAZON_LINUX_2023,
    BASE_DLAMI: BASE_DLAMI_UBUNTU_2204,
    DEFAULT_AMI: PYTORCH_DLAMI_UBUNTU_2404,
}


def facts_of(image_parameter: str) -> ImageFacts:
    """The facts of an image the jobs name; an image not in the table is refused, not guessed."""
    if image_parameter not in IMAGES:
        raise KeyError(f"no image facts for {image_parameter}: add them to localcloud/images.py with their source")
    return IMAGES[image_parameter]
