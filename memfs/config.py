"""The one typed configuration tree of memfs and where each value came from.

Values are layered, later layers winning: built-in defaults, a TOML file, environment variables,
then command-line overrides.  Every leaf remembers its source so `memfs config` can say why a value
is what it is.

Environment variables: ``MEMFS_<SECTION>_<KEY>`` (for example ``MEMFS_SEARCH_MIN_SCORE=0.2``),
plus the well-known ``MEMFS_WORKSPACE``, ``MEMFS_AGENT``, ``MEMFS_STATE_DIR`` and ``MEMFS_CONFIG``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key and the source."""


@dataclass
class ChunkingConfig:
    tokens: int = 400
    overlap: int = 80


@dataclass
class SearchConfig:
    # 0.5/0.5 (not the seeds' 0.7/0.3): measured better on LoCoMo, see memfs/index/search.py.
    vector_weight: float = 0.5
    text_weight: float = 0.5
    min_score: float = 0.35
    max_results: int = 6
    candidate_multiplier: int = 4
    snippet_chars: int = 700
    # How long a search waits for freshly written chunks to be embedded before answering.
    pending_wait_ms: int = 1000


@dataclass
class EmbeddingConfig:
    provider: str = "local"  # local | openai | none
    model: str = ""  # empty: the provider's default model
    model_path: str = ""  # local: another sentence-transformers style ONNX file
    tokenizer_path: str = ""  # local: its tokenizer.json
    base_url: str = ""  # openai: any OpenAI-compatible endpoint
    api_key_env: str = "OPENAI_API_KEY"
    dimensions: int = 0  # openai: 0 means the model's own size
    batch_size: int = 64
    max_retries: int = 4
    timeout_s: float = 30.0


@dataclass
class IndexConfig:
    extra_paths: list[str] = field(default_factory=list)  # glob patterns relative to the workspace
    max_file_mb: float = 20.0


@dataclass
class BundleConfig:
    files: list[str] = field(
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
    private_files: list[str] = field(default_factory=lambda: ["MEMORY.md"])
    total_tokens: int = 8000
    per_file_tokens: int = 3000
    timezone: str = ""  # empty: the machine's local time zone


@dataclass
class SyncConfig:
    timezone: str = "UTC"


@dataclass
class MountConfig:
    # The kernel may cache names and attributes this long; changes made beside the mount are
    # invalidated explicitly by the watcher, so the timeouts can be long.
    entry_timeout_s: float = 10.0
    attr_timeout_s: float = 10.0
    watch: bool = True  # watch the workspace for changes made beside the mount
    # Pass extended attributes through.  Off: they are unsupported (EOPNOTSUPP), which spares
    # the kernel's security.capability lookup before every write.
    xattrs: bool = False
    # After each request the daemon keeps polling this long for the next one instead of letting
    # its CPU go idle (see memfs/fs/busypoll.py); 0 turns it off.
    busy_poll_us: int = 1000
    # Kernel read-ahead for the mount (needs root; 0 leaves the kernel's 128 KiB).  Larger
    # read-ahead means fewer, larger FUSE read requests for sequential reads.
    read_ahead_kb: int = 1024


@dataclass
class Config:
    workspace: Path = field(default_factory=lambda: Path.home() / "memfs")
    agent: str = "main"
    state_dir: Path = field(default_factory=lambda: _default_state_dir())
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    bundle: BundleConfig = field(default_factory=BundleConfig)
    sync: SyncConfig = field(default_factory=SyncConfig)
    mount: MountConfig = field(default_factory=MountConfig)
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def index_path(self) -> Path:
        return self.state_dir / f"{self.agent}.sqlite"

    @property
    def cache_path(self) -> Path:
        return self.state_dir / f"{self.agent}.embcache.sqlite"

    def leaves(self) -> list[tuple[str, Any, str]]:
        """Every (dotted key, value, source) of the tree, in declaration order."""
        out: list[tuple[str, Any, str]] = []
        for key, value in _walk(self):
            out.append((key, value, self.sources.get(key, "default")))
        return out


AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
WORKSPACE_MARKERS = ("MEMORY.md", "AGENTS.md", "memory", "clawgpt-memory")


def _default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "memfs"


def _walk(obj: Any, prefix: str = "") -> typing.Iterator[tuple[str, Any]]:
    for f in dataclasses.fields(obj):
        if f.name == "sources":
            continue
        value = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            yield from _walk(value, key + ".")
        else:
            yield key, value


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(key: str, raw: Any, typ: Any, source: str) -> Any:
    """Turn a TOML value or an environment string into the declared type of ``key``."""
    origin = typing.get_origin(typ)
    try:
        if typ is Path:
            return Path(os.path.expanduser(str(raw)))
        if typ is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if typ is int:
            if isinstance(raw, bool):
                raise ValueError(raw)
            return int(raw)
        if typ is float:
            if isinstance(raw, bool):
                raise ValueError(raw)
            return float(raw)
        if typ is str:
            if not isinstance(raw, (str, int, float)):
                raise ValueError(raw)
            return str(raw)
        if origin in (list, types.GenericAlias) or origin is list:
            if isinstance(raw, str):
                return [p.strip() for p in raw.split(",") if p.strip()]
            if not isinstance(raw, list):
                raise ValueError(raw)
            return [str(x) for x in raw]
    except (TypeError, ValueError):
        pass
    else:
        raise ConfigError(f"{key}: unsupported type {typ!r} (from {source})")
    raise ConfigError(f"{key}: {raw!r} is not a valid {getattr(typ, '__name__', typ)} (from {source})")


def _set(cfg: Config, key: str, raw: Any, source: str) -> None:
    parts = key.split(".")
    target: Any = cfg
    for part in parts[:-1]:
        if not dataclasses.is_dataclass(target) or part not in _field_types(type(target)):
            raise ConfigError(f"unknown setting {key!r} (from {source})")
        target = getattr(target, part)
    leaf = parts[-1]
    hints = _field_types(type(target)) if dataclasses.is_dataclass(target) else {}
    if leaf not in hints or leaf == "sources" or dataclasses.is_dataclass(getattr(target, leaf)):
        raise ConfigError(f"unknown setting {key!r} (from {source})")
    setattr(target, leaf, _coerce(key, raw, hints[leaf], source))
    cfg.sources[key] = source


def _flatten(table: dict[str, Any], prefix: str = "") -> typing.Iterator[tuple[str, Any]]:
    for k, v in table.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def _env_key_map() -> dict[str, str]:
    """``MEMFS_SEARCH_MIN_SCORE`` -> ``search.min_score`` for every leaf of the tree."""
    mapping: dict[str, str] = {}
    for key, _ in _walk(Config()):
        mapping["MEMFS_" + key.replace(".", "_").upper()] = key
    mapping["MEMFS_STATE_DIR"] = "state_dir"
    return mapping


def find_workspace(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` that looks like a memory workspace."""
    for directory in (start, *start.parents):
        if any((directory / marker).exists() for marker in WORKSPACE_MARKERS):
            return directory
    return None


def config_file_candidates(workspace: Path | None) -> list[Path]:
    paths: list[Path] = []
    if workspace is not None:
        paths.append(workspace / ".memfs.toml")
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    paths.append(Path(xdg) / "memfs" / "config.toml")
    return paths


def load_config(
    *,
    workspace: str | Path | None = None,
    agent: str | None = None,
    config_file: str | Path | None = None,
    overrides: typing.Iterable[tuple[str, Any]] = (),
    env: typing.Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    """Build the effective configuration.

    ``workspace`` and ``agent`` are the command-line flags (None when not given); ``overrides`` are
    further ``key=value`` flags.  ``env`` defaults to ``os.environ``.
    """
    env = os.environ if env is None else env
    cfg = Config()

    # The workspace decides which TOML file applies, so settle it first.
    if workspace is not None:
        ws, ws_source = Path(workspace), "flag --workspace"
    elif env.get("MEMFS_WORKSPACE"):
        ws, ws_source = Path(env["MEMFS_WORKSPACE"]), "env MEMFS_WORKSPACE"
    else:
        found = find_workspace((cwd or Path.cwd()).resolve())
        ws, ws_source = (found, "current directory") if found else (cfg.workspace, "default")
    ws = Path(os.path.expanduser(str(ws))).resolve()

    explicit = config_file or env.get("MEMFS_CONFIG")
    if explicit:
        path = Path(os.path.expanduser(str(explicit)))
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        files = [path]
    else:
        files = [p for p in config_file_candidates(ws) if p.is_file()][:1]
    for path in files:
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
        for key, value in _flatten(table):
            _set(cfg, key, value, f"file {path}")

    key_map = _env_key_map()
    for name, value in sorted(env.items()):
        if name in ("MEMFS_WORKSPACE", "MEMFS_CONFIG", "MEMFS_AGENT"):
            continue
        if name.startswith("MEMFS_") and name in key_map:
            _set(cfg, key_map[name], value, f"env {name}")
    if env.get("MEMFS_AGENT"):
        _set(cfg, "agent", env["MEMFS_AGENT"], "env MEMFS_AGENT")

    for key, value in overrides:
        _set(cfg, key, value, f"flag {key}")
    if agent is not None:
        _set(cfg, "agent", agent, "flag --agent")

    cfg.workspace = ws
    cfg.sources["workspace"] = ws_source
    cfg.state_dir = Path(os.path.expanduser(str(cfg.state_dir))).resolve()
    validate(cfg)
    return cfg


def validate(cfg: Config) -> None:
    if not AGENT_NAME.match(cfg.agent):
        raise ConfigError(
            f"agent name {cfg.agent!r} is not allowed: use letters, digits, '.', '_' or '-' (max 64)"
        )
    if cfg.chunking.tokens < 16:
        raise ConfigError("chunking.tokens must be at least 16")
    if not 0 <= cfg.chunking.overlap < cfg.chunking.tokens:
        raise ConfigError("chunking.overlap must be >= 0 and smaller than chunking.tokens")
    if cfg.search.vector_weight < 0 or cfg.search.text_weight < 0:
        raise ConfigError("search weights must not be negative")
    if cfg.search.vector_weight + cfg.search.text_weight <= 0:
        raise ConfigError("search.vector_weight + search.text_weight must be positive")
    if cfg.search.max_results < 1 or cfg.search.candidate_multiplier < 1:
        raise ConfigError("search.max_results and search.candidate_multiplier must be at least 1")
    if cfg.embedding.provider not in ("local", "openai", "none"):
        raise ConfigError(
            f"embedding.provider {cfg.embedding.provider!r} is unknown: use local, openai or none"
        )
    if cfg.bundle.total_tokens < 100 or cfg.bundle.per_file_tokens < 50:
        raise ConfigError("bundle.total_tokens must be >= 100 and bundle.per_file_tokens >= 50")


def parse_override(text: str) -> tuple[str, str]:
    """``search.min_score=0.2`` -> ("search.min_score", "0.2")."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects KEY=VALUE, got {text!r}")
    return key.strip(), value
