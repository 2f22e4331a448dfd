"""The built-in models: a small ResNet for 32x32 images and a byte-level causal Transformer LM.

Both take a `width` so the same code trains in seconds on a CPU test and usefully on a GPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..builtin_arguments import MODEL_NAMES

BYTE_VOCAB = 256


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    """ResNet-style classifier for 3x32x32 images: a stem and three stages of basic blocks."""

    def __init__(self, width: int = 16, blocks_per_stage: int = 1, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        layers: list[nn.Module] = []
        channels = width
        for stage, out_channels in enumerate((width, width * 2, width * 4)):
            for block in range(blocks_per_stage):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(BasicBlock(channels, out_channels, stride))
                channels = out_channels
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(channels, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.stages(self.stem(images))
        result: torch.Tensor = self.head(F.adaptive_avg_pool2d(features, 1).flatten(1))
        return result


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, width // self.heads).unbind(2)
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            is_causal=True, dropout_p=self.dropout if self.training else 0.0,
        )
        result: torch.Tensor = self.proj(out.transpose(1, 2).reshape(batch, length, width))
        return result


class TransformerBlock(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attention = CausalSelfAttention(width, heads, dropout)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.dropout(self.attention(self.norm1(x)))
        result: torch.Tensor = x + self.dropout(self.mlp(self.norm2(x)))
        return result


class ByteLM(nn.Module):
    """GPT-style decoder over raw bytes (vocabulary 256), with learned positions and tied embeddings."""

    def __init__(self, width: int = 64, layers: int = 2, heads: int = 4, context: int = 64,
                 dropout: float = 0.1) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"--width {width} must be a multiple of the {heads} attention heads")
        self.embed = nn.Embedding(BYTE_VOCAB, width)
        nn.init.normal_(self.embed.weight, std=0.02)  # tied output: N(0, 1) would start at huge logits
        self.position = nn.Parameter(torch.randn(context, width) * 0.02)
        self.blocks = nn.Sequential(*(TransformerBlock(width, heads, dropout) for _ in range(layers)))
        self.norm = nn.LayerNorm(width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.dropout(self.embed(tokens) + self.position[: tokens.shape[1]])
        result: torch.Tensor = self.norm(self.blocks(x)) @ self.embed.weight.T
        return result


def build_model(name: str, width: int, context: int) -> nn.Module:
    if name == "resnet":
        return ResNet(width=width)
    if name == "lm":
        return ByteLM(width=width, context=context)
    raise ValueError(f"unknown model {name!r} (choose from {', '.join(MODEL_NAMES)})")


def compute_loss(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy for either model: per image, or per next byte."""
    logits = model(inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
