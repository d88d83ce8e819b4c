#!/usr/bin/python3
"""Writes the hand-made seed inputs of fuzz_values and fuzz_tensors into
tests/fuzz/corpus/{values,tensors} (committed; rerun after changing an input
format). The byte layouts are the ones the targets' readers take, in order.

Usage: tests/fuzz/make_seeds.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(corpus, name, data):
    path = os.path.join(HERE, "corpus", corpus, name)
    with open(path, "wb") as f:
        f.write(bytes(data))


# --- fuzz_values: op, slot, operands -------------------------------------
NONE, BOOL, INT, DOUBLE = 0, 1, 2, 3
LIST, TUPLE, DICT = 0, 1, 2


def scalar(slot, kind, payload=b""):
    return bytes([0, slot, kind]) + payload


def string(slot, text):
    return bytes([1, slot, len(text)]) + text


def blob(slot, data):
    return bytes([2, slot, len(data)]) + data


def container(slot, kind):
    return bytes([3, slot, kind])


def append(to, item):
    return bytes([4, to, item])


def dict_set_new(to, item, key):  # to's first key: no "reuse" byte
    return bytes([5, to, item, len(key)]) + key


def dict_set(to, item, key):  # to already has keys: 0 = a new key
    return bytes([5, to, item, 0, len(key)]) + key


def dict_set_existing(to, item, index):
    return bytes([5, to, item, 1, index])


def wrap(slot, levels, kind):
    return bytes([6, slot]) + struct.pack("<H", levels) + bytes([kind])


def free(slot):
    return bytes([7, slot])


def check(slot):
    return bytes([8, slot])


def walk(slot, path, key=b""):
    return bytes([9, slot, len(path)]) + bytes(path) + bytes([len(key)]) + key


write("values", "scalars", scalar(0, NONE) + scalar(1, BOOL, b"\x01") +
      scalar(2, INT, struct.pack("<q", -2**63)) + scalar(3, DOUBLE, struct.pack("<d", -0.0)) +
      scalar(4, DOUBLE, struct.pack("<Q", 0x7FF8000000000001)) + b"".join(check(k) for k in range(5)))
write("values", "strings", string(0, "héllo €𝄞".encode()) + string(1, b"\xc0\xaf") +
      string(2, b"\xed\xa0\x80") + string(3, b"a\x00b") + blob(4, b"\x00\xff\x00") +
      string(5, b"") + blob(6, b"") + b"".join(check(k) for k in range(7)))
write("values", "dict", container(0, DICT) + scalar(1, INT, struct.pack("<q", 7)) +
      dict_set_new(0, 1, b"seven") + string(1, b"x") + dict_set(0, 1, "ключ".encode()) +
      scalar(1, NONE) + dict_set_existing(0, 1, 0) + blob(1, b"b") + dict_set(0, 1, b"\xff") +
      check(0) + walk(0, [], b"seven") + walk(0, [1], b"") + walk(0, [], b"nope"))
write("values", "nested", container(0, LIST) + container(1, TUPLE) + scalar(2, INT, b"\x01" * 8) +
      append(1, 2) + container(2, DICT) + append(1, 2) + append(0, 1) + scalar(1, BOOL, b"\x00") +
      append(0, 1) + append(0, 0) + dict_set_new(0, 0, b"k") + scalar(3, NONE) + append(3, 0) +
      check(0) + walk(0, [0, 1]) + walk(0, [0, 0]) + free(0) + check(0))
write("values", "deep", scalar(0, INT, b"\x05" * 8) + wrap(0, 100, LIST) + check(0) +
      scalar(1, NONE) + wrap(1, 70, DICT) + walk(1, [0] * 7) + free(0) + free(1))


# --- fuzz_tensors ----------------------------------------------------------
DTYPES = ["i8", "i16", "i32", "i64", "u8", "f16", "f32", "f64", "bf16", "c64", "c128", "bool"]


def tensor(managed, copy, buf, offset, dtype, shape, strides=None, byte_offset=0,
           data_size=None, null=False, raw_dtype=None, raw_ndim=None, device=None):
    out = bytes([(1 if managed else 0) | (2 if copy else 0)])
    out += struct.pack("<HH", buf, offset)
    out += bytes([0 if null else 1])
    if raw_dtype is None:
        out += bytes([1, DTYPES.index(dtype)])
    else:
        out += bytes([0]) + bytes(raw_dtype[:2]) + struct.pack("<H", raw_dtype[2])
    if raw_ndim is None:
        out += bytes([1, len(shape)])
    else:
        out += bytes([0]) + struct.pack("<i", raw_ndim)
    for n in shape:
        out += bytes([3, n])
    if strides is None:
        out += bytes([0])
    else:
        out += bytes([1])
        for s in strides:
            out += bytes([3, s]) if 0 <= s < 6 else bytes([0]) + struct.pack("<q", s)
    if managed:
        out += bytes([1]) if device is None else bytes([0, device, 0])
        out += bytes([1, byte_offset]) if byte_offset < 64 else bytes([0]) + struct.pack("<Q", byte_offset)
    else:
        out += bytes([1]) if data_size is None else bytes([0]) + struct.pack("<H", data_size)
    return out


write("tensors", "buffer_f32_2x3", tensor(False, False, 64, 8, "f32", [2, 3]))
write("tensors", "buffer_copy_strided", tensor(False, True, 256, 0, "i16", [3, 4], [5, 1]))
write("tensors", "buffer_too_small", tensor(False, False, 64, 0, "f64", [3, 3], data_size=40))
write("tensors", "buffer_broadcast", tensor(False, False, 16, 0, "u8", [5, 5], [0, 1]))
write("tensors", "buffer_empty_null", tensor(False, False, 0, 0, "c128", [0, 4], null=True))
write("tensors", "buffer_bad_dtype", tensor(False, False, 64, 0, None, [2], raw_dtype=(2, 12, 1)))
write("tensors", "buffer_bad_ndim", tensor(False, False, 64, 0, "i8", [], raw_ndim=65))
write("tensors", "managed_bool", tensor(True, False, 64, 4, "bool", [4, 2], byte_offset=8))
write("tensors", "managed_strided", tensor(True, False, 512, 0, "c64", [2, 3], [4, 1], byte_offset=16))
write("tensors", "managed_cuda", tensor(True, False, 64, 0, "f32", [2], device=2))
write("tensors", "managed_scalar", tensor(True, False, 8, 0, "bf16", []))


# --- regression inputs made by hand ----------------------------------------
def regress(target, name, data):
    path = os.path.join(HERE, "regress", target, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(bytes(data))


# 200,000 nested lists around an int (the harness's most), then freed: the
# recursive free of the value overflowed the stack (issue 10).
regress("fuzz_values", "deep_nesting_stack_overflow",
        scalar(0, INT, b"\x01" * 8) + wrap(0, 65535, LIST) * 4 + free(0))
