#!/usr/bin/env python3
"""NCCL on the devices of two rgpu servers (issue 13): ncclCommInitAll over devices 0 and 1.

NCCL's own transports cannot reach GPUs of other servers, so rgpu refuses NCCL a driver: the
call must fail (not hang) and the interposer must say why. Prints the result; exit 0 when NCCL
failed, 1 when it succeeded, 2 when no libnccl was found.
"""
import ctypes
import glob
import os
import sys


def find_nccl():
    for d in sys.path:
        for p in glob.glob(os.path.join(d, "nvidia", "nccl", "lib", "libnccl.so*")):
            return p
    return "libnccl.so.2"


def main():
    try:
        lib = ctypes.CDLL(find_nccl())
    except OSError as e:
        print(f"no libnccl: {e}")
        return 2
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    comms = (ctypes.c_void_p * 2)()
    devs = (ctypes.c_int * 2)(0, 1)
    r = lib.ncclCommInitAll(comms, 2, devs)
    print(f"ncclCommInitAll: {r} ({lib.ncclGetErrorString(r).decode()})", flush=True)
    return 0 if r != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
