"""A corpus to measure memfs.index.text.secrets on: fake credentials of every kind the rules know, made
at run time with each format's real shape (prefix, alphabet, length) from a seeded generator,
set in the sentences people paste them in; and ordinary text full of what must NOT be masked
(commit ids, sha256 digests, UUIDs, base64 data, paths, code that names a password without
holding one).  No real key is in it: each is random, made here.

``positives(n)`` gives (text, secret, kind) triples; ``negatives()`` texts that hold no secret.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"


def _s(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _mixed(rng: random.Random, alphabet: str, n: int) -> str:
    """A random string with at least one digit, upper and lower letter (as real keys have)."""
    while True:
        s = _s(rng, alphabet, n)
        if any(c.isdigit() for c in s) and any(c.isupper() for c in s) and any(c.islower() for c in s):
            return s


def _jwt(rng: random.Random) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    header = part({"alg": "HS256", "typ": "JWT"})
    body = part({"sub": str(rng.randrange(10**6)), "name": "Test User", "iat": 1700000000 + rng.randrange(10**6)})
    return f"{header}.{body}.{_s(rng, B64URL, 43)}"


def _pem(rng: random.Random, kind: str) -> str:
    body = base64.b64encode(rng.randbytes(600)).decode()
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{lines}\n-----END {kind}PRIVATE KEY-----"


# kind -> (maker of a secret, templates it is pasted in; {s} is the secret)
def _kinds(rng: random.Random) -> dict:
    return {
        "openai": (lambda: "sk-" + _mixed(rng, ALNUM, 48),
                   ["export OPENAI_API_KEY={s}", "my key is {s} can you check why it fails?",
                    'client = OpenAI(api_key="{s}")']),
        "openai-project": (lambda: "sk-proj-" + _mixed(rng, B64URL, 156),
                           ["OPENAI_API_KEY={s}", "use this one: {s}"]),
        "anthropic": (lambda: "sk-ant-api03-" + _s(rng, B64URL, 93) + "AA",
                      ["ANTHROPIC_API_KEY={s} claude", "here's my anthropic key {s}"]),
        "github-classic": (lambda: "ghp_" + _s(rng, ALNUM, 36), ["git clone https://{s}@github.com/org/repo.git",
                                                                "GITHUB_TOKEN={s}", "token {s} expired?"]),
        "github-oauth": (lambda: "gho_" + _s(rng, ALNUM, 36), ["gh auth token printed {s}"]),
        "github-fine-grained": (lambda: "github_pat_" + _s(rng, ALNUM, 22) + "_" + _s(rng, ALNUM, 59),
                                ["export GH_TOKEN={s}", "PAT: {s}"]),
        "aws-access-key-id": (lambda: "AKIA" + _s(rng, string.ascii_uppercase + "234567", 16),
                              ["aws_access_key_id = {s}", "the key id {s} belongs to the ci user"]),
        "aws-secret-access-key": (lambda: _s(rng, ALNUM + "/+", 40),
                                  ["aws_secret_access_key = {s}", "AWS_SECRET_ACCESS_KEY={s}",
                                   '"SecretAccessKey": "{s}",']),
        "slack-bot": (lambda: f"xoxb-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-{_s(rng, ALNUM, 24)}",
                      ["SLACK_BOT_TOKEN={s}", "slack says invalid_auth for {s}"]),
        "slack-user": (lambda: f"xoxp-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**11, 10**12)}-"
                               f"{rng.randrange(10**12, 10**13)}-{_s(rng, '0123456789abcdef', 32)}",
                       ["token: {s}"]),
        "slack-app": (lambda: f"xapp-1-A{_s(rng, string.ascii_uppercase + string.digits, 10)}-{rng.randrange(10**12, 10**13)}-"
                              f"{_s(rng, '0123456789abcdef', 64)}", ["SLACK_APP_TOKEN={s}"]),
        "stripe": (lambda: "sk_live_" + _s(rng, ALNUM, 99), ["stripe.api_key = '{s}'", "STRIPE_SECRET={s}"]),
        "stripe-test": (lambda: "sk_test_" + _s(rng, ALNUM, 24), ["use {s} in the test env"]),
        "google-api-key": (lambda: "AIza" + _s(rng, B64URL, 35), ["https://maps.googleapis.com/maps/api/js?key={s}",
                                                                  "GOOGLE_API_KEY={s}"]),
        "jwt": (lambda: _jwt(rng), ["curl -H 'Authorization: Bearer {s}' https://api.example.com/me",
                                    "the session cookie was {s}"]),
        "private-key-rsa": (lambda: _pem(rng, "RSA "), ["cat ~/.ssh/id_rsa\n{s}\n"]),
        "private-key-openssh": (lambda: _pem(rng, "OPENSSH "), ["here is the deploy key:\n{s}"]),
        "private-key-pkcs8": (lambda: _pem(rng, ""), ["{s}"]),
        "password-assignment": (lambda: _s(rng, ALNUM + "!#%&*", 14),
                                ["DB_PASSWORD={s}", "password: {s}", 'passwd = "{s}"', '{{"password": "{s}"}}',
                                 "mysql -u root --password={s}"]),
        "secret-assignment": (lambda: _s(rng, ALNUM, 32), ["SECRET_KEY={s}", "client_secret: {s}",
                                                           "webhook secret={s}"]),
        "token-assignment": (lambda: _s(rng, ALNUM, 40), ["token={s}", "ACCESS_TOKEN: '{s}'", "?token={s}&page=2"]),
        "api-key-assignment": (lambda: _s(rng, "0123456789abcdef", 32), ["api_key={s}", "X-API-KEY: {s}",
                                                                          "apikey = {s}"]),
        "bearer": (lambda: _s(rng, ALNUM, 48), ["Authorization: Bearer {s}", "-H 'authorization: bearer {s}'",
                                                "send it with Bearer {s} in the header"]),
        "basic-auth": (lambda: base64.b64encode(f"admin:{_s(rng, ALNUM, 12)}".encode()).decode(),
                       ["Authorization: Basic {s}"]),
        "url-password": (lambda: _s(rng, ALNUM, 16), ["postgres://app:{s}@db.internal:5432/app",
                                                      "git remote add origin https://deploy:{s}@git.example.com/x.git",
                                                      "REDIS_URL=redis://default:{s}@localhost:6379"]),
    }


def positives(n: int = 20, seed: int = 7) -> list[tuple[str, str, str]]:
    """(text, secret, kind): ``n`` fake credentials of each kind, each in one of its templates."""
    rng = random.Random(seed)
    out = []
    for kind, (make, templates) in _kinds(rng).items():
        for i in range(n):
            secret = make()
            out.append((templates[i % len(templates)].format(s=secret), secret, kind))
    return out


def negatives(seed: int = 11) -> list[str]:
    """Ordinary text a transcript is full of, none of it a secret."""
    rng = random.Random(seed)
    texts = []
    for _ in range(40):
        sha1 = hashlib.sha1(rng.randbytes(16)).hexdigest()
        sha256 = hashlib.sha256(rng.randbytes(16)).hexdigest()
        u = uuid.UUID(int=rng.getrandbits(128), version=4)
        b64 = base64.b64encode(rng.randbytes(48)).decode()
        texts += [
            f"commit {sha1}\nAuthor: Ada <ada@example.com>",
            f"Merge pull request #12 from feature/x ({sha1[:7]})",
            f"sha256:{sha256}  dist/memfs-0.1.0.tar.gz",
            f"docker pull ghcr.io/org/app@sha256:{sha256}",
            f'{{"id": "{u}", "type": "user", "parentUuid": "{uuid.UUID(int=rng.getrandbits(128), version=4)}"}}',
            f"session {u} started",
            f"data:image/png;base64,{b64}",
            f"the fixture bytes are {b64}",
            f"/home/ada/.cache/pip/wheels/{sha1[:2]}/{sha1[2:]}/numpy-2.0.0-cp311-linux_x86_64.whl",
            f"integrity sha512-{base64.b64encode(hashlib.sha512(rng.randbytes(8)).digest()).decode()}",
            f"etag W/\"{sha1}\"",
            f"request id {u.hex}",
        ]
    texts += [
        "def login(user: str, password: str) -> Token:",
        "password = request.form['password']",
        "token = get_token()",
        "api_key=os.environ['OPENAI_API_KEY']",
        'api_key = os.getenv("OPENAI_API_KEY")',
        "secret_key = settings.SECRET_KEY",
        "password=password",
        "SECRET_KEY = env('SECRET_KEY')",
        "curl -H \"Authorization: Bearer $TOKEN\" https://api.github.com/user",
        "headers = {'Authorization': f'Bearer {token}'}",
        "max_tokens=4096, temperature=0.2",
        "token_count: 1532",
        "the password field must be at least 12 characters",
        "Passwords are hashed with argon2id; tokens expire after 15 minutes.",
        "POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}",
        "DATABASE_URL=postgres://user:password@localhost:5432/app",
        "password: <your password here>",
        "api_key: YOUR_API_KEY",
        "Set OPENAI_API_KEY in your environment, then run `memfs index`.",
        "The sk-learn style guide says nothing about this.",
        "ssh-keygen -t ed25519 -C ada@example.com",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEbHs0ODANBgkqhkiG9w0BAQsFADBsMRAwDgYDVQQGEwdV\n-----END CERTIFICATE-----",
        "git checkout -b feature/oauth-token-refresh",
        "src/auth/token_store.py:42: def refresh_token(self) -> str:",
        "ls ~/.aws && cat ~/.aws/config",
        "The AWS region is eu-west-1 and the bucket is my-bucket-logs.",
        "AKIA is the prefix of long-term AWS access key ids.",
        "https://github.com/openai/codex/blob/main/codex-rs/core/src/rollout/recorder.rs",
        "Bearer tokens are sent in the Authorization header.",
        "const secret = process.env.JWT_SECRET;",
        "password: str = Field(min_length=12)",
        "if not token: raise Unauthorized()",
        "pass  # nothing to do",
        "keyboard shortcuts: ctrl+k, ctrl+p",
        "The build id is 20240501.3 and the run is 8912345671.",
        "price_1NqX2eLkdIwHu7ixKc3s2f1A is a Stripe price id, not a key",
        "eyJ is how base64 JSON begins; the token itself was elided.",
        "xoxb tokens are bot tokens; we use the slack-sdk.",
        "npm install --save-dev @types/node@20.11.30",
        "http://localhost:8000/index.html?page=2&sort=asc",
        "user@host:~/src$ git log --oneline -3",
        "use crate::lexer::token::Token;",
        "--- PASS: TestParseConfig (0.00s)",
        "export type SignedToken = TokenClaims & { exp?: number };",
        "let me make sure the suite still passes: Bash: cargo test",
        "const accessToken = response.data.access_token;",
        "for token in tokens: print(token)",
        "bypass=true in the feature flags",
        'const secret = "test-secret";',
        "encrypted_content: gAAAAB" + "x1Yz-sk-" + "Ab3dEf9hIjKlMnOpQrStUvWxYz0123456789AbCdEf" + "_ghp_" + "A" * 36,
    ]
    return texts
