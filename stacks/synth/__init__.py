"""What a synth says to the person beside the template: the Node.js line, the closing summary, and the
warnings on the grace period and the template's size.

It may import `stacks.job` only.
"""
