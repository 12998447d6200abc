"""Keyword search on PostgreSQL that ranks and scores exactly as SQLite FTS5's ``bm25()``.

The query is the MATCH expression memfs builds (:func:`memfs.index.text.keywords.match_expression`):
quoted phrases joined by ``OR``, nothing else (any other syntax is refused with ValueError).
Each phrase is tokenised by FTS5's own tokenizer (:mod:`memfs.index.storage.postgres.terms`), as FTS5 itself
tokenises a quoted string, and FTS5's formula (sqlite ext/fts5/fts5_aux.c) is computed over
the stored statistics of the tenant's public or private chunks:

    score = -sum over phrases i of idf_i * tf_i * (k1 + 1) / (tf_i + k1 * (1 - b + b * dl / avgdl))
    idf_i = ln((N - n_i + 0.5) / (n_i + 0.5)), or 1e-6 where that is not above 0
    k1 = 1.2, b = 0.75, N = chunks, avgdl = their total length / N, dl = the chunk's length

Two query terms that stem alike ("runs", "running") are two phrases and count twice, as in
FTS5.  Public and private chunks are ranked each with their own statistics and the two lists
merged, as :meth:`memfs.index.storage.sqlite.store.Store.keyword_candidates` merges its two FTS tables.

Every statement names the tenant (``tenant_id = %s``, a literal value since connections do not
prepare statements), so the planner reads the tenant's partition alone, and reads only btree
indexes (equality on text is leakproof: a GIN index on a tsvector is not used under RLS).  A
phrase of one token (every Latin word) is a posting lookup in SQL; a phrase of several tokens (a
CJK run) is found from the postings of its tokens and confirmed by token positions, re-read from
the texts of the chunks that hold all of them (rare, and slower on large CJK tenants).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memfs.index.storage.postgres.terms import positions
from memfs.index.text.keywords import fts_body, query_tokens

if TYPE_CHECKING:
    import psycopg

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's clamp for a term in half the chunks or more

_PHRASE = re.compile(r'"((?:[^"]|"")*)"')

def phrases(match: str) -> list[tuple[str, ...]]:
    """The phrases of a MATCH expression of quoted strings joined by OR, each as the tokens FTS5
    makes of it (a phrase with no token is dropped: it matches nothing and adds nothing)."""
    found: list[tuple[str, ...]] = []
    position = 0
    for index, hit in enumerate(_PHRASE.finditer(match)):
        between = match[position:hit.start()]
        if between != ("" if index == 0 else " OR "):
            raise ValueError(f"not a MATCH expression of quoted phrases joined by OR: {match!r}")
        position = hit.end()
        text = hit.group(1).replace('""', '"')
        tokens = query_tokens(text)
        if tokens:
            found.append(tuple(tokens))
    if position != len(match) or not match:
        raise ValueError(f"not a MATCH expression of quoted phrases joined by OR: {match!r}")
    return found


# One query per privacy: the statistics, each phrase's idf (its df from term_df for one token, or
# given for a longer phrase), the postings of one-token phrases (one index range each) plus the
# longer phrases' hits found in Python, and the sum per chunk.  Arithmetic in float8 throughout,
# in FTS5's order of operations.
_SQL = """
WITH stats AS MATERIALIZED (
    SELECT chunks::float8 AS n, total_length::float8 / chunks::float8 AS avgdl
    FROM memfs.corpus_stats WHERE tenant_id = %(tenant)s::bigint AND private = %(private)s AND chunks > 0),
known AS MATERIALIZED (
    SELECT term, df FROM memfs.term_df
    WHERE tenant_id = %(tenant)s::bigint AND private = %(private)s AND term = ANY (%(terms)s::text[])),
w AS MATERIALIZED (
    SELECT p.ord, p.term, CASE WHEN x.idf > 0 THEN x.idf ELSE %(floor)s::float8 END AS idf
    FROM unnest(%(terms)s::text[], %(dfs)s::integer[]) WITH ORDINALITY AS p(term, df, ord)
    CROSS JOIN stats s
    LEFT JOIN known k ON k.term = p.term
    CROSS JOIN LATERAL (SELECT coalesce(p.df, k.df, 0)::float8 AS df) f
    CROSS JOIN LATERAL (SELECT ln((s.n - f.df + 0.5::float8) / (f.df + 0.5::float8)) AS idf) x),
postings AS MATERIALIZED (
    SELECT c.term, c.chunk_id, c.tf, c.length FROM memfs.chunk_terms c
    WHERE c.tenant_id = %(tenant)s::bigint AND c.private = %(private)s AND c.term = ANY (%(terms)s::text[])),
hits AS (
    SELECT w.ord, po.chunk_id, po.tf::float8 AS tf, po.length::float8 AS dl
    FROM postings po JOIN w ON w.term = po.term
    UNION ALL
    SELECT * FROM unnest(%(hit_ord)s::bigint[], %(hit_chunk)s::bigint[], %(hit_tf)s::float8[], %(hit_dl)s::float8[]))
SELECT h.chunk_id,
       -sum(w.idf * ((h.tf * (%(k1)s::float8 + 1.0::float8)) /
                     (h.tf + %(k1)s::float8 * (1.0::float8 - %(b)s::float8 + %(b)s::float8 * h.dl / s.avgdl)))) AS score
FROM hits h JOIN w USING (ord) CROSS JOIN stats s
WHERE %(among)s::bigint[] IS NULL OR h.chunk_id = ANY (%(among)s::bigint[])
GROUP BY h.chunk_id
ORDER BY score, h.chunk_id
LIMIT %(limit)s
"""


def _phrase_hits(conn: psycopg.Connection, tenant_id: int, private: bool,
                 phrase: tuple[str, ...]) -> dict[int, tuple[int, int]]:
    """chunk id -> (instances of the phrase, chunk length) for a phrase of several tokens."""
    distinct = sorted(set(phrase))
    rows = conn.execute(
        "SELECT c.chunk_id, c.text, c.length FROM memfs.chunks c WHERE c.tenant_id = %s AND c.private = %s "
        "AND c.chunk_id IN (SELECT t.chunk_id FROM memfs.chunk_terms t WHERE t.tenant_id = %s AND t.private = %s "
        "AND t.term = ANY (%s) GROUP BY t.chunk_id HAVING count(*) = %s)",
        (tenant_id, private, tenant_id, private, distinct, len(distinct))).fetchall()
    found: dict[int, tuple[int, int]] = {}
    for (chunk_id, _, length), where in zip(rows, positions([fts_body(r[1]) for r in rows])):
        starts = set(where.get(phrase[0], ()))
        for step, token in enumerate(phrase[1:], 1):
            starts &= {p - step for p in where.get(token, ())}
        if starts:
            found[int(chunk_id)] = (len(starts), int(length))
    return found


def _ranked(conn: psycopg.Connection, tenant_id: int, private: bool, found: Sequence[tuple[str, ...]],
            limit: int, among: Sequence[int] | None = None) -> list[tuple[int, float]]:
    terms: list[str | None] = []
    dfs: list[int | None] = []
    hit_ord: list[int] = []
    hit_chunk: list[int] = []
    hit_tf: list[float] = []
    hit_dl: list[float] = []
    for ord_, phrase in enumerate(found, 1):
        if len(phrase) == 1:
            terms.append(phrase[0])
            dfs.append(None)
            continue
        hits = _phrase_hits(conn, tenant_id, private, phrase)
        terms.append(None)
        dfs.append(len(hits))
        for chunk_id, (tf, dl) in hits.items():
            hit_ord.append(ord_)
            hit_chunk.append(chunk_id)
            hit_tf.append(float(tf))
            hit_dl.append(float(dl))
    rows = conn.execute(_SQL, {
        "tenant": int(tenant_id), "private": private, "terms": terms, "dfs": dfs, "floor": IDF_FLOOR,
        "hit_ord": hit_ord, "hit_chunk": hit_chunk, "hit_tf": hit_tf, "hit_dl": hit_dl,
        "k1": K1, "b": B, "limit": limit,
        "among": None if among is None else list(among)}).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def keyword_candidates(conn: psycopg.Connection, tenant_id: int, match: str, limit: int,
                       include_private: bool = True, among: Sequence[int] | None = None) -> list[tuple[int, float]]:
    """(chunk id, bm25) of the tenant's chunks, best first: bm25 is negative, more negative is
    better, equal to what FTS5's ``bm25()`` gives for the same chunks and MATCH expression.
    ``among``: only these chunks are ranked (a scoped search), with the statistics of them all,
    as FTS5 ranks the rows a join leaves."""
    found = phrases(match)
    if not found or limit <= 0:
        return []
    ranked: list[tuple[int, float]] = []
    for private in ((False, True) if include_private else (False,)):
        ranked += _ranked(conn, tenant_id, private, found, limit, among)
    ranked.sort(key=lambda item: (item[1], item[0]))
    return ranked[:limit]


def doc_frequencies(conn: psycopg.Connection, tenant_id: int, terms: Sequence[str],
                    include_private: bool = True) -> tuple[dict[str, int], int]:
    """How many of the tenant's chunks hold each (stemmed) term, and how many chunks there are,
    as :meth:`memfs.index.storage.sqlite.store.Store.doc_frequencies` answers."""
    privacies = [False, True] if include_private else [False]
    # One statement (the total rides along each row, or alone when no term is known).
    rows = conn.execute(
        "WITH total AS (SELECT coalesce(sum(chunks), 0) AS n FROM memfs.corpus_stats WHERE tenant_id = %(t)s "
        "AND private = ANY (%(p)s)), df AS (SELECT term, sum(df) AS df FROM memfs.term_df WHERE tenant_id = %(t)s "
        "AND private = ANY (%(p)s) AND term = ANY (%(terms)s) GROUP BY term) "
        "SELECT total.n, df.term, df.df FROM total LEFT JOIN df ON true",
        {"t": tenant_id, "p": privacies, "terms": list(terms)}).fetchall()
    counts = {r[1]: r[2] for r in rows if r[1] is not None}
    return {t: int(counts.get(t, 0)) for t in terms}, int(rows[0][0])
