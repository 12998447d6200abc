"""The one typed configuration tree of memfs and where each value came from.

Values are layered, later layers winning: built-in defaults, a TOML file, environment variables,
then command-line overrides.  The layers are merged as raw values first and validated once by
pydantic, so every setting has one type and one range, and a bad value is reported with its key,
the reason and the layer it came from.  Every leaf remembers its source so `memfs config` can say
why a value is what it is.

Environment variables: ``MEMFS_<SECTION>_<KEY>`` (for example ``MEMFS_SEARCH_MIN_SCORE=0.2``),
plus the well-known ``MEMFS_WORKSPACE``, ``MEMFS_AGENT``, ``MEMFS_MODE``, ``MEMFS_STATE_DIR`` and
``MEMFS_CONFIG``.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import tomllib
import typing
import zoneinfo
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from memfs.mountinfo import memfs_mount_containing
from memfs.userdirs import CONFIG_FILE, config_file_candidates, default_state_dir, trusted_state_dir  # noqa: F401

log = logging.getLogger(__name__)
READ_WAIT_MS = 1000  # the most any read spends getting the freshest passages their vectors (services.searching)


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key and the source."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _zone(name: str) -> str:
    """A time zone name zoneinfo knows (empty: the machine's own)."""
    if name:
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {name!r}: use an IANA name such as 'UTC', 'Europe/Berlin' or "
                "'America/New_York' (see /usr/share/zoneinfo)"
            ) from None
    return name


def _split_list(value: Any) -> Any:
    """Lists come from TOML as lists, and from env/flags either as a TOML array
    (``["a", "b"]``) or as comma-separated text (``a,b``)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return tomllib.loads(f"value = {text}")["value"]
            except tomllib.TOMLDecodeError as exc:
                raise ValueError(f"{text!r} is not a TOML array ({exc}); write a,b or [\"a\", \"b\"]") from None
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


StrList = Annotated[list[str], Field(default_factory=list)]


class ChunkingConfig(_Section):
    tokens: int = Field(400, ge=16, le=8192, description="cl100k tokens per chunk")
    overlap: int = Field(80, ge=0, description="tokens shared by consecutive chunks")

    @model_validator(mode="after")
    def check_overlap(self) -> ChunkingConfig:
        if self.overlap >= self.tokens:
            raise ValueError("chunking.overlap must be smaller than chunking.tokens")
        return self


class SearchConfig(_Section):
    # Scores are calibrated probabilities (memfs/index/search/scoring.py): 0.5 is even odds that a
    # result is related rather than merely similar; 0.52, the default, is the lowest
    # threshold that kept held-out false positives under 25% on the LoCoMo dev set (scoring.py).
    min_score: float = Field(0.52, ge=0, le=1)
    max_results: int = Field(6, ge=1, le=100)
    # A snippet is the best-matching lines with what surrounds them, up to this many characters
    # (1200: the most that keeps a search's six results within the tokens whole chunks cost
    # before, 1,030; on the LoCoMo dev set 800 / 1000 / 1200 / 1400 gave R@6 .816 / .832 / .845
    # / .850 at 824 / 932 / 1014 / 1068 tokens).
    snippet_chars: int = Field(1200, ge=80, le=20_000)
    # How long a search may spend getting the freshest few passages still waiting (a note just
    # written, a mount's first seconds) their vectors: it embeds them itself (or waits for the
    # process embedding them), never a backlog, at most READ_WAIT_MS; 0: answer from what has
    # vectors now.  300 ms is a call of the local model for a few passages on 2 busy cores.
    pending_wait_ms: int = Field(300, ge=0, le=60_000)

    # An optional reranker (memfs.index.search.rerank): a cross-encoder server's /rerank endpoint
    # (TEI, Jina, Cohere, vLLM, llama.cpp) that reorders the best rerank_top candidates; off while
    # the URL is empty.  Never from a workspace's .memfs.toml (it reaches the network).
    rerank_url: str = ""
    rerank_model: str = ""  # sent as "model" when the server serves several
    rerank_api_key_env: str = ""  # the environment variable holding a bearer token, if the server wants one
    rerank_top: int = Field(20, ge=2, le=100)
    # Past this the reranker is skipped for that search, with a warning (results in memfs's order).
    rerank_timeout_ms: int = Field(1500, ge=50, le=60_000)

    @field_validator("pending_wait_ms")
    @classmethod
    def _capped(cls, value: int) -> int:
        if value > READ_WAIT_MS:
            log.warning("search.pending_wait_ms = %d: a read spends at most %d ms getting fresh passages their "
                        "vectors (it answers from what is embedded and says what is pending); using %d", value,
                        READ_WAIT_MS, READ_WAIT_MS)
            return READ_WAIT_MS
        return value


class EmbeddingConfig(_Section):
    provider: Literal["local", "openai", "none"] = "local"
    model: str = ""  # empty: the provider's default model
    model_path: str = ""  # local: another sentence-transformers style ONNX file
    tokenizer_path: str = ""  # local: its tokenizer.json
    base_url: str = ""  # openai: any OpenAI-compatible endpoint
    api_key_env: str = "OPENAI_API_KEY"
    dimensions: int = Field(0, ge=0, le=16_384)  # openai: 0 means the model's own size
    batch_size: int = Field(64, ge=1, le=4096)  # openai: texts per request
    concurrency: int = Field(4, ge=1, le=64)  # openai: requests in flight at once
    max_retries: int = Field(4, ge=0, le=20)
    timeout_s: float = Field(30.0, gt=0, le=3600)
    # local: the model is loaded once per user, in an embedding service every process asks
    # (memfs.index.embedding.service); false loads it in each process that embeds.
    service: bool = True
    # The service exits after this long with no request (its model holds 250-450 MB); the next
    # request starts it again in 1-2 s.
    service_idle_s: float = Field(900.0, ge=1, le=86_400 * 7)
    # Read each text once and make chunk vectors (and a unit's with its heading or chat title) as
    # token-weighted means of the parts' vectors, chats included: about a third of the model's
    # work (1.06 word pieces read per piece indexed on the LoCoMo dev set, 3.27 read whole), but
    # the mean misses what the model sees reading a message with its chat's title: sync chats lose
    # R@6 .834 -> .800 there.  The default reads Markdown this way already (late_chunking).
    read_once: bool = False
    # local: read each chunk once and make each unit's vector from the model's output states over
    # its span in the chunk, its heading or chat title included (memfs.index.embedding.late): ~1.1
    # word pieces read per piece indexed instead of 2.4-3.6.  "chats" (default) does it for JSONL
    # (sync chats, session transcripts), whose messages are turns of one conversation under a
    # title (dev set: sync R@6 .834 -> .838), and reads Markdown once (each unit alone, a chunk
    # the mean of its units, read_once's way: 1.08 pieces read per piece, dev-set daily logs
    # within .003 of reading whole on every recall figure, with constants of their own).  "auto"
    # reads Markdown late too but MEMORY.md: on the dev set's daily logs (each one conversation)
    # every recall figure rose, but a newcomer's daily log of unrelated entries lost its own
    # words' matches ("tyre pressure" .85 -> .44, under the threshold, beside the line saying
    # "tyre"): pooled with unrelated neighbours, an entry's meaning drowns in theirs, as MEMORY.md's
    # facts did.  "all" reads everything late, "off" everything whole (true/false are taken as
    # all/off).  read_once, when on, comes first; the openai provider (no output states) reads whole.
    late_chunking: Literal["auto", "chats", "all", "off"] = "chats"

    @field_validator("late_chunking", mode="before")
    @classmethod
    def _late_as_word(cls, value: object) -> object:
        word = str(value).strip().lower()
        if isinstance(value, bool) or word in ("true", "false"):
            return "all" if word == "true" else "off"
        return word if isinstance(value, str) else value

    def texts_per_call(self, default: int) -> int:
        """Texts worth handing the provider in one call: a server is kept busy only by
        ``concurrency`` requests of ``batch_size`` texts at once; for the local model ``default``
        (a caller's floor: the background embedder sizes its calls by their rate from there)."""
        return self.batch_size * self.concurrency if self.provider == "openai" else default


class IndexConfig(_Section):
    extra_paths: StrList  # glob patterns relative to the workspace
    max_file_mb: float = Field(64.0, gt=0, le=100_000)  # a 30 MB daily log imported whole is indexed
    # A write through the mount of at least this much new text (one file, or one sync batch) is
    # keyword-indexed before close() returns and chunked exactly after (see memfs.index.bigwrites);
    # below it everything happens before close() returns.
    defer_mb: float = Field(1.0, ge=0, le=100_000)
    # Where the index lives: "sqlite" (a file per workspace and agent in state_dir) or "postgres"
    # (one tenant of a PostgreSQL + pgvector database, memfs.index.storage.postgres), reached by ``dsn``: the
    # DSN `memfs pg grant` printed for this workspace and agent (else env MEMFS_PG_DSN).
    backend: Literal["sqlite", "postgres"] = "sqlite"
    dsn: str = ""
    # PostgreSQL: how long to wait for the server (connecting, or a statement whose server stopped
    # answering) before a read says the index is unavailable and a write's indexing is owed until
    # the server is back (memfs.index.storage.outage).  A stopped server is refused at once.
    timeout_s: float = Field(5.0, gt=0, le=3600)

    split_lists = field_validator("extra_paths", mode="before")(_split_list)

    @field_validator("backend", mode="before")
    @classmethod
    def _backend_word(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class BundleConfig(_Section):
    files: list[str] = Field(
        default_factory=lambda: [
            "AGENTS.md",
            "SOUL.md",
            "USER.md",
            "TOOLS.md",
            "memory/{today}.md",
            "memory/{yesterday}.md",
            "MEMORY.md",
        ]
    )
    # The whole rendered bundle (manifest, headers and markers included) stays within this.
    total_tokens: int = Field(8000, ge=300, le=1_000_000)
    per_file_tokens: int = Field(3000, ge=50, le=1_000_000)
    timezone: str = ""  # empty: the machine's local time zone

    split_lists = field_validator("files", mode="before")(_split_list)
    check_zone = field_validator("timezone")(_zone)

    @field_validator("files")
    @classmethod
    def check_placeholders(cls, files: list[str]) -> list[str]:
        for pattern in files:
            try:
                pattern.format(today="d", yesterday="d")
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(f"{pattern!r}: only {{today}} and {{yesterday}} may appear in braces ({exc})")
            if pattern.startswith(("/", "~")) or ".." in pattern.split("/"):
                raise ValueError(f"{pattern!r}: bundle files are paths inside the workspace (no '..', not absolute)")
        return files


class PrivacyConfig(_Section):
    # What exists only for the main mode (see memfs/privacy.py for how patterns match; the
    # long-term file, MEMORY.md or memory.md, is private whatever this says).  Session
    # transcripts are private by default: a main session's transcript holds what the agent read
    # from MEMORY.md and what was said in private.
    private_paths: list[str] = Field(default_factory=lambda: ["MEMORY.md", "memory.md", "sessions"])
    # The folders a shared-mode mount may change (daily logs and notes, the sync inbox); all the
    # rest (AGENTS.md and the other instructions, .memfs.toml, .git) is read-only to it.
    shared_writable: list[str] = Field(default_factory=lambda: ["memory", "clawgpt-memory"])

    split_lists = field_validator("private_paths", "shared_writable", mode="before")(_split_list)

    @field_validator("private_paths", "shared_writable")
    @classmethod
    def check_patterns(cls, patterns: list[str]) -> list[str]:
        cleaned = []
        for pattern in patterns:
            text = pattern.strip()
            parts = [p for p in text.split("/") if p]
            if not parts or text.startswith("/") or any(p in (".", "..") for p in parts if p != "**"):
                raise ValueError(f"{pattern!r} must be a path or glob pattern relative to the workspace, "
                                 "without '.' or '..' segments")
            cleaned.append("/".join(parts))
        return cleaned


class SyncConfig(_Section):
    timezone: str = "UTC"
    # The most one message may have, as its JSONL line (an envelope's: as the line it is stored
    # as): a chat message is a few KB, a long document pasted into one some hundreds.  Beyond it
    # a message is refused before it is parsed; a 60 MB one used to be stored and cost some 3
    # minutes of CPU to index and embed (76,536 chunks).  The same in every mode: what a shared
    # writer may cost is bounded by the same line, and a main writer's long document fits too.
    max_message_kb: int = Field(1024, ge=1, le=1_048_576)
    # The most one envelope may have, and what one `memfs sync` (or memory_sync) takes from
    # stdin in any form: a sync is what a client sends since its last one.  A file of JSONL lines
    # written into clawgpt-memory/ on a mount (an import of a year, 30 MB and more) is bounded
    # line by line only.
    max_envelope_mb: float = Field(32.0, gt=0, le=4096)

    check_zone = field_validator("timezone")(_zone)


class MountConfig(_Section):
    # The kernel may cache names and attributes this long; changes made beside the mount are
    # invalidated explicitly by the watcher, so the timeouts can be long.
    entry_timeout_s: float = Field(10.0, ge=0, le=86_400)
    attr_timeout_s: float = Field(10.0, ge=0, le=86_400)
    watch: bool = True  # watch the workspace for changes made beside the mount
    # Pass extended attributes through.  Off: they are unsupported (EOPNOTSUPP), which spares
    # the kernel's security.capability lookup before every write.
    xattrs: bool = False
    # After each request the daemon keeps polling this long for the next one instead of letting
    # its CPU go idle (see memfs/fs/busypoll.py); 0 turns it off.
    busy_poll_us: int = Field(1000, ge=0, le=100_000)
    # Take a FUSE request that is already waiting without a trip through trio's scheduler (see
    # memfs/fs/fuseloop.py); off: pyfuse3's own wait.
    quick_wait: bool = True
    # Kernel read-ahead for the mount (needs root; 0 leaves the kernel's 128 KiB).  Larger
    # read-ahead means fewer, larger FUSE read requests for sequential reads.
    read_ahead_kb: int = Field(1024, ge=0, le=65_536)
    # Where the virtual folders appear: "" puts search/, context/ and .memfs/ at the mount's root;
    # a folder name (".memfs") puts them all in it, so a workspace with real search/ or context/
    # folders can be mounted whole.
    virtual_prefix: str = ""
    # Let other users reach the mount (FUSE's allow_other; `memfs mount --allow-other`).  Off by
    # default, for root too: on, real files keep their modes (the kernel checks them) while the
    # virtual files, history/ and .memfs/ answer the mounting user alone.  Never from a workspace's
    # .memfs.toml (see WORKSPACE_SETTABLE).
    allow_other: bool = False

    @field_validator("virtual_prefix")
    @classmethod
    def check_prefix(cls, value: str) -> str:
        name = value.strip().strip("/")
        if value and (not name or "/" in name or name in (".", "..") or len(name.encode()) > 255):
            raise ValueError(f"{value!r} must be one folder name, such as '.memfs' or '_memfs'")
        return name


class HistoryConfig(_Section):
    # Every version of every memory file is kept (memfs/history/); these bound how long and how much.
    enabled: bool = True
    keep_days: float = Field(90.0, ge=0, le=36_500, description="versions older than this are pruned")
    max_mb: float = Field(512.0, gt=0, le=1_000_000, description="oldest versions pruned beyond this size")


class DaemonConfig(_Section):
    # A CLI command that needs the index, with no daemon serving its workspace, starts `memfs
    # serve` for it (detached) and asks it, so every later command is a socket round trip instead
    # of a new process loading the index.  Off: commands still ask a running daemon, never start one.
    on_demand: bool = True
    # A daemon started on demand stops after this many seconds without a request (and with no
    # client connected and nothing left to embed).  Ten minutes: an agent's turns and a person's
    # commands come minutes apart; a waiting daemon costs memory (its index, the model) but no
    # CPU, while every command after it has gone costs a new process (a quarter of a second or more).
    idle_s: float = Field(600.0, gt=0, le=7 * 86_400)


class RecallConfig(_Section):
    # What `memfs hook` hands an agent's runtime (Claude Code, Codex, Gemini CLI) as added context
    # on each prompt: the prompt searched, the results that pass search.min_score, within
    # max_tokens (cl100k), nothing when nothing passes.  Off by default: on real chats a third or
    # more of prompts unrelated to the memory still get a result past the threshold, and each
    # injection is text the model reads.  A preference of the user's, never a workspace file's:
    # it puts memory text into an agent's prompt (see WORKSPACE_SETTABLE).
    on_prompt: bool = False
    max_tokens: int = Field(400, ge=50, le=8000)


AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAIN_MODE = "main"
SHARED_MODE = "shared"


class Config(_Section):
    workspace: Path = Field(default_factory=lambda: Path.home() / "memfs")
    agent: str = "main"
    # main sees everything; any other mode is shared: private paths do not exist for it.
    mode: str = MAIN_MODE
    state_dir: Path = Field(default_factory=lambda: default_state_dir())
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    bundle: BundleConfig = Field(default_factory=BundleConfig)
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)
    sync: SyncConfig = Field(default_factory=SyncConfig)
    mount: MountConfig = Field(default_factory=MountConfig)
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    recall: RecallConfig = Field(default_factory=RecallConfig)

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("agent")
    @classmethod
    def check_agent(cls, value: str) -> str:
        if not AGENT_NAME.match(value):
            raise ValueError("not allowed: use letters, digits, '.', '_' or '-' (at most 64, not starting with a symbol)")
        return value

    @field_validator("mode")
    @classmethod
    def check_mode(cls, value: str) -> str:
        mode = value.strip().lower()  # "Main" and "MAIN" are main, like the README says
        if mode not in (MAIN_MODE, SHARED_MODE):
            # Unknown never means private: a typo must not open MEMORY.md to a group chat.
            log.warning("mode %r is not 'main': treated as shared", value)
            return SHARED_MODE
        return mode

    @property
    def sources(self) -> dict[str, str]:
        return self._sources

    def leaves(self) -> list[tuple[str, Any, str]]:
        """Every (dotted key, value, source) of the tree, in declaration order (a DSN's password
        left out: `memfs config` prints them)."""
        return [(key, without_password(value) if key == "index.dsn" else value, self._sources.get(key, "default"))
                for key, value in _walk(self)]


def _inside(path: Path, folder: Path) -> bool:
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))
    except OSError:
        return False


def without_password(dsn: str) -> str:
    """A DSN (key=value or URI form) with its password replaced by ``***``."""
    dsn = re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", dsn)
    return re.sub(r"^(\w+://[^:/@]*):[^@]*@", r"\1:***@", dsn)


WORKSPACE_MARKERS = ("MEMORY.md", "memory.md", "AGENTS.md", "memory", "clawgpt-memory")
# What a config file inside the workspace (its .memfs.toml) may set: preferences any writer of the
# workspace may safely choose, about how memory is read, cut, searched and bundled.  Whatever
# reaches the network, a credential, code or a model file, the database, the user's own folders
# or other users (provider, base_url, api_key_env, model_path, state_dir, index.backend and dsn,
# mount.allow_other, history's retention...) comes only from the user's config file, the
# environment or flags: a workspace may hold what an agent wrote.  A key ending in "." is a section.
WORKSPACE_SETTABLE = (
    "search.", "bundle.", "privacy.", "chunking.", "sync.timezone", "daemon.",
    "index.extra_paths", "index.max_file_mb", "index.defer_mb",
    "embedding.late_chunking", "embedding.read_once",
    "mount.virtual_prefix", "mount.entry_timeout_s", "mount.attr_timeout_s",
)


# Keys under an allowed section that a workspace's file may still not set.
WORKSPACE_REFUSED = ("search.rerank_",)


def workspace_may_set(key: str) -> bool:
    if key.startswith(WORKSPACE_REFUSED):
        return False
    return any(key == allowed or (allowed.endswith(".") and key.startswith(allowed))
               for allowed in WORKSPACE_SETTABLE)
# Environment variables that are not settings but are ours all the same.
OTHER_ENV = frozenset({"MEMFS_WORKSPACE", "MEMFS_CONFIG", "MEMFS_DEMO_DIR", "MEMFS_NO_DAEMON", "MEMFS_PG_DSN"})
# Settings renamed since they were introduced: the old key keeps working.
RENAMED = {"bundle.private_files": "privacy.private_paths"}
# Settings that no longer mean anything: accepted with a warning, so an old config still loads.
RETIRED = {
    "search.vector_weight": "scores are calibrated now (memfs/index/search/scoring.py)",
    "search.text_weight": "scores are calibrated now (memfs/index/search/scoring.py)",
    "search.candidate_multiplier": "the candidate pool no longer depends on the number of results",
}


def _walk(obj: BaseModel, prefix: str = "") -> typing.Iterator[tuple[str, Any]]:
    for name in type(obj).model_fields:
        value = getattr(obj, name)
        if isinstance(value, BaseModel):
            yield from _walk(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def _leaf_fields(model: type[BaseModel] = Config, prefix: str = "") -> dict[str, FieldInfo]:
    """Every settable dotted key and its field."""
    out: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.update(_leaf_fields(annotation, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = info
    return out


LEAVES = _leaf_fields()


class _Layers:
    """Raw values keyed by dotted key, with the layer each came from."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {}

    def set(self, key: str, value: Any, source: str) -> None:
        key = key.strip()
        if key in RENAMED:
            log.warning("setting %s is now called %s (from %s)", key, RENAMED[key], source)
            key = RENAMED[key]
        if key in RETIRED:
            log.warning("setting %s is no longer used: %s (from %s)", key, RETIRED[key], source)
            return
        if key not in LEAVES:
            hint = _closest(key)
            raise ConfigError(f"unknown setting {key!r} (from {source})" + (f": did you mean {hint!r}?" if hint else ""))
        self.values[key] = value
        self.sources[key] = source

    def tree(self) -> dict[str, Any]:
        nested: dict[str, Any] = {}
        for key, value in self.values.items():
            *sections, leaf = key.split(".")
            target = nested
            for section in sections:
                target = target.setdefault(section, {})
            target[leaf] = value
        return nested


def _closest(key: str) -> str | None:
    found = difflib.get_close_matches(key, list(LEAVES), n=1, cutoff=0.75)
    return found[0] if found else None


def _flatten(table: dict[str, Any], prefix: str = "") -> typing.Iterator[tuple[str, Any]]:
    for k, v in table.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def _env_key_map() -> dict[str, str]:
    """``MEMFS_SEARCH_MIN_SCORE`` -> ``search.min_score`` for every leaf of the tree."""
    mapping = {"MEMFS_" + key.replace(".", "_").upper(): key for key in LEAVES}
    mapping.pop("MEMFS_WORKSPACE", None)  # settled before the layers (it picks the TOML file)
    return mapping


def _explain(exc: ValidationError, layers: _Layers) -> ConfigError:
    """pydantic's errors as one line per bad setting: key, value, reason, source."""
    messages = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"])
        reason = error["msg"].removeprefix("Value error, ")
        source = layers.sources.get(key)
        if key in LEAVES and "input" in error:
            text = f"{key} = {error['input']!r}: {reason}"
        else:
            text = reason if reason.startswith(tuple(LEAVES)) or not key else f"{key}: {reason}"
        messages.append(text + (f" (from {source})" if source else ""))
    return ConfigError("; ".join(messages))


def _looks_like_workspace(directory: Path) -> bool:
    return any((directory / marker).exists() for marker in WORKSPACE_MARKERS)


def _writable_folders(workspace: Path) -> tuple[str, ...]:
    """The folders of ``workspace`` a shared-mode mount may change: the defaults, and those its
    own .memfs.toml adds (read as data: only to know where a shared writer could have been)."""
    folders = list(PrivacyConfig().shared_writable)
    try:
        table = tomllib.loads((workspace / CONFIG_FILE).read_text(encoding="utf-8"))
        extra = table.get("privacy", {}).get("shared_writable", [])
        folders += [str(f).strip("/") for f in extra if isinstance(f, str)] if isinstance(extra, list) else []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        pass
    return tuple(f for f in folders if f)


def find_workspace(start: Path) -> Path | None:
    """The workspace around ``start``: the nearest directory at or above it that looks like one
    (it holds MEMORY.md, AGENTS.md, memory/ ...), unless that directory lies inside a folder
    that a shared-mode writer of an outer workspace may change (memory/, clawgpt-memory/): such a
    writer can plant markers and a .memfs.toml there, and a command run in that folder must still
    take the outer workspace, its real root."""
    found = None
    for directory in (start, *start.parents):
        if not _looks_like_workspace(directory):
            continue
        if found is None:
            found = directory
            continue
        inner = found.relative_to(directory).parts
        if inner and inner[0] in {f.split("/")[0] for f in _writable_folders(directory)}:
            found = directory  # the nearer one was made inside this one's writable folders
    return found


def load_config(
    *,
    workspace: str | Path | None = None,
    agent: str | None = None,
    mode: str | None = None,
    config_file: str | Path | None = None,
    overrides: typing.Iterable[tuple[str, Any]] = (),
    env: typing.Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    """Build the effective configuration.

    ``workspace``, ``agent`` and ``mode`` are the command-line flags (None when not given);
    ``overrides`` are further ``key=value`` flags.  ``env`` defaults to ``os.environ``.
    """
    env = os.environ if env is None else env
    layers = _Layers()

    # The workspace decides which TOML file applies, so settle it first.
    if workspace is not None:
        ws, ws_source = Path(workspace), "flag --workspace"
    elif env.get("MEMFS_WORKSPACE"):
        ws, ws_source = Path(env["MEMFS_WORKSPACE"]), "env MEMFS_WORKSPACE"
    else:
        found = find_workspace((cwd or Path.cwd()).resolve())
        ws, ws_source = (found, "current directory") if found else (Path.home() / "memfs", "default")
    # resolve(): a workspace reached through a symlink is the same workspace (and the same index).
    ws = Path(os.path.expanduser(str(ws))).resolve()

    explicit = config_file or env.get("MEMFS_CONFIG")
    if explicit:
        path = Path(os.path.expanduser(str(explicit)))
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        files = [path]
    else:
        # The user's file first, the workspace's over it, setting by setting: a workspace that
        # only makes a path private must not drop the user's index.backend and index.dsn (it
        # used to replace the user's file, and commands searched an empty SQLite index).
        files = [p for p in reversed(config_file_candidates(ws)) if p.is_file()]
    for path in files:
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
        in_workspace = _inside(path, ws)
        for key, value in _flatten(table):
            if in_workspace and key == "index.dsn" and isinstance(value, str) and without_password(value) != value:
                # Every agent reads the workspace (a shared mount shows this file, grep -r finds
                # it): a login's password there hands any of them that login, private rows and all.
                raise ConfigError(f"{path} holds a PostgreSQL password (index.dsn): every agent that reads the "
                                  "workspace could use that login; put the DSN in MEMFS_PG_DSN or in "
                                  "~/.config/memfs/config.toml (--config), and give the login a new password "
                                  "(`memfs pg grant` again)")
            named = RENAMED.get(key.strip(), key.strip())
            if in_workspace and named in LEAVES and not workspace_may_set(named):
                log.warning("ignoring %s in %s: a workspace's file may not set it (it reaches the network, a "
                            "credential, code, the database or your own folders); set it in %s, the environment "
                            "or a flag", key, path, config_file_candidates(None)[0])
                continue
            layers.set(key, value, f"file {path}")

    known = _env_key_map()
    for name, key in sorted(known.items()):
        if name in env:
            layers.set(key, env[name], f"env {name}")
    for name in sorted(env):
        if name.startswith("MEMFS_") and name not in known and name not in OTHER_ENV:
            hint = difflib.get_close_matches(name, list(known), n=1, cutoff=0.8)
            log.warning("ignoring environment variable %s: no such setting%s", name,
                        f" (did you mean {hint[0]}?)" if hint else "")

    for key, value in overrides:
        layers.set(key, value, f"flag {key}")
    if agent is not None:
        layers.set("agent", agent, "flag --agent")
    if mode is not None:
        layers.set("mode", mode, "flag --mode")
    layers.set("workspace", ws, ws_source)

    try:
        cfg = Config.model_validate(layers.tree())
    except ValidationError as exc:
        raise _explain(exc, layers) from None
    cfg.sources.update(layers.sources)
    cfg.state_dir = Path(os.path.expanduser(str(cfg.state_dir))).resolve()
    if cfg.state_dir == ws or ws in cfg.state_dir.parents:
        # The index holds MEMORY.md's text: inside the workspace, a shared mount would show it.
        raise ConfigError(f"state_dir {cfg.state_dir} is inside the workspace {ws} "
                          f"(from {cfg.sources.get('state_dir', 'default')}): put it elsewhere")
    around = memfs_mount_containing(cfg.state_dir)
    if around is not None:
        # Written through a mount, the index (MEMORY.md's text) would land in that mount's workspace.
        raise ConfigError(f"state_dir {cfg.state_dir} is inside the memfs mount {around} "
                          f"(from {cfg.sources.get('state_dir', 'default')}): put it elsewhere")
    if cfg.index.backend == "postgres":
        _check_postgres(cfg, env)
    elif cfg.index.dsn or env.get("MEMFS_PG_DSN"):
        # A DSN without the backend (forgotten): the index would be a new, empty SQLite one.
        given = f"index.dsn (from {cfg.sources.get('index.dsn')})" if cfg.index.dsn else "MEMFS_PG_DSN"
        log.warning("%s is set but index.backend is sqlite: this uses the local SQLite index, not the server "
                    "(set index.backend = \"postgres\", or MEMFS_INDEX_BACKEND=postgres)", given)
    return cfg


def _check_postgres(cfg: Config, env: typing.Mapping[str, str]) -> None:
    """What can be known before connecting: a DSN to connect with, and the driver to do it."""
    import importlib.util

    if not cfg.index.dsn and env.get("MEMFS_PG_DSN"):
        cfg.index.dsn = env["MEMFS_PG_DSN"]
        cfg.sources["index.dsn"] = "env MEMFS_PG_DSN"
    try:
        driver = importlib.util.find_spec("psycopg")
    except ValueError:  # imported as None: hidden on purpose
        driver = None
    if driver is None:
        raise ConfigError("index.backend = postgres needs the PostgreSQL driver: pip install 'memfs[postgres]'")


def parse_override(text: str) -> tuple[str, str]:
    """``search.min_score=0.2`` -> ("search.min_score", "0.2")."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects KEY=VALUE, got {text!r}")
    return key.strip(), value
