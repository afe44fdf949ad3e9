"""Checks of the Python arguments the wrappers handle themselves (before any array is
allocated for them), with messages in the extension's form:
    llmk.softmax_topk: argument 'k' = 1.5: must be an integer"""
import math
import operator

_F32_MAX = 3.4028234663852886e38


class Text(str):
    """A value already described in words: shown as is, not as a repr."""

    def __repr__(self):
        return str(self)


def fail(fn, name, value, requirement, exc=ValueError):
    raise exc(f"llmk.{fn}: argument '{name}' = {value!r}: {requirement}")


def array(fn, name, a):
    """a itself, when it looks like an array (has a shape and a dtype): the wrappers read its
    shape to allocate outputs. The extension checks the rest (dtype, device, strides)."""
    if not (hasattr(a, "shape") and hasattr(a, "dtype")):
        fail(fn, name, a if a is None else Text(type(a).__name__),
             "must be a numpy array or DLPack tensor", TypeError)
    return a


def integer(fn, name, v, lo=-(1 << 63), hi=(1 << 63) - 1):
    """v as an int (ints and numpy integers, not floats or strings), in [lo, hi]."""
    try:
        i = operator.index(v)
    except TypeError:
        fail(fn, name, v, "must be an integer", TypeError)
    if not lo <= i <= hi:
        fail(fn, name, i, f"must be in [{lo}, {hi}]")
    return i


def real(fn, name, v):
    """v as a float that float32 holds (the extension computes in float32): a finite value
    beyond float32's range would turn into inf, an error about a value nobody passed."""
    if isinstance(v, (str, bytes)) or v is None or isinstance(v, complex):
        fail(fn, name, v, "must be a real number", TypeError)
    try:
        f = float(v)
    except (TypeError, ValueError):
        fail(fn, name, v, "must be a real number", TypeError)
    if math.isfinite(f) and abs(f) > _F32_MAX:
        fail(fn, name, f, "must be within float32's range (|x| <= 3.4e38)")
    return f


def token_lists(fn, name, lists, rows):
    """lists: one sequence of int token ids per row (or None: none), as lists of ints."""
    if lists is None:
        return []
    if isinstance(lists, (str, bytes)) or not hasattr(lists, "__iter__"):
        fail(fn, name, Text(type(lists).__name__), "must be one list of token ids per row, or None", TypeError)
    out = []
    for i, row in enumerate(lists):
        if isinstance(row, (str, bytes)) or not hasattr(row, "__iter__"):
            fail(fn, f"{name}[{i}]", row, "must be a list of token ids", TypeError)
        out.append([integer(fn, f"{name}[{i}][{j}]", t, -(1 << 31), (1 << 31) - 1) for j, t in enumerate(row)])
    if out and len(out) != rows:
        fail(fn, name, Text(f"{len(out)} lists"), f"must hold one list per row ({rows} rows), or be empty")
    return out
