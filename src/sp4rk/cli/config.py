"""Configuration: command-line flags over ``sp4rk.toml`` (or ``[tool.sp4rk]``) over defaults.

``sp4rk.toml`` in the workspace, or a ``[tool.sp4rk]`` table in its ``pyproject.toml``::

    model = "anthropic:claude-sonnet-4-5"
    max_steps = 40
    approve = "ask"                      # ask | auto | never
    verify = "python -m pytest -x -q"    # run after every edit; the result goes to the model
    system = "prompts/agent.md"          # system prompt file, relative to the workspace
    context_tokens = 200000
    price = { input = 3.0, output = 15.0 }   # USD per million tokens (else sp4rk.llm.pricing)
    max_cost = 2.0                       # the run's budget: USD, input+output tokens,
    max_tokens = 500000                  # wall-clock time ("90s", "10m", "1h" or seconds)
    max_time = "30m"                     # and tool calls; each optional
    max_tool_calls = 200

    [mcp.docs]                           # MCP servers whose tools the run may use
    command = "docs-mcp"
    args = ["--root", "docs"]

The file is trusted configuration: it names commands sp4rk runs (``verify``, MCP servers).
Keys are checked: an unknown key or a value of the wrong type is an error naming the fix.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from sp4rk.cli.errors import CommandError, UsageProblem
from sp4rk.llm.pricing import ModelPrice, PriceTable

if TYPE_CHECKING:
    from sp4rk.agent import Budget

Approve = Literal["ask", "auto", "never"]
APPROVE_MODES: tuple[Approve, ...] = ("ask", "auto", "never")
#: The model used when neither a flag nor the configuration names one: the bundled one.
DEFAULT_MODEL = "local"
DEFAULT_MAX_STEPS = 30
#: Largest configuration file read, in bytes.
MAX_CONFIG_BYTES = 1 << 20

_KEYS: dict[str, type | tuple[type, ...]] = {
    "model": str,
    "base_url": str,
    "max_steps": int,
    "approve": str,
    "verify": str,
    "system": str,
    "context_tokens": int,
    "price": dict,
    "max_cost": float,
    "max_tokens": int,
    "max_time": float,
    "max_tool_calls": int,
    "mcp": dict,
}
#: The budget's settings, as the flags, the file and the store name them.
BUDGET_KEYS = ("max_cost", "max_tokens", "max_time", "max_tool_calls")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}
_MCP_KEYS: dict[str, type] = {
    "command": str,
    "args": list,
    "env": dict,
    "cwd": str,
    "url": str,
    "headers": dict,
    "policy": str,
    "confirm_destructive": bool,
    "call_timeout": float,
}


@dataclass(slots=True, kw_only=True)
class FileConfig:
    """The workspace's configuration as read: where from, and its checked values."""

    source: str = ""
    """``sp4rk.toml`` or ``pyproject.toml [tool.sp4rk]``; empty when there is none."""
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class Settings:
    """Everything a run is configured with, after flags, file and defaults are merged."""

    model: str = DEFAULT_MODEL
    base_url: str = ""
    max_steps: int = DEFAULT_MAX_STEPS
    approve: Approve = "ask"
    verify: str = ""
    system_prompt: str = ""
    context_tokens: int = 0
    """0: the model's usual window."""
    price: ModelPrice | None = None
    """What the model costs, when configured (else the price table's, if it knows it)."""
    max_cost: float | None = None
    """The run's budget (``None``: no such limit): USD, input+output tokens, seconds, calls."""
    max_tokens: int | None = None
    max_time: float | None = None
    max_tool_calls: int | None = None
    mcp: dict[str, dict[str, Any]] = field(default_factory=dict)

    def budget(self, prices: PriceTable) -> Budget:
        """The run's :class:`~sp4rk.agent.Budget`, pricing its calls with ``prices``."""
        from sp4rk.agent import Budget  # the command line's options load without the agent

        return Budget.from_limits(
            max_cost_usd=self.max_cost,
            max_tokens=self.max_tokens,
            max_seconds=self.max_time,
            max_tool_calls=self.max_tool_calls,
            prices=prices,
        )

    def to_store(self) -> dict[str, Any]:
        """What the runs store keeps (commands only for display: resume re-reads them)."""
        return {
            "base_url": self.base_url,
            "max_steps": self.max_steps,
            "approve": self.approve,
            "verify": self.verify,
            "system_prompt": self.system_prompt,
            "context_tokens": self.context_tokens,
            "price": {"input": self.price.input, "output": self.price.output}
            if self.price
            else None,
            **{key: getattr(self, key) for key in BUDGET_KEYS},
        }


def load_config(workspace: Path) -> FileConfig:
    """Read ``sp4rk.toml``, else ``[tool.sp4rk]`` of ``pyproject.toml``, in ``workspace``.

    Raises:
        CommandError: the file cannot be read, is not TOML, or has a bad key or value.
    """
    own = workspace / "sp4rk.toml"
    if own.exists():
        return FileConfig(source=str(own), values=_checked(_read_toml(own), str(own)))
    pyproject = workspace / "pyproject.toml"
    if pyproject.exists():
        table = _read_toml(pyproject).get("tool", {})
        section = table.get("sp4rk") if isinstance(table, dict) else None
        if section is not None:
            where = f"{pyproject} [tool.sp4rk]"
            if not isinstance(section, dict):
                raise CommandError(f"{where} must be a table; fix or remove it")
            return FileConfig(source=where, values=_checked(section, where))
    return FileConfig()


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise CommandError(f"cannot read {path}: larger than {MAX_CONFIG_BYTES} bytes")
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandError(
            f"cannot read {path}: {exc.strerror or exc}; fix its permissions"
        ) from exc
    except UnicodeDecodeError as exc:
        raise CommandError(f"cannot read {path}: it is not UTF-8 text") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CommandError(f"{path} is not valid TOML: {exc}; fix it and run again") from exc


def _checked(values: dict[str, Any], where: str) -> dict[str, Any]:
    for key, value in values.items():
        expected = _KEYS.get(key)
        if expected is None:
            raise CommandError(
                f"{where}: unknown key {key!r}; the keys are {', '.join(sorted(_KEYS))}"
            )
        if key in BUDGET_KEYS:
            continue  # checked below, with what each accepts
        if (isinstance(value, bool) and expected is int) or not isinstance(value, expected):
            raise CommandError(f"{where}: {key} must be {_type_name(expected)}")
    if "approve" in values and values["approve"] not in APPROVE_MODES:
        raise CommandError(f"{where}: approve must be one of {', '.join(APPROVE_MODES)}")
    if "max_steps" in values and values["max_steps"] < 1:
        raise CommandError(f"{where}: max_steps must be at least 1")
    if "price" in values:
        _price(values["price"], where)
    for key in BUDGET_KEYS:
        if key in values:
            try:
                _limit(key, values[key], key)
            except ValueError as exc:
                raise CommandError(f"{where}: {exc}") from None
    for name, server in values.get("mcp", {}).items():
        if not isinstance(server, dict):
            raise CommandError(f"{where}: mcp.{name} must be a table (command = ..., or url = ...)")
        for key, value in server.items():
            kind = _MCP_KEYS.get(key)
            if kind is None:
                raise CommandError(
                    f"{where}: mcp.{name}: unknown key {key!r}; the keys are "
                    f"{', '.join(sorted(_MCP_KEYS))}"
                )
            ok = isinstance(value, int | float) if kind is float else isinstance(value, kind)
            if not ok or (kind is not bool and isinstance(value, bool)):
                raise CommandError(f"{where}: mcp.{name}.{key} must be {_type_name(kind)}")
    return values


def _type_name(kind: type | tuple[type, ...]) -> str:
    names = {
        str: "a string",
        int: "an integer",
        dict: "a table",
        list: "a list",
        bool: "true or false",
        float: "a number",
    }
    return names.get(kind, "a value") if isinstance(kind, type) else "a value"


def _price(value: dict[str, Any], where: str) -> ModelPrice:
    if set(value) != {"input", "output"} or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        for v in value.values()
    ):
        raise CommandError(
            f"{where}: price must be {{ input = USD, output = USD }} per million tokens"
        )
    return ModelPrice(input=float(value["input"]), output=float(value["output"]))


def _limit(key: str, value: Any, name: str) -> float | int:
    """A budget setting checked: a positive number (``max_time`` also ``"90s"``, ``"10m"``).

    Raises:
        ValueError: naming the setting as ``name``.
    """
    if key == "max_time" and isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(f"{name} must be seconds or a duration like 90s, 10m or 1h")
        value = float(match[1]) * _UNIT_SECONDS[(match[2] or "").lower()]
    whole = key in ("max_tokens", "max_tool_calls")
    ok = isinstance(value, int) if whole else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be {'a whole number' if whole else 'a number'} above 0")
    return value if whole else float(value)


def resolve_settings(
    flags: dict[str, Any], config: FileConfig, workspace: Path, *, base: Settings | None = None
) -> Settings:
    """Merge: flags (``None`` = not given) over the file over ``base`` (or the defaults).

    Raises:
        UsageProblem: a flag has a bad value, or the system prompt file cannot be read.
        CommandError: the configuration's system prompt file cannot be read.
    """
    file = config.values
    settings = base if base is not None else Settings()

    def pick(name: str, key: str | None = None) -> Any:
        if flags.get(name) is not None:
            return flags[name]
        return file.get(key or name, getattr(settings, name))

    max_steps = pick("max_steps")
    if max_steps < 1:
        raise UsageProblem("--max-steps must be at least 1")
    approve = pick("approve")
    if approve not in APPROVE_MODES:
        raise UsageProblem(f"--approve must be one of {', '.join(APPROVE_MODES)}")
    limits: dict[str, Any] = {}
    for key in BUDGET_KEYS:
        value, given = pick(key), flags.get(key) is not None
        name = f"--{key.replace('_', '-')}" if given else f"{config.source or 'the store'}: {key}"
        try:
            limits[key] = None if value is None else _limit(key, value, name)
        except ValueError as exc:
            raise (UsageProblem if given else CommandError)(str(exc)) from None
    system_prompt = settings.system_prompt
    if flags.get("system"):
        system_prompt = _read_prompt(Path(flags["system"]), UsageProblem)
    elif "system" in file:
        system_prompt = _read_prompt(workspace / file["system"], CommandError)
    return Settings(
        model=pick("model"),
        base_url=pick("base_url"),
        max_steps=max_steps,
        approve=cast(Approve, approve),
        verify=pick("verify"),
        system_prompt=system_prompt,
        context_tokens=int(file.get("context_tokens", settings.context_tokens)),
        price=_price(file["price"], config.source) if "price" in file else settings.price,
        max_cost=limits["max_cost"],
        max_tokens=limits["max_tokens"],
        max_time=limits["max_time"],
        max_tool_calls=limits["max_tool_calls"],
        mcp=dict(file.get("mcp", {})),
    )


def _read_prompt(path: Path, error: type[CommandError]) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error(f"cannot read the system prompt {path}: {detail}") from exc


def stored_settings(stored: dict[str, Any]) -> Settings:
    """A run's settings as the store kept them (commands are not taken from it).

    The verify command and MCP servers are configuration, read again from the flags and the
    workspace on resume: the store never supplies anything that is executed.
    """
    price = stored.get("price")
    limits: dict[str, Any] = {}
    for key in BUDGET_KEYS:
        try:
            limits[key] = _limit(key, stored[key], key) if stored.get(key) else None
        except ValueError:
            limits[key] = None
    return Settings(
        base_url=str(stored.get("base_url") or ""),
        max_steps=_positive(stored.get("max_steps"), DEFAULT_MAX_STEPS),
        approve=cast(Approve, stored.get("approve"))
        if stored.get("approve") in APPROVE_MODES
        else "ask",
        system_prompt=str(stored.get("system_prompt") or ""),
        context_tokens=_positive(stored.get("context_tokens"), 0),
        price=_stored_price(price),
        **limits,
    )


def _stored_price(value: Any) -> ModelPrice | None:
    try:
        return _price(value, "the store") if isinstance(value, dict) else None
    except CommandError:
        return None


def _positive(value: Any, default: int) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
    )
