"""A model whose parameters weigh a chosen number of MB (float32).

Used by manypy tests of weight sharing between interpreters: each replica
should map the same storage rather than hold its own copy.  forward() reads a
small corner of the weights for the matmul and sums all of them, so every
call touches every page of the weights.

With light=True, forward() sums one float per 4 KiB row instead of all of
them: every page is still touched (so every design holds all the weights),
but a call costs about 2 ms for 512 MB (one cache and TLB miss per page,
measured by the peers benchmark, which compares memory with it:
bench/peers, docs/performance.md).
"""

import torch
import torch.nn as nn

ROW = 1024  # floats per row; one row is 4 KiB


class BigWeights(nn.Module):
    def __init__(self, size_mb: int = 256, k: int = 64, light: bool = False):
        super().__init__()
        rows = max(size_mb * 1024 * 1024 // (4 * ROW), k)
        self.k = k
        self.light = light
        # Small values so that the sum stays well inside float32 precision.
        self.w = nn.Parameter(torch.randn(rows, ROW).mul_(1e-3))

    def weight_address(self) -> int:
        """Where w's data is: the same in every replica, which share the
        package's weights (tests/capi/capi_weights.c)."""
        return self.w.data_ptr()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch, k]
        corner = x @ self.w[: self.k, : self.k]
        if self.light:
            return corner + self.w[:, 0].sum()
        return corner + self.w.sum()
