"""A deliberately Python-heavy model for manypy tests and benchmarks.

The forward pass runs many small ops on [batch, 64] tensors, so its cost is
dominated by the Python interpreter (and, in manypy, by the GIL of the
interpreter that runs it) rather than by the math.  It also exercises:

* keyword arguments with defaults (``steps``, ``normalize``),
* a loop whose trip count comes from an argument (``steps``),
* an ``if`` on a value computed from the data,
* a dict output mixing tensors and a Python int.

It is deterministic given its weights, and scriptable with torch.jit.script
(TorchScript accepts ``Dict[str, Union[Tensor, int]]``).
"""

from typing import Dict, Union

import torch
import torch.nn as nn
import torch.nn.functional as F

WIDTH = 64


class PythonHeavy(nn.Module):
    def __init__(self, width: int = WIDTH, depth: int = 24, classes: int = 10):
        super().__init__()
        # `depth` small Linear layers applied one after the other in forward.
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        # One extra layer reused `steps` times.  TorchScript cannot index a
        # ModuleList with a runtime value, so the argument-driven loop uses a
        # plain weight/bias pair instead of self.layers[i].
        self.step_w = nn.Parameter(torch.randn(width, width) / width ** 0.5)
        self.step_b = nn.Parameter(torch.zeros(width))
        self.head = nn.Linear(width, classes)

    def weight_address(self) -> int:
        """Where step_w's data is: the same in every replica, which share
        the package's weights (tests/capi/capi_objects.c)."""
        return self.step_w.data_ptr()

    def forward(
        self, x: torch.Tensor, steps: int = 8, normalize: bool = True
    ) -> Dict[str, Union[torch.Tensor, int]]:
        h = x
        # Fixed-length chain of small residual blocks (unrolled by TorchScript).
        for layer in self.layers:
            h = h + 0.1 * torch.tanh(layer(h))

        # Loop whose count is an argument.
        for i in range(steps):
            y = F.linear(h, self.step_w, self.step_b)
            if i % 2 == 0:
                h = 0.5 * h + 0.5 * torch.relu(y)
            else:
                h = 0.5 * h + 0.5 * torch.sigmoid(y)

        # norm() gets p explicitly: TorchScript has no overload taking dim alone.
        if normalize:
            h = h / (h.norm(p=2, dim=1, keepdim=True) + 1e-6)

        # Control flow that depends on a value computed from the data.
        if bool(h.mean() > 0):
            h = h * 1.5
        else:
            h = h - 0.1

        out: Dict[str, Union[torch.Tensor, int]] = {
            "logits": self.head(h),
            "norm": h.norm(p=2, dim=1),
            "steps": steps,
        }
        return out
