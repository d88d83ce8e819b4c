"""One worker process of the worker-pool baseline (bench/peers/worker_pool.c).

Built the way multi-process model servers build theirs (TorchServe, Triton's
Python backend): the process loads its own copy of the model from a
torch.package archive, then serves requests from its host.  A request is a
small header on a Unix socket (SOCK_SEQPACKET, fd 3); the input tensor's
bytes are in shared memory (a memfd, fd 4) that both sides map, read here
without copying through torch.frombuffer.  The outputs are written into the
same mapping and described by the reply header.

  worker.py ARCHIVE IN_CAPACITY OUT_CAPACITY

Messages (little-endian int64s):
  host -> worker   request: ndim, shape[4], nbytes   (input at offset 0)
  worker -> host   ready:   count = 0
                   reply:   count, then per output: kind (0: float32 tensor,
                            1: int), ndim, shape[4], offset or value, nbytes,
                            and a 16-byte NUL-padded key
                   error:   count = -1, then the message (UTF-8)
"""

import mmap
import socket
import struct
import sys
import traceback

import torch

from common import case_of, load_model

REQUEST = struct.Struct("<6q")
ENTRY = struct.Struct("<8q16s")
COUNT = struct.Struct("<q")


def outputs_of(result):
    if isinstance(result, torch.Tensor):
        return [("out", result)]
    if isinstance(result, dict):
        return list(result.items())
    raise TypeError(f"unsupported output type {type(result).__name__}")


def reply(result, shm, out_base, out_capacity):
    parts, offset = [], out_base
    items = outputs_of(result)
    for key, value in items:
        name = key.encode()[:16]
        if isinstance(value, int):
            parts.append(ENTRY.pack(1, 0, 0, 0, 0, 0, value, 0, name))
            continue
        t = value.detach().contiguous()
        if t.dtype != torch.float32 or t.dim() > 4:
            raise TypeError(f"output '{key}': only float32 tensors of up to 4 dimensions")
        nbytes = t.numel() * 4
        if offset + nbytes > out_base + out_capacity:
            raise ValueError(f"outputs exceed the shared memory ({out_capacity} bytes)")
        view = torch.frombuffer(shm, dtype=torch.float32, count=t.numel(), offset=offset)
        view.copy_(t.reshape(-1))  # the one copy: into memory the host maps
        shape = list(t.shape) + [0] * (4 - t.dim())
        parts.append(ENTRY.pack(0, t.dim(), *shape, offset, nbytes, name))
        offset += (nbytes + 63) // 64 * 64
    return COUNT.pack(len(items)) + b"".join(parts)


def main():
    archive, in_capacity, out_capacity = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sock = socket.socket(fileno=3)
    shm = mmap.mmap(4, in_capacity + out_capacity)
    model = load_model(archive)
    kwargs = case_of(archive)["kwargs"]
    sock.send(COUNT.pack(0))
    with torch.no_grad():
        while True:
            msg = sock.recv(4096)
            if not msg:
                return  # the host closed its end
            ndim, s0, s1, s2, s3, nbytes = REQUEST.unpack(msg)
            try:
                x = torch.frombuffer(shm, dtype=torch.float32, count=nbytes // 4)
                x = x.view([s0, s1, s2, s3][:ndim])
                sock.send(reply(model(x, **kwargs), shm, in_capacity, out_capacity))
            except Exception:
                text = traceback.format_exc().encode()[-3000:]
                sock.send(COUNT.pack(-1) + text)


if __name__ == "__main__":
    main()
