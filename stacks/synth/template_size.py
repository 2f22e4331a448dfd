"""The template as `cdk deploy` sends it to an account without the CDK bootstrap stack: YAML, inline in
the CreateStack call, whose TemplateBody takes at most 51,200 bytes. A larger one goes through the
bootstrap bucket (up to 1 MB), so a stack that ships an asset (the runtime, `run.workdir`) needs the
bootstrap anyway and is never held to it.
https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html

The CLI serializes with the npm `yaml` package (schema yaml-1.1, lineWidth 0): list items indented under
their key, multi-line strings as literal blocks. This dumper writes the same shape; tests hold its count
to the CLI's own output.
"""

from __future__ import annotations

from typing import Any

import yaml

INLINE_TEMPLATE_LIMIT = 51_200
# The estimate is within a few bytes of the CLI's count; warn a little early rather than a little late.
ESTIMATE_MARGIN = 0.01


class _CliYaml(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


_CliYaml.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def inline_template_bytes(template: dict[str, Any]) -> int:
    """Bytes of the YAML the CLI would send inline (within a few bytes of its own count)."""
    return len(yaml.dump(template, Dumper=_CliYaml, sort_keys=False, width=float("inf"), allow_unicode=True))


def too_large_warning(stack_name: str, template: dict[str, Any], has_assets: bool) -> str | None:
    """The one line a synth prints when the template cannot deploy without the bootstrap, else None."""
    if has_assets or (size := inline_template_bytes(template)) <= (1 - ESTIMATE_MARGIN) * INLINE_TEMPLATE_LIMIT:
        return None
    return (f"{stack_name}: the template is about {size:,} bytes as `cdk deploy` sends it without the CDK bootstrap "
            f"stack, over CloudFormation's {INLINE_TEMPLATE_LIMIT:,}: run `npx cdk bootstrap` once in this "
            "account and region (then up to 1 MB deploys), or list fewer instance types")
