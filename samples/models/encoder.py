"""A small transformer encoder served with a bool padding mask.

forward(src, src_key_padding_mask) is nn.TransformerEncoder's: the mask is a
bool tensor [batch, seq], True where a position is padding. Every attention
and padding mask in PyTorch is bool, so this is the model that shows bool
tensors crossing into an interpreter. invert(mask) returns ~mask, a bool
result.
"""

import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, d_model: int = 32, nhead: int = 4, layers: int = 2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=64, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)

    def forward(self, src: torch.Tensor, src_key_padding_mask: torch.Tensor) -> torch.Tensor:
        if src_key_padding_mask.dtype != torch.bool:
            raise TypeError(f"the padding mask must be bool, not {src_key_padding_mask.dtype}")
        return self.encoder(src, src_key_padding_mask=src_key_padding_mask)

    def invert(self, mask: torch.Tensor) -> torch.Tensor:
        return ~mask


class Invert(nn.Module):
    """For TorchScript on the host: bool in, bool out."""

    def forward(self, mask: torch.Tensor) -> torch.Tensor:
        return ~mask
