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
 - a function whose name says avx2 or avxvnni but not avx512 contains an
   instruction only AVX-512 has: a zmm register, xmm/ymm 16-31, a mask
   register %k, masking or embedded broadcast ({...}), or an AVX-512-only
   mnemonic. One exception: where the name also says vnni (the avxvnni
   level's kernels, simd::AvxVnni), vpdpbusd / vpdpwssd on ymm0-15, VEX
   ({vex}: AVX-VNNI) or EVEX (its *_avxvnni_evex.cpp twin for CPUs with
   AVX-512 VNNI + VL);
 - a function that is not local to its translation unit (nm type other than
   t: a global or weak symbol, which the linker may share between files) and
   whose name does not say vnni contains a VNNI instruction (vpdpbusd[s],
   vpdpwssd[s]). The *_avx512vnni.cpp files instantiate the same AVX-512
   kernels as *_avx512.cpp, so their names say avx512 too; those kernels live in
   unnamed namespaces (local symbols), and a shared copy of anything else
   compiled there must not carry VNNI to a CPU that has AVX-512 without it;
 - by the same rule, a function that is not local and whose name does not say
   vbmi contains a VBMI instruction (vpermb, vperm[it]2b, vpmultishiftqb): the
   *_avx512vbmi.cpp files (VNNI + VBMI) must not hand one to a CPU that has
   VNNI without VBMI (Cascade Lake).

usage: check_isa_leaks.py BINARY [BINARY ...]
       check_isa_leaks.py --self-test   (the rules against hand-written objdump lines)"""
import re
import subprocess
import sys

HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")
ALLOWED = ("avx2", "avxvnni", "avx512", "f16c")
EVEX_OPERAND = re.compile(r"%zmm|%[xy]mm(1[6-9]|2[0-9]|3[01])\b|%k[0-7]\b|\{")
VNNI_MNEMONIC = re.compile(r"^vpdp(busd|wssd)s?$")
YMM_LOW = r"%ymm([0-9]|1[0-5])"
VNNI256 = re.compile(rf"^(\{{vex\}} )?vpdp(busd|wssd)s? {YMM_LOW},{YMM_LOW},{YMM_LOW}$")
VBMI_MNEMONIC = re.compile(r"^(vpermb|vperm[it]2b|vpmultishiftqb)$")
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
    return leaks_in(out, local_functions(path))


def leaks_in(out, local):
    """The offending functions of objdump -d -C text `out` ({function: first bad instruction});
    `local`: the names of the functions local to their translation unit."""
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
        mnem = insn.removeprefix("{vex} ").split(" ")[0]
        if VNNI_MNEMONIC.match(mnem) and "vnni" not in name and fn not in local:
            bad.setdefault(fn, insn)
            continue
        if VBMI_MNEMONIC.match(mnem) and "vbmi" not in name and fn not in local:
            bad.setdefault(fn, insn)
            continue
        if "avx512" in name:
            continue
        if "avx2" in name or "avxvnni" in name:  # AVX2 code: no AVX-512 encoding
            if "vnni" in name and VNNI256.match(insn):
                continue
            if EVEX_OPERAND.search(insn) or EVEX_MNEMONIC.match(mnem):
                bad.setdefault(fn, insn)
            continue
        if any(t in name for t in ALLOWED):
            continue
        if (mnem.startswith("v") and mnem not in ("verr", "verw")) or "%ymm" in insn or "%zmm" in insn:
            bad.setdefault(fn, insn)
    return bad


def self_test():
    """The rules on hand-written objdump lines: each case must come out as stated."""
    def dis(fn, *insns):
        return f"0000000000001000 <{fn}>:\n" + "".join(f"    1{i:03x}:\t{x}\n" for i, x in enumerate(insns))
    avx2 = "void k<llmk::simd::Avx2>(float*)"
    vnni = "void k<llmk::simd::AvxVnni>(float*)"
    cases = [  # (objdump text, local functions, flagged?)
        (dis(avx2, "vaddps %ymm1,%ymm2,%ymm3"), set(), False),
        (dis(avx2, "vaddps %zmm1,%zmm2,%zmm3"), set(), True),
        (dis(avx2, "vaddps %ymm1,%ymm2,%ymm3{%k1}"), set(), True),
        (dis(avx2, "vaddps %ymm17,%ymm2,%ymm3"), set(), True),
        (dis(avx2, "vpternlogd $0x96,%ymm1,%ymm2,%ymm3"), set(), True),
        # a branch to a lambda: objdump's <...{lambda(long)#1}...> is no mask operand
        (dis(avx2, f"call   1234 <{avx2}::{{lambda(long)#1}}::operator()(long) const>",
             f"je     1200 <{avx2}::{{lambda(long)#1}}::operator()(long) const+0x3b>"), set(), False),
        (dis("std::vector<float>::resize(unsigned long)", "vmovups %xmm0,(%rax)"), set(), True),
        (dis("std::vector<float>::resize(unsigned long)", "movups %xmm0,(%rax)  # 2000 <x>"), set(), False),
        (dis("void k<llmk::simd::Avx512>(float*)", "vpdpbusd %zmm1,%zmm2,%zmm3"), set(), True),
        (dis("void k<llmk::simd::Avx512>(float*)", "vpdpbusd %zmm1,%zmm2,%zmm3"),
         {"void k<llmk::simd::Avx512>(float*)"}, False),
        (dis("void k_avx512vnni(float*)", "vpdpbusd %zmm1,%zmm2,%zmm3"), set(), False),
        (dis("void k<llmk::simd::Avx512>(float*)", "vpermb %zmm1,%zmm2,%zmm3"), set(), True),
        (dis("void k<llmk::simd::Avx512>(float*)", "vpermt2b %zmm1,%zmm2,%zmm3"),
         {"void k<llmk::simd::Avx512>(float*)"}, False),
        (dis("void k_avx512vnni(float*)", "vpermb %zmm1,%zmm2,%zmm3"), set(), True),
        (dis("void k_avx512vbmi(float*)", "vpermb %zmm1,%zmm2,%zmm3"), set(), False),
        # the avxvnni level: 256-bit VNNI, VEX or EVEX on ymm0-15, in its own kernels only
        (dis(vnni, "{vex} vpdpbusd %ymm2,%ymm1,%ymm0"), {vnni}, False),
        (dis(vnni, "vpdpwssd %ymm15,%ymm1,%ymm0"), {vnni}, False),
        (dis(vnni, "vpdpbusd %ymm17,%ymm1,%ymm0"), {vnni}, True),
        (dis(vnni, "vpdpbusd %zmm2,%zmm1,%zmm0"), {vnni}, True),
        (dis(vnni, "vpdpbusd %ymm2,%ymm1,%ymm0{%k1}"), {vnni}, True),
        (dis(vnni, "vpternlogd $0x96,%ymm1,%ymm2,%ymm3"), {vnni}, True),
        (dis(avx2, "{vex} vpdpbusd %ymm2,%ymm1,%ymm0"), {avx2}, True),
        (dis("void attend_avxvnni(float*)", "{vex} vpdpbusd %ymm2,%ymm1,%ymm0"), set(), False),
        (dis("std::vector<float>::resize(unsigned long)", "{vex} vpdpbusd %ymm2,%ymm1,%ymm0"), set(), True),
    ]
    failed = 0
    for i, (text, local, want) in enumerate(cases):
        got = bool(leaks_in(text, local))
        if got != want:
            failed += 1
            print(f"self-test case {i}: flagged {got}, expected {want}:\n{text}")
    print(f"self-test: {len(cases) - failed} of {len(cases)} cases as expected")
    return 1 if failed else 0


def main(paths):
    if paths == ["--self-test"]:
        return self_test()
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
                  "no VNNI (VBMI) instruction in a shared function outside vnni (vbmi) code")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
