"""A model for manypy's dynamic batching tests: each method says something
a test can check about the batch it ran in.

forward(x) is x * 2 + 1, row by row, so every request can check its own
rows. rows(x) returns, for each row, the number of rows of the batch it ran
in, so a test sees the batches the batcher formed. The others misbehave the
ways a batch can: fewer rows than it got, an exception, a result of several
tensors and a non-tensor, an extra non-tensor argument.
"""

import torch
import torch.nn as nn


class Batching(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1

    def rows(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full((x.shape[0],), float(x.shape[0]))

    def scale(self, x: torch.Tensor, factor: float) -> torch.Tensor:
        return x * factor

    def pair(self, x: torch.Tensor, y: torch.Tensor):
        # A tuple, a dict and a non-tensor value (given to every request).
        return (x + y, {"sum": x.sum(dim=1), "label": "pair"})

    def drop_row(self, x: torch.Tensor) -> torch.Tensor:
        return x[1:]

    def fail(self, x: torch.Tensor):
        raise ValueError(f"fail: refused a batch of {x.shape[0]} rows")
