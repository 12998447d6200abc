"""Finding credentials in text and masking them before the text is kept or shown.

Agent sessions are full of pasted keys: an ``export OPENAI_API_KEY=sk-...`` in a prompt, a
``.env`` a tool printed, a curl with a bearer token.  memfs indexes those sessions, so what a
search shows must not hand the key on.  :func:`mask` replaces each secret with its recognisable
head and a mark (``sk-proj-…[masked]``): a reader still sees which key was used, not the key.

The rules are shapes, not entropy: a provider's key format (prefix, alphabet, length), a PEM
private key block, a credential assigned to a name that says it is one (``password=``,
``api_key:``, ``"token": "..."``), an Authorization header, a URL's ``user:password@``.  There
is deliberately no "high-entropy string" rule: git commit ids, sha256 digests, UUIDs and base64
data are high-entropy and are what transcripts are full of; masking them would destroy the text
people search for.  Measured on a generated corpus (tests/secrets_corpus.py; tests/test_secrets.py and
scripts/secrets_measure.py): every fake key of every rule is found, nothing in the
ordinary corpus (hashes, UUIDs, commit ids, base64, paths, code that names a password without
holding one) is masked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MARK = "…[masked]"


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    group: int = 0  # the group holding the secret (0: the whole match)
    keep: int = 0  # characters of the secret kept before the mark, so the key's kind stays readable
    # The rule only runs on text holding one of these (in the lower-cased text if ``lower``):
    # a substring test is a hundred times cheaper than a regular expression scan.
    triggers: tuple[str, ...] = ()
    lower: bool = False
    # Searched (in the same text as ``triggers``) before the pattern: a word as common as "key"
    # triggers the assignment rule on a third of ordinary notes, whose scan, from every
    # position, cost 0.16 ms of a 5 KB note's 4 ms close (issue #45); the gate is a name
    # followed by an assignment, and any match of the pattern holds one.
    gate: re.Pattern[str] | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    start: int  # the secret's span in the text
    end: int


def _re(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# A value assigned to a credential's name: quoted, anything but the quote; bare, up to a blank
# or a separator.  A bare value that is a placeholder or an expression ($VAR, ${...}, <...>,
# os.environ[...], a function call) is not a secret and is left alone (see _looks_like_code).
# The name starts at a word's start, after a separator (DB_PASSWORD) or at a camelCase hump
# (githubToken), never inside a word (bypass=).
_NAME = (r"(?:(?<![A-Za-z0-9])|(?<=[a-z0-9])(?=[A-Z]))"
         r"(?i:password|passwd|pwd|secret|secret[_-]?key|client[_-]?secret|token|access[_-]?token|"
         r"auth[_-]?token|refresh[_-]?token|api[_-]?key|apikey|access[_-]?key|secret[_-]?access[_-]?key|"
         r"private[_-]?key|credentials?)")

RULES: tuple[Rule, ...] = (
    Rule("private-key", _re(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
                            r"(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:\s*[A-Za-z0-9+/=]{16,})*)"),
         triggers=("PRIVATE KEY",)),
    Rule("anthropic", _re(r"(?<![A-Za-z0-9_-])sk-ant-[a-z]{2,8}\d{0,3}-[A-Za-z0-9_-]{20,}"), keep=14, triggers=("sk-ant-",)),
    Rule("openai", _re(r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-|None-)?(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Z])"
                       r"(?=[A-Za-z0-9_-]*[a-z])[A-Za-z0-9_-]{32,}"), keep=8, triggers=("sk-",)),
    Rule("github", _re(r"(?<![A-Za-z0-9_-])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{50,255})\b"), keep=4,
         triggers=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    Rule("aws-access-key-id", _re(r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16}\b"), keep=4,
         triggers=("AKIA", "ASIA", "ABIA", "ACCA", "A3T")),
    Rule("aws-secret-access-key", _re(r"(?i:aws)[A-Za-z0-9_.\- ]{0,30}?(?i:secret|key)[A-Za-z0-9_.\-\"' ]{0,20}?"
                                      r"[:=]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"), group=1,
         triggers=("aws",), lower=True),
    Rule("slack", _re(r"(?<![A-Za-z0-9_-])xox[abposr]-[0-9A-Za-z-]{10,}|\bxapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+|"
                      r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+"), keep=5,
         triggers=("xox", "xapp-", "hooks.slack.com")),
    Rule("stripe", _re(r"(?<![A-Za-z0-9_-])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,99}\b|\bwhsec_[A-Za-z0-9]{24,}\b"), keep=8,
         triggers=("_live_", "_test_", "whsec_")),
    Rule("google-api-key", _re(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), keep=4, triggers=("AIza",)),
    Rule("jwt", _re(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), keep=3, triggers=("eyJ",)),
    Rule("authorization", _re(r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer|basic|token)\s+"
                              r"([A-Za-z0-9._~+/=-]{8,})"), group=1, triggers=("authorization",), lower=True),
    Rule("bearer", _re(r"\b(?i:bearer)\s+([A-Za-z0-9._~+/-]{20,}=*)"), group=1, triggers=("bearer",), lower=True),
    Rule("url-password", _re(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s/:@\"'<>]{1,64}:([^\s/@\"'<>]{1,128})@"), group=1,
         triggers=("://",)),
    Rule("assignment", _re(_NAME + r"[\"']?\s*(?::=|=>|=|:(?!:))\s*(?:([\"'])(.{3,200}?)\1|([^\s\"',;)}\]]{4,200}))"),
         group=-1, triggers=("passw", "pwd", "secret", "token", "key", "credential"), lower=True,
         gate=re.compile(r"(?:password|passwd|pwd|secret|token|key|credentials?)[\"']?\s*(?::=|=>|=|:(?!:))")),
)

# Values that name a secret rather than hold one: placeholders, types, references.
_PLACEHOLDER = re.compile(
    r"^(?:[${<\[(]|%\(|%[A-Za-z_]+%|x{3,}|\.{3}|…|null$|none$|nil$|true$|false$|undefined$|str$|string$|bytes$|int$|"
    r"optional|required$|secret$|password$|changeme$|example|your[_-]|my[_-]|redacted|\*+$|"
    r"env\(|os\.environ|process\.env|getenv|"
    r"(?:test|dummy|fake|sample|example|placeholder|demo|dev)[-_]?(?:secret|password|passwd|token|key)?$)",
    re.IGNORECASE)
# A bare value that is itself a credential's name (password=password, key=DB_PASSWORD) is a
# variable holding the secret, not the secret.
_NAMES_A_SECRET = re.compile(r"pass|pwd|secret|token|key|credential|auth", re.IGNORECASE)
# Words of code that follow "token:" or "password =" without being a value.
_KEYWORDS = frozenset(["raise", "return", "pass", "none", "true", "false", "self", "continue", "break", "await", "yield", "lambda", "if", "else", "not", "and", "or", "in", "is", "const", "let", "var", "function", "def", "class", "new", "this", "null", "undefined", "nil"])
_CONSTANT = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_CAMEL = re.compile(r"^[A-Za-z][a-z]+(?:[A-Z][a-z]+)+$")  # JwtPayload, accessToken: a type or a variable


def _looks_like_code(value: str, quoted: bool) -> bool:
    """Whether an assigned value is a reference or placeholder, not a literal secret."""
    if _PLACEHOLDER.match(value) or (not quoted and value.lower() in _KEYWORDS):
        return True
    if "(" in value or value.endswith(")"):
        return True  # a call: get_token(), input("password: ")
    if quoted:
        return False  # a quoted literal given to a credential's name is the credential
    if value.isdigit() and len(value) < 12:
        return True  # max_tokens=4096, a port
    if "." in value and not any(c.isdigit() for c in value):
        return True  # an attribute: cfg.api_key, self.token, request.form
    if value.endswith(":") or "::" in value or _CAMEL.match(value):
        return True  # a label ("Bash:"), a path in code (crate::token), an identifier
    # A constant or variable named for a secret: SECRET_KEY, user_password.
    return bool(_CONSTANT.match(value) or (_NAMES_A_SECRET.search(value) and value.replace("_", "").isalpha()))


def find(text: str) -> list[Finding]:
    """The secrets in ``text``, by position, overlaps merged (the first rule to claim a span
    names it)."""
    found: list[Finding] = []
    lowered = text.lower()
    for rule in RULES:
        haystack = lowered if rule.lower else text
        if rule.triggers and not any(t in haystack for t in rule.triggers):
            continue
        if rule.gate is not None and rule.gate.search(haystack) is None:
            continue
        for m in rule.pattern.finditer(text):
            if rule.name == "assignment":
                quoted = m.group(2) is not None
                group = 2 if quoted else 3
                value = m.group(group)
                if _looks_like_code(value, quoted) or _already(found, m.start(group), m.end(group)):
                    continue
                found.append(Finding(rule.name, m.start(group), m.end(group)))
                continue
            start, end = m.span(rule.group)
            if rule.name == "url-password" and _PLACEHOLDER.match(m.group(1)):
                continue
            if not _already(found, start, end):
                found.append(Finding(rule.name, start, end))
    found.sort(key=lambda f: f.start)
    return found


def _already(found: list[Finding], start: int, end: int) -> bool:
    return any(f.start < end and start < f.end for f in found)


_KEEP = {rule.name: rule.keep for rule in RULES}


def mask(text: str) -> str:
    """``text`` with every secret :func:`find` finds replaced by its head and ``MARK``."""
    if not text:
        return text
    findings = find(text)
    if not findings:
        return text
    out: list[str] = []
    at = 0
    for f in findings:
        out.append(text[at:f.start])
        secret = text[f.start:f.end]
        if f.rule == "private-key":
            head = secret.split("-----", 2)
            out.append(f"-----{head[1]}-----{MARK}" if len(head) > 2 else MARK)
        else:
            out.append(secret[: _KEEP.get(f.rule, 0)] + MARK)
        at = f.end
    out.append(text[at:])
    return "".join(out)


def has_secret(text: str) -> bool:
    return bool(find(text))
