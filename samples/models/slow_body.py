"""A module whose body takes a second to run, for manypy's stop tests.

Pickled in hostile.pt (model/slow_body.pkl) and interned, so a new
interpreter runs this body when it makes the object's replica: a deadline
that fires meanwhile stops the import halfway, and the next replica must
import it whole (torch.package's importer kept the half-made module).
"""

import time

_end = time.monotonic() + 1.0
while time.monotonic() < _end:
    time.sleep(0.005)


class Twice:
    def __call__(self, x):
        return x * 2
