#!/usr/bin/python3
"""Writes the hand-made seed inputs of fuzz_values, fuzz_tensors and
fuzz_aoti_package into tests/fuzz/corpus/{values,tensors,pt2} (committed;
rerun after changing an input format). The byte layouts are the ones the
targets' readers take, in order.

Usage: tests/fuzz/make_seeds.py
"""
import io
import json
import os
import struct
import zipfile

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


# --- fuzz_aoti_package: small .pt2 packages, and call specs ----------------
# The layout aoti_compile_and_package writes (a real one is megabytes: its
# compiled library), with a library that is only an ELF header.
def elf_header(machine=62, elf_type=3, elf_class=2):  # EM_X86_64, ET_DYN, 64-bit
    """An ELF header and one PT_LOAD program header covering the file."""
    ident = b"\x7fELF" + bytes([elf_class, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack("<HHIQQQIHHHHHH", elf_type, machine, 1, 0, 64, 0, 0, 64, 56, 1,
                                 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, 120, 120, 4096)
    return header + load


def elf_with_needs(names=("libtorch.so", "libtorch_cpu.so", "libc.so.6")):
    """A library with a dynamic section naming the libraries it needs, as a
    compiled model's does (the runner points libtorch.so at libtorch_cpu.so)."""
    strtab, offsets = b"\0", []
    for n in names:
        offsets.append(len(strtab))
        strtab += n.encode() + b"\0"
    dynamic_at = 64 + 2 * 56
    strtab_at = dynamic_at + (len(names) + 3) * 16
    size = strtab_at + len(strtab)
    DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
    dynamic = b"".join(struct.pack("<qQ", DT_NEEDED, o) for o in offsets)
    dynamic += struct.pack("<qQqQqQ", DT_STRTAB, strtab_at, DT_STRSZ, len(strtab), DT_NULL, 0)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, size, size, 4096)
    dyn = struct.pack("<IIQQQQQQ", 2, 6, dynamic_at, dynamic_at, dynamic_at, len(dynamic),
                      len(dynamic), 8)
    return header + load + dyn + dynamic + strtab


METADATA = {"AOTI_DEVICE_KEY": "cpu", "AOTI_PLATFORM": "linux", "AOTI_MACHINE": "x86_64",
            "AOTI_CPU_ISA": "DEFAULT", "AOTI_COMPUTE_CAPABILITY": ""}


def pt2(records, name="seed"):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for record, data in records:  # a fixed date: the same bytes on every run
            z.writestr(zipfile.ZipInfo(f"{name}/{record}", date_time=(1980, 1, 1, 0, 0, 0)), data)
    return out.getvalue()


def package(library=None, metadata=None, extra=(), model="model"):
    lib = f"data/aotinductor/{model}/cseed.wrapper"
    records = [(".data/version", b"6\n"), ("archive_format", b"pt2"), ("archive_version", b"0"),
               ("byteorder", b"little")]
    records.append((lib + ".so", elf_header() if library is None else library))
    records.append((lib + "_metadata.json",
                    json.dumps(METADATA if metadata is None else metadata).encode()))
    return pt2(records + list(extra))


write("pt2", "minimal.pt2", package())
write("pt2", "needs_libtorch.pt2", package(library=elf_with_needs()))
write("pt2", "cuda.pt2", package(metadata=dict(METADATA, AOTI_DEVICE_KEY="cuda")))
write("pt2", "avx512.pt2", package(metadata=dict(METADATA, AOTI_CPU_ISA="AVX512")))
write("pt2", "aarch64.pt2", package(library=elf_header(machine=183)))
write("pt2", "not_elf.pt2", package(library=b"#!/bin/sh\n"))
write("pt2", "bad_metadata.pt2", package(metadata=["AOTI_DEVICE_KEY"]))
write("pt2", "escape.pt2", package(extra=[("data/../../evil.so", b"x")]))
write("pt2", "two_models.pt2",
      package(extra=[("data/aotinductor/other/c.so", elf_header())]))
write("pt2", "exported_only.pt2",
      pt2([(".data/version", b"6\n"), ("models/model.json", b"{}")]))
LEAF = {"type": None, "context": None, "children_spec": []}


def node(kind, children, context="null"):
    return {"type": kind, "context": context, "children_spec": children}


def spec(positional, named=None):
    named = named or {}
    return json.dumps([1, node("builtins.tuple", [
        node("builtins.tuple", positional),
        node("builtins.dict", list(named.values()), json.dumps(list(named)))])]).encode()


write("pt2", "spec_two_tensors", spec([LEAF, LEAF]))
write("pt2", "spec_nested", spec([node("builtins.list", [LEAF, node("builtins.NoneType", [])])],
                                 {"mask": LEAF}))
write("pt2", "spec_output_dict", json.dumps(
    [1, node("builtins.dict", [LEAF, LEAF], json.dumps(["logits", "norm"]))]).encode())


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
