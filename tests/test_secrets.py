"""memfs.index.text.secrets: every kind of credential is masked, nothing that only looks random is.

The corpus (tests/secrets_corpus.py) is made at run time: fake keys with each format's real
shape, and ordinary text full of hashes, UUIDs, base64 and code that names a password.
"""

from __future__ import annotations

import hashlib
import uuid

import pytest
from secrets_corpus import negatives, positives

from memfs.index.text import secrets

POSITIVES = positives(4)  # 4 of each kind here; test_measured_recall_and_precision takes 100 of each


@pytest.mark.parametrize("text, secret, kind", POSITIVES, ids=[f"{k}-{i}" for i, (_, _, k) in enumerate(POSITIVES)])
def test_every_kind_of_credential_is_masked(text, secret, kind):
    masked = secrets.mask(text)
    assert secret not in masked
    assert secrets.MARK in masked
    assert secret[12:] not in masked  # what is kept of a key is its head only, never enough to use it


def test_ordinary_text_is_left_alone():
    flagged = [(text, secrets.find(text)) for text in negatives() if secrets.mask(text) != text]
    assert flagged == []


def test_measured_recall_and_precision():
    pos, neg = positives(100, seed=1), negatives(seed=2)
    found = sum(1 for text, secret, _ in pos if secret not in secrets.mask(text))
    false = sum(len(secrets.find(t)) for t in neg)
    assert found == len(pos)
    assert false == 0


def test_mask_keeps_the_kind_readable():
    key = "sk-proj-" + "Ab1" * 20
    assert secrets.mask(f"export OPENAI_API_KEY={key}") == "export OPENAI_API_KEY=sk-proj-…[masked]"
    assert secrets.mask("password: hunter2!") == "password: …[masked]"
    assert secrets.mask("postgres://app:s3cr3tpass@db:5432/app") == "postgres://app:…[masked]@db:5432/app"
    assert secrets.mask("Authorization: Bearer abcdefghijklmnopqrstuvwx123") == "Authorization: Bearer …[masked]"
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + "A" * 64 + "\n-----END RSA PRIVATE KEY-----"
    assert secrets.mask(f"key:\n{pem}\ndone") == "key:\n-----BEGIN RSA PRIVATE KEY-----…[masked]\ndone"


def test_a_private_key_cut_off_before_its_end_is_masked_to_its_last_line():
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n" * 3 + "Then I ran ls."
    assert secrets.mask(text) == "-----BEGIN OPENSSH PRIVATE KEY-----…[masked]\nThen I ran ls."


def test_hashes_and_ids_next_to_a_secret_stay():
    sha = hashlib.sha256(b"x").hexdigest()
    u = str(uuid.uuid4())
    key = "ghp_" + "a1B2c3D4e5" * 4
    text = f"commit {sha[:40]} session {u} token {key} digest sha256:{sha}"
    masked = secrets.mask(text)
    assert sha[:40] in masked and u in masked and f"sha256:{sha}" in masked
    assert key not in masked and "ghp_…[masked]" in masked


def test_overlapping_rules_mask_once():
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    masked = secrets.mask(f"Authorization: Bearer {jwt}")
    assert masked.count(secrets.MARK) == 1 and jwt not in masked


def test_the_assignment_rules_gate_passes_every_text_its_pattern_would_match(monkeypatch):
    """The gate (a credential's name and an assignment, searched before the pattern) only spares
    the pattern's scan of text it could not match: ungated, every text finds the same."""
    import dataclasses

    texts = [t for t, _, _ in positives()] + negatives() + [
        "API_KEY : sk9f8a7s6d5f", "token=>'abcdef123'", "Password = \"hunter2!\"", "credentials: s3cr3tv4lue",
        "KEY\t=\tvalue12345", "client-secret=Zx81kd02", "accessToken: ghs123456789", "the key moment was the monkey",
        "my passwords are in the keychain", "tokens: 4096", "Ключ key=ЗначениеДлинное",
    ]
    gated = [secrets.find(t) for t in texts]
    monkeypatch.setattr(secrets, "RULES", tuple(dataclasses.replace(r, gate=None) for r in secrets.RULES))
    assert [secrets.find(t) for t in texts] == gated
    assert any(f.rule == "assignment" for found in gated for f in found)
