"""An optional reranker: a cross-encoder server that reorders a search's best candidates.

Where the user runs one (``search.rerank_url``), the top ``search.rerank_top`` results are sent
to its ``/rerank`` endpoint in the request shape TEI, Jina, Cohere, vLLM and llama.cpp's server
all take (``query`` and the candidates as ``documents``, also as ``texts`` for TEI), and the
answer is read in either shape they give (``results: [{index, relevance_score}]``, or TEI's
``[{index, score}]``).  Nobody on a CPU pays for it by default: it is off unless a URL is set.

A reranker's scores mean nothing on memfs's scale, and memfs has no data to fit one it has not
seen, so they decide the order alone: the k-th result after reranking gets the k-th highest of
the candidates' calibrated probabilities.  The set of scores, hence whether the memory answers at
all (``min_score``), stays memfs's own; a reranker only says which of them answers best.  Within
``search.rerank_timeout_ms``, or the results keep memfs's order and say why.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from memfs.config import SearchConfig
from memfs.index.search.hybrid import SearchResult


class RerankFailed(RuntimeError):
    """The reranker could not be used for this search; the message says why, in one line."""


def endpoint(url: str) -> str:
    """The /rerank endpoint of a server's base URL (``http://host:8080`` or ``.../v1``), or the URL
    itself when it names the endpoint already."""
    url = url.rstrip("/")
    return url if url.endswith("/rerank") else f"{url}/rerank"


def _request(cfg: SearchConfig, query: str, texts: Sequence[str]) -> dict[str, Any] | list[Any]:
    body: dict[str, Any] = {"query": query, "documents": list(texts), "texts": list(texts), "top_n": len(texts),
                            "return_documents": False}
    if cfg.rerank_model:
        body["model"] = cfg.rerank_model
    headers = {"Content-Type": "application/json"}
    if cfg.rerank_api_key_env and (key := os.environ.get(cfg.rerank_api_key_env)):
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(endpoint(cfg.rerank_url), data=json.dumps(body).encode(), headers=headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=cfg.rerank_timeout_ms / 1000) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        raise RerankFailed(f"the reranker at {cfg.rerank_url} answered HTTP {exc.code}") from None
    except TimeoutError:
        raise RerankFailed(f"the reranker at {cfg.rerank_url} did not answer within "
                           f"{cfg.rerank_timeout_ms} ms") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            raise RerankFailed(f"the reranker at {cfg.rerank_url} did not answer within "
                               f"{cfg.rerank_timeout_ms} ms") from None
        raise RerankFailed(f"the reranker at {cfg.rerank_url} cannot be reached ({reason})") from None
    except ValueError:
        raise RerankFailed(f"the reranker at {cfg.rerank_url} answered something that is not JSON") from None


def relevance(answer: dict[str, Any] | list[Any], count: int) -> list[float]:
    """The reranker's score of each of ``count`` texts, in their order, from either answer shape."""
    rows = answer.get("results", answer.get("data")) if isinstance(answer, dict) else answer
    if not isinstance(rows, list):
        raise RerankFailed("the reranker's answer holds no results")
    scores: list[float | None] = [None] * count
    for row in rows:
        try:
            index = int(row["index"])
            value = float(row["relevance_score"] if "relevance_score" in row else row["score"])
        except (KeyError, TypeError, ValueError):
            raise RerankFailed("the reranker's answer holds a result without an index and a score") from None
        if 0 <= index < count:
            scores[index] = value
    if any(s is None for s in scores):
        raise RerankFailed(f"the reranker scored {sum(s is not None for s in scores)} of {count} texts")
    return [float(s) for s in scores]  # type: ignore[arg-type]


def rerank(cfg: SearchConfig, query: str, results: list[SearchResult]) -> tuple[list[SearchResult], float]:
    """``results`` in the reranker's order, each given the calibrated probability of its new rank
    (see the module's docstring), and the milliseconds it took; RerankFailed when it could not
    be used (the caller keeps memfs's order and says so)."""
    if len(results) < 2:
        return results, 0.0
    began = time.monotonic()
    texts = [f"{r.chat_title}\n{r.snippet}" if r.chat_title else r.snippet for r in results]
    scores = relevance(_request(cfg, query, texts), len(results))
    order = sorted(range(len(results)), key=lambda i: (-scores[i], i))
    probabilities = sorted((r.score for r in results), reverse=True)
    reordered = [dataclasses.replace(results[i], score=probabilities[rank], rerank=round(scores[i], 4))
                 for rank, i in enumerate(order)]
    return reordered, round((time.monotonic() - began) * 1000, 1)
