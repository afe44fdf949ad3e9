#!/usr/bin/env python3
"""Checks that no AVX2/AVX-512 instruction leaks into code a lower ISA path can run.

Only *_avx2.cpp / *_avx512.cpp files are compiled with ISA flags. If such a file
instantiates an inline function or template that a baseline file also uses
(std::vector<float>::resize, an inline helper from a header), the linker keeps
ONE copy, possibly the AVX one, and a CPU without AVX2 then dies with SIGILL in
"scalar" code. The same holds one level up: an *_avx512.cpp file also sees the
AVX2 code (simd::Avx2, its AVX2 kernels), and the copy the linker keeps of an
AVX2 function may be the one compiled with AVX-512 flags, which an AVX2-only
CPU cannot run. This check disassembles a linked binary and fails if
 - a function whose name does not say avx2/avx512/f16c (the ISA structs
   simd::Avx2/Avx512 are in the template arguments of every ISA kernel)
   contains a VEX/EVEX-encoded instruction (mnemonic v*, or a ymm/zmm register);
 - a function whose name says avx2 but not avx512 contains an instruction only
   AVX-512 has: a zmm register, xmm/ymm 16-31, a mask register %k, masking or
   embedded broadcast ({...}), or an AVX-512-only mnemonic;
 - a function that is not local to its translation unit (nm type other than
   t: a global or weak symbol, which the linker may share between files) and
   whose name does not say vnni contains a VNNI instruction (vpdpbusd[s],
   vpdpwssd[s]). The *_avx512vnni.cpp files instantiate the same AVX-512
   kernels as *_avx512.cpp, so their names say avx512 too; those kernels live in
   unnamed namespaces (local symbols), and a shared copy of anything else
   compiled there must not carry VNNI to a CPU that has AVX-512 without it.

usage: check_isa_leaks.py BINARY [BINARY ...]"""
import re
import subprocess
import sys

HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")
ALLOWED = ("avx2", "avx512", "f16c")
EVEX_OPERAND = re.compile(r"%zmm|%[xy]mm(1[6-9]|2[0-9]|3[01])\b|%k[0-7]\b|\{")
VNNI_MNEMONIC = re.compile(r"^vpdp(busd|wssd)s?$")
EVEX_MNEMONIC = re.compile(
    r"^(k[a-z]+|vpternlog[dq]|vperm[it]2[a-z]+|vcompress|vexpand|vfixupimm|vgetexp|vgetmant|vrndscale|vscalef|"
    r"vrcp14|vrsqrt14|vrange|vreduce|vfpclass|vpconflict|vplzcnt|vpopcnt|vpshl?d|vpshrd|vpermb|vpermw|vpmovm2|"
    r"vpmov[bwdq]2m|vpmov(s|us)?(qd|qw|qb|dw|db|wb)\b|v(extract|insert)[fi](32x4|32x8|64x2|64x4)|"
    r"vbroadcast[fi](32x[248]|64x[24])|vpbroadcastm|vcvt[a-z]*[qu]q|vcvtu|vpmullq|vpabsq|vp(max|min)[su]q|vpsraq|"
    r"vpro[lr]|vpsllvw|vpsrlvw|vpsravw|vdbpsadbw|vpmadd52|vpdpbusd|vpdpwssd)")


def local_functions(path):
    out = subprocess.run(["nm", "-C", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return {line[19:] for line in out.splitlines() if line[17:19] == "t "}


def leaks(path):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", path], capture_output=True, text=True,
                         check=True).stdout
    local = local_functions(path)
    bad, fn = {}, None
    for line in out.splitlines():
        m = HEADER.match(line)
        if m:
            fn = m.group(1)
            continue
        if fn is None:
            continue
        name = fn.lower()
        parts = line.split("\t")
        if len(parts) < 2:
            continue
        # Not objdump's " <symbol>" after a branch target nor its "# addr <symbol>"
        # note: a symbol such as f(long)::{lambda(long)#1} would read as a mask operand.
        insn = parts[-1].split(" <")[0].split("#")[0].strip()
        mnem = insn.split(" ")[0]
        if VNNI_MNEMONIC.match(mnem) and "vnni" not in name and fn not in local:
            bad.setdefault(fn, insn)
            continue
        if "avx512" in name:
            continue
        if "avx2" in name:  # AVX2 code: no AVX-512 encoding
            if EVEX_OPERAND.search(insn) or EVEX_MNEMONIC.match(mnem):
                bad.setdefault(fn, insn)
            continue
        if any(t in name for t in ALLOWED):
            continue
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
            print(f"{p}: {len(bad)} function(s) contain instructions of a higher ISA than their path")
        else:
            print(f"{p}: no AVX instruction outside avx2/avx512 code, no AVX-512 instruction in avx2 code, "
                  "no VNNI instruction in a shared function outside vnni code")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
