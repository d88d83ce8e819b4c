"""A model whose parameters weigh a chosen number of MB (float32).

Used by manypy tests of weight sharing between interpreters: each replica
should map the same storage rather than hold its own copy.  forward() reads a
small corner of the weights for the matmul and sums all of them, so every
call touches every page of the weights.
"""

import torch
import torch.nn as nn

ROW = 1024  # floats per row; one row is 4 KiB


class BigWeights(nn.Module):
    def __init__(self, size_mb: int = 256, k: int = 64):
        super().__init__()
        rows = max(size_mb * 1024 * 1024 // (4 * ROW), k)
        self.k = k
        # Small values so that the sum stays well inside float32 precision.
        self.w = nn.Parameter(torch.randn(rows, ROW).mul_(1e-3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch, k]
        return x @ self.w[: self.k, : self.k] + self.w.sum()
