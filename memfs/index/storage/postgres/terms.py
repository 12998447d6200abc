"""The keyword statistics of the PostgreSQL index: what FTS5 keeps inside its index, kept in tables.

A chunk's keyword text is tokenised by SQLite's own FTS5 tokenizer (porter over unicode61, the
options of :data:`memfs.index.storage.sqlite.store.FTS_TOKENIZER`), through the in-memory FTS5 table and
``instance`` vocabulary of :func:`memfs.index.text.keywords.tokenized`, so the terms and the document
length are exactly the ones FTS5 counts for bm25 (the tokens never leave C one by one).  They are written as postings
(``memfs.chunk_terms``: tenant, chunk, term, tf, the chunk's length, private), and per tenant the
document frequency of each term (``memfs.term_df``) and the number of chunks and their total
length (``memfs.corpus_stats``), public and private apart as SQLite's two FTS tables keep them.
Both :func:`add` and :func:`remove` run in the caller's transaction, so statistics never disagree
with the postings.

Writers of one tenant (two mounts of one workspace) are serialised on the tenant's
``corpus_stats`` rows, locked first and always in the same order (public, then private): the
``term_df`` rows they then update cannot deadlock, and another tenant's writers never wait (a
role can only lock rows it may see, unlike an advisory lock any role could take on any key).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memfs.index.text.keywords import tokenized

if TYPE_CHECKING:
    import psycopg

@dataclass(frozen=True)
class Terms:
    """One text as FTS5 indexes it: each term's frequency and the number of tokens."""

    tf: dict[str, int]
    length: int


def tokenize(bodies: Sequence[str]) -> list[Terms]:
    """The terms of each body (the text FTS5 would be given: :func:`memfs.index.text.keywords.fts_body`)."""
    found: list[dict[str, int]] = [{} for _ in bodies]
    if not bodies:
        return []
    with tokenized(bodies) as conn:
        for doc, term, count in conn.execute("SELECT doc, term, count(*) FROM passage_terms GROUP BY doc, term"):
            found[doc][term] = count
    return [Terms(tf, sum(tf.values())) for tf in found]


def positions(bodies: Sequence[str]) -> list[dict[str, list[int]]]:
    """Each body's tokens and their positions (for phrases: FTS5's phrase is adjacent tokens)."""
    found: list[dict[str, list[int]]] = [{} for _ in bodies]
    if not bodies:
        return []
    with tokenized(bodies) as conn:
        for doc, term, offset in conn.execute("SELECT doc, term, offset FROM passage_terms"):
            found[doc].setdefault(term, []).append(offset)
    return found


def _lock(conn: psycopg.Connection, tenant_id: int, privacies: Iterable[bool]) -> None:
    """Make and lock the tenant's corpus_stats rows for these privacies, public first."""
    wanted = sorted(set(privacies))
    if not wanted:
        return
    conn.execute("INSERT INTO memfs.corpus_stats(tenant_id, private) SELECT %s, p FROM unnest(%s::boolean[]) p "
                 "ORDER BY p ON CONFLICT (tenant_id, private) DO NOTHING", (tenant_id, wanted))
    conn.execute("SELECT 1 FROM memfs.corpus_stats WHERE tenant_id = %s AND private = ANY (%s) "
                 "ORDER BY private FOR UPDATE", (tenant_id, wanted))


def add(conn: psycopg.Connection, tenant_id: int, chunks: Sequence[tuple[int, bool, Terms]]) -> None:
    """Postings and statistics of new chunks ``(chunk id, private, terms)``, in the caller's
    transaction (the chunk rows themselves, with ``length = terms.length``, are the caller's)."""
    if not chunks:
        return
    _lock(conn, tenant_id, (private for _, private, _ in chunks))
    ids, terms, tfs, privs, lengths = [], [], [], [], []
    df: dict[tuple[bool, str], int] = {}
    totals: dict[bool, list[int]] = {}
    for chunk_id, private, found in chunks:
        total = totals.setdefault(private, [0, 0])
        total[0] += 1
        total[1] += found.length
        for term, tf in found.tf.items():
            ids.append(chunk_id)
            terms.append(term)
            tfs.append(tf)
            privs.append(private)
            lengths.append(found.length)
            df[(private, term)] = df.get((private, term), 0) + 1
    # COPY FROM is refused on a table with row-level security: one INSERT of arrays instead.
    conn.execute("INSERT INTO memfs.chunk_terms(tenant_id, chunk_id, term, tf, private, length) "
                 "SELECT %s, * FROM unnest(%s::bigint[], %s::text[], %s::integer[], %s::boolean[], %s::integer[])",
                 (tenant_id, ids, terms, tfs, privs, lengths))
    keys = sorted(df)  # one order for every writer: no deadlock between two writers of a tenant
    conn.execute("INSERT INTO memfs.term_df(tenant_id, private, term, df) "
                 "SELECT %s, * FROM unnest(%s::boolean[], %s::text[], %s::integer[]) "
                 "ON CONFLICT (tenant_id, private, term) DO UPDATE SET df = memfs.term_df.df + excluded.df",
                 (tenant_id, [k[0] for k in keys], [k[1] for k in keys], [df[k] for k in keys]))
    for private, (count, length) in totals.items():
        conn.execute("UPDATE memfs.corpus_stats SET chunks = chunks + %s, total_length = total_length + %s "
                     "WHERE tenant_id = %s AND private = %s", (count, length, tenant_id, private))


def remove(conn: psycopg.Connection, tenant_id: int, chunk_ids: Sequence[int]) -> None:
    """Take chunks out of the postings and statistics, in the caller's transaction, before their
    rows leave ``memfs.chunks`` (their privacy and length are read from there)."""
    if not chunk_ids:
        return
    rows = conn.execute("SELECT private, count(*), coalesce(sum(length), 0) FROM memfs.chunks "
                        "WHERE tenant_id = %s AND chunk_id = ANY (%s) GROUP BY private",
                        (tenant_id, list(chunk_ids))).fetchall()
    if not rows:
        return
    _lock(conn, tenant_id, (bool(r[0]) for r in rows))
    gone = conn.execute("DELETE FROM memfs.chunk_terms WHERE tenant_id = %s AND chunk_id = ANY (%s) "
                        "RETURNING private, term", (tenant_id, list(chunk_ids))).fetchall()
    df: dict[tuple[bool, str], int] = {}
    for private, term in gone:
        df[(bool(private), term)] = df.get((bool(private), term), 0) + 1
    keys = sorted(df)
    if keys:
        # Rows that reach zero are removed: a term no chunk holds any more is as if never seen.
        args = ([k[0] for k in keys], [k[1] for k in keys], [df[k] for k in keys])
        conn.execute("UPDATE memfs.term_df d SET df = d.df - g.n "
                     "FROM unnest(%s::boolean[], %s::text[], %s::integer[]) AS g(private, term, n) "
                     "WHERE d.tenant_id = %s AND d.private = g.private AND d.term = g.term", (*args, tenant_id))
        # Rows that reach zero are removed: a term no chunk holds any more is as if never seen.
        conn.execute("DELETE FROM memfs.term_df WHERE tenant_id = %s AND df = 0 AND (private, term) IN "
                     "(SELECT * FROM unnest(%s::boolean[], %s::text[]))", (tenant_id, args[0], args[1]))
    for private, count, length in rows:
        conn.execute("UPDATE memfs.corpus_stats SET chunks = chunks - %s, total_length = total_length - %s "
                     "WHERE tenant_id = %s AND private = %s", (count, length, tenant_id, bool(private)))
