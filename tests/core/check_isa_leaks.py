#!/usr/bin/env python3
"""Checks that no AVX2/AVX-512 instruction leaks into code the scalar path can run.

Only *_avx2.cpp / *_avx512.cpp files are compiled with ISA flags. If such a file
instantiates an inline function or template that a baseline file also uses
(std::vector<float>::resize, an inline helper from a header), the linker keeps
ONE copy, possibly the AVX one, and a CPU without AVX2 then dies with SIGILL in
"scalar" code. This check disassembles a linked binary and fails if any function
whose name does not say avx2/avx512 (the ISA structs simd::Avx2/Avx512 are in
the template arguments of every ISA kernel) contains a VEX/EVEX-encoded
instruction (mnemonic v*, or a ymm/zmm register).

usage: check_isa_leaks.py BINARY [BINARY ...]"""
import re
import subprocess
import sys

HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")
ALLOWED = ("avx2", "avx512", "f16c")


def leaks(path):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", path], capture_output=True, text=True,
                         check=True).stdout
    bad, fn = {}, None
    for line in out.splitlines():
        m = HEADER.match(line)
        if m:
            fn = m.group(1)
            continue
        if fn is None or any(t in fn.lower() for t in ALLOWED):
            continue
        parts = line.split("\t")
        if len(parts) < 2:
            continue
        insn = parts[-1].strip()
        mnem = insn.split(" ")[0]
        if (mnem.startswith("v") and mnem not in ("verr", "verw")) or "%ymm" in insn or "%zmm" in insn:
            bad.setdefault(fn, insn)
    return bad


def main(paths):
    failed = False
    for p in paths:
        bad = leaks(p)
        for fn, insn in list(bad.items())[:20]:
            print(f"{p}: {fn[:160]}: {insn}")
        if bad:
            failed = True
            print(f"{p}: {len(bad)} baseline function(s) contain AVX instructions")
        else:
            print(f"{p}: no AVX instruction outside avx2/avx512 code")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
