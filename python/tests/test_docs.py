"""Every repository path and file name that README.md and docs/*.md mention exists.

What counts as a path:
- a Markdown link target that is not a URL or an anchor, relative to the doc's folder;
- a backticked token (or a word of a backticked command) that contains a '/' and either
  starts with a top-level folder of the repository or ends in a known file extension;
  it may be relative to the repository root, the doc's folder, src/ or include/
  (`core/simd.hpp`, `llmk/topk.hpp`);
- a backticked bare file name with a known extension (`topk_scan.hpp`): some file of
  that name exists in the repository;
- a word in the prose or in a code block that starts with a top-level folder
  (`src/`, `docs/`, `scripts/`, ...).
Globs (`*_ref.cpp`, `topk_{scalar,avx2}.cpp`) must match at least one file; a
`:123` line suffix is dropped; placeholders (`<c>`, `$OUT`), absolute paths and
build outputs (`build/`, `.venv/`) are not checked.
"""
import fnmatch
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Every doc: test_every_doc_is_listed fails when one is added and not listed here.
CHECKED = [
    "README.md",
    "docs/ARCHITECTURE.md",
    "docs/CONTRIBUTING.md",
    "docs/capacity.md",
    "docs/chat_templates.md",
    "docs/engine.md",
    "docs/gguf_tokenizer.md",
    "docs/kv_cache.md",
    "docs/layernorm.md",
    "docs/python.md",
    "docs/serving.md",
    "docs/softmax_topk.md",
    "docs/structured_output.md",
]

TOP_DIRS = ("src", "include", "tests", "bench", "docs", "scripts", "python", "tools", "fuzz", "cmake", ".ci")
EXTENSIONS = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".py", ".md", ".cmake", ".toml", ".json", ".jinja", ".png", ".sh")
SKIP_PREFIXES = ("build", ".venv", "/", "~", "http:", "https:", "$")

# (doc, name): names a doc uses that are not files of this repository, each with its reason.
# A name matches a token equal to it or holding it between '/', '_' or '.' boundaries.
EXCEPTIONS = {
    ("docs/CONTRIBUTING.md", "foo"): "the example component a new one is laid out by",
    ("docs/CONTRIBUTING.md", "results.md"): "written under $OUT by scripts/gpu-check at run time",
    ("README.md", "prompts.txt"): "the user's prompt file in an example command",
    ("docs/capacity.md", "config.json"): "a Hugging Face model's config file",
    ("docs/capacity.md", "ggml/src/ggml-common.h"): "llama.cpp's file",
    ("docs/layernorm.md", "aten/src/ATen/native/cuda/layer_norm_kernel.cu"): "PyTorch's file",
    ("docs/engine.md", "conversion/gemma.py"): "the gguf package's file",
    ("docs/engine.md", "src/llama-hparams.*"): "llama.cpp's files",
    ("docs/engine.md", "src/models/gemma3.cpp"): "llama.cpp's file",
    ("docs/kv_cache.md", "src/llama-kv-cache.cpp"): "llama.cpp's file",
    ("docs/kv_cache.md", "src/llama-hparams.h"): "llama.cpp's file",
}


def excepted(doc, token):
    return any(d == doc and re.search(rf"(^|[/_.]){re.escape(name)}($|[/_.])", token) for (d, name) in EXCEPTIONS)


def repo_files():
    """Relative paths of the repository's files and folders (build outputs left out)."""
    out = set()
    ignored = {".git", ".cache", ".gtest", ".gl", ".whl", "dist", "_skbuild"}  # .gitignore's folders
    for top in [p for p in ROOT.iterdir() if p.name not in ignored and not p.name.startswith(SKIP_PREFIXES)]:
        rel = top.relative_to(ROOT).as_posix()
        if top.is_file():
            out.add(rel)
            continue
        out.add(rel)
        for d, dirs, files in os.walk(top):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            base = pathlib.Path(d).relative_to(ROOT).as_posix()
            out.update(f"{base}/{x}" for x in dirs + files)
    return out


FILES = repo_files()
BASENAMES = {p.rsplit("/", 1)[-1] for p in FILES}


def expand_braces(token):
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [w for alt in m.group(1).split(",") for w in expand_braces(token[: m.start()] + alt + token[m.end():])]


def exists(rel):
    rel = os.path.normpath(rel).replace(os.sep, "/").rstrip("/")
    if any(c in rel for c in "*?["):
        return any(fnmatch.fnmatchcase(p, rel) for p in FILES)
    return rel in FILES


def clean(token):
    token = token.strip().strip("\"'()[],;.").rstrip(":")
    return re.sub(r":\d+(-\d+)?$", "", token)


def is_pathlike(token):
    if not token or "<" in token or token.startswith(SKIP_PREFIXES) or token.startswith("-"):
        return False
    if not re.fullmatch(r"[\w.\-/*?{},+]+", token):
        return False
    first = token.lstrip("./").split("/", 1)[0]
    if "/" in token:
        return first in TOP_DIRS or token.endswith(EXTENSIONS)
    return token.endswith(EXTENSIONS)


def resolves(token, doc):
    """Whether the token names a file or folder of the repository."""
    doc_dir = pathlib.PurePosixPath(doc).parent.as_posix()
    for t in expand_braces(token):
        t = t[2:] if t.startswith("./") else t
        if "/" not in t:
            if any(c in t for c in "*?["):
                if not any(fnmatch.fnmatchcase(b, t) for b in BASENAMES):
                    return False
            elif t not in BASENAMES:
                return False
            continue
        bases = ["", doc_dir, "src", "include"]
        if not any(exists(f"{b}/{t}" if b not in ("", ".") else t) for b in bases):
            return False
    return True


def mentions(text):
    """(kind, token) for each path-like mention in a Markdown text."""
    found = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        target = target.split("#", 1)[0]
        if target and not target.startswith(("http:", "https:", "mailto:")):
            found.append(("link", target))
    # Code blocks: only words that start with a top-level folder.
    blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.S)
    prose = re.sub(r"```[^\n]*\n.*?```", " ", text, flags=re.S)
    for span in re.findall(r"`([^`\n]+)`", prose):
        for word in span.split():
            word = clean(word)
            if is_pathlike(word):
                found.append(("code", word))
    bare = re.sub(r"`[^`\n]+`", " ", prose)
    bare = re.sub(r"\]\([^)]*\)", "]", bare)
    top = "|".join(re.escape(d) for d in TOP_DIRS)
    for chunk in [bare] + blocks:
        for m in re.finditer(rf"(?<![\w./$-])(?:\./)?(?:{top})/[\w.\-/*{{}},]*", chunk):
            word = clean(m.group(0))
            if is_pathlike(word):
                found.append(("text", word))
    return found


def missing(doc, text):
    out = []
    for kind, token in mentions(text):
        if excepted(doc, token):
            continue
        if kind == "link":
            path = (pathlib.PurePosixPath(doc).parent / token).as_posix()
            ok = exists(path)
        else:
            ok = resolves(token, doc)
        if not ok:
            out.append(f"{kind} `{token}`")
    return sorted(set(out))


@pytest.mark.parametrize("doc", CHECKED)
def test_doc_paths_exist(doc):
    bad = missing(doc, (ROOT / doc).read_text())
    assert not bad, f"{doc} names paths that do not exist: " + ", ".join(bad)


def test_every_doc_is_listed():
    docs = {"README.md"} | {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    assert docs == set(CHECKED), "a doc is not in CHECKED (or a listed one is gone)"


def test_checker_finds_a_missing_path():
    text = (
        "See [the map](ARCHITECTURE.md) and [gone](gone.md). The scan is in `src/topk/topk_scan.hpp:204`,\n"
        "`core/simd.hpp` and `topk_{scalar,avx2}.cpp`; `src/topk/no_such.cpp` and `nosuch_kernel.hpp` are not.\n"
        "Run `./llmk bench softmax-topk --only 64x128256x50` or `scripts/fetch-model NAME`; ratios 1/8, f32/f16.\n"
        "Prose names src/norm/norm_ref.cpp and tests/none/ and `build/src/x.o`.\n"
        "```sh\n./scripts/test   # then bench/no_bench.cpp\n```\n"
    )
    assert missing("docs/example.md", text) == [
        "code `nosuch_kernel.hpp`",
        "code `src/topk/no_such.cpp`",
        "link `gone.md`",
        "text `bench/no_bench.cpp`",
        "text `tests/none/`",
    ]
