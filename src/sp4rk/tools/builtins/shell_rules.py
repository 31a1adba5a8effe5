"""The rule set that decides which ``bash_exec`` commands need a human's approval.

``bash_exec`` runs commands that stay inside the workspace and offline without asking; a
command needs approval when any rule below matches. The rules are a speed bump for a model
that means well, not a sandbox: a determined program can reach the network or the rest of
the file system in ways no static reading of a command line can see (``python -c``, a
script it wrote). Contain untrusted agents with a container or VM as well.

Rules, each checked on every simple command (after ``;``, ``&&``, ``||``, ``|``, ``&``, a
newline, ``(``, and inside ``$(...)``, backticks and ``sh -c "..."``):

1. **Network** — the program reaches the network: ``curl``, ``wget``, ``ssh``, ``scp``,
   ``rsync``, ``nc`` and friends (:data:`NETWORK_PROGRAMS`); a package or repository command
   that downloads or uploads (``pip install``, ``npm install``, ``git clone/fetch/pull/push``,
   ``docker pull`` …, :data:`NETWORK_SUBCOMMANDS`); or ``/dev/tcp`` / ``/dev/udp``.
2. **System** — the program changes the system or other processes: ``sudo``, ``su``,
   system package managers, ``mount``, ``systemctl``, ``kill``, ``crontab``, ``mkfs``,
   ``dd``, ``shutdown`` … (:data:`SYSTEM_PROGRAMS`).
3. **Outside paths** — an argument, option value (``--out=/x``), assignment (``X=/y``) or
   redirection target names a path that resolves (``..`` and symlinks included) outside the
   workspace and the extra roots (the system temporary directory counts as outside: other
   programs and users share it). ``~``, ``$HOME`` and
   ``${HOME}`` count as the home directory. The program's own path (``/usr/bin/python3``) and
   harmless devices (``/dev/null``, ``/dev/stdout`` …) are exempt.
4. **Opaque** — the command cannot be judged: unbalanced quotes, ``eval``, ``~user``, or
   substitutions nested too deeply.

Everything else runs without approval, including commands that delete or rewrite files
inside the workspace.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Programs whose purpose is network access.
NETWORK_PROGRAMS = frozenset(
    {
        "curl", "wget", "ssh", "scp", "sftp", "ftp", "rsync", "nc", "ncat", "netcat",
        "socat", "telnet", "ping", "ping6", "dig", "nslookup", "host", "whois",
        "traceroute", "tracepath", "mosh", "aria2c", "http", "https", "httpie", "lynx",
        "w3m", "links", "npx", "pipx", "gh", "hub", "az", "aws", "gcloud", "gsutil",
        "kubectl", "helm", "terraform",
    }
)  # fmt: skip
#: Programs whose listed subcommands reach the network.
NETWORK_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "git": frozenset({"clone", "fetch", "pull", "push", "ls-remote", "submodule"}),
    "pip": frozenset({"install", "download", "wheel", "index", "search"}),
    "uv": frozenset({"pip", "add", "sync", "lock", "tool", "run", "python", "venv"}),
    "poetry": frozenset({"add", "install", "update", "lock", "publish", "self"}),
    "npm": frozenset({"install", "i", "ci", "add", "update", "publish", "exec", "x", "view"}),
    "yarn": frozenset({"", "install", "add", "upgrade", "dlx", "publish", "up"}),
    "pnpm": frozenset({"install", "i", "add", "update", "dlx", "publish", "up"}),
    "gem": frozenset({"install", "update", "push", "fetch"}),
    "bundle": frozenset({"install", "update"}),
    "cargo": frozenset({"install", "fetch", "update", "publish", "add", "search"}),
    "go": frozenset({"get", "install", "mod"}),
    "docker": frozenset({"pull", "push", "run", "build", "login", "create", "compose"}),
    "podman": frozenset({"pull", "push", "run", "build", "login", "create", "compose"}),
    "conda": frozenset({"install", "create", "update", "env"}),
    "mamba": frozenset({"install", "create", "update", "env"}),
}
#: Programs that change the system outside the workspace or other processes.
SYSTEM_PROGRAMS = frozenset(
    {
        "sudo", "su", "doas", "pkexec", "chroot", "mount", "umount", "systemctl",
        "service", "shutdown", "reboot", "halt", "poweroff", "init", "telinit", "kill",
        "pkill", "killall", "crontab", "at", "useradd", "userdel", "usermod", "groupadd",
        "groupdel", "passwd", "chpasswd", "mkfs", "fdisk", "sfdisk", "parted", "dd",
        "iptables", "ip6tables", "nft", "ufw", "sysctl", "modprobe", "insmod", "rmmod",
        "launchctl", "setcap", "chattr", "apt", "apt-get", "aptitude", "dpkg", "yum",
        "dnf", "apk", "brew", "pacman", "snap", "zypper", "port", "flatpak", "swapon",
        "swapoff", "hostname", "timedatectl", "update-alternatives", "ldconfig",
    }
)  # fmt: skip
#: Paths outside the roots that are still harmless to name.
HARMLESS_PATHS = frozenset(
    {
        "/dev/null", "/dev/zero", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty",
        "/dev/random", "/dev/urandom", "/dev/full",
    }
)  # fmt: skip

#: Words after which the next word is again a command.
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "exec",
     "command", "builtin", "nohup", "stdbuf", "unbuffer"}
)  # fmt: skip
#: Programs that run another program named among their arguments.
_WRAPPERS = frozenset({"env", "nice", "timeout", "xargs", "ionice", "taskset", "watch", "chrt"})
#: How many candidate programs after a wrapper are judged.
_WRAPPER_CANDIDATES = 3
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
_PYTHON = re.compile(r"^python[0-9.]*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SUBSTITUTION = re.compile(r"\$\(|`")
_GLOB_CHARS = re.compile(r"[*?\[{]")
_MAX_DEPTH = 4


@dataclass(frozen=True, slots=True)
class ShellVerdict:
    """Whether a command needs approval, and why."""

    needs_confirmation: bool
    reasons: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """The reasons joined for a message (``""`` when none)."""
        return "; ".join(self.reasons)


@dataclass(slots=True)
class _Judge:
    roots: tuple[Path, ...]
    cwd: Path
    home: Path
    reasons: list[str] = field(default_factory=list)

    def flag(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)

    def command_line(self, command: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            self.flag("it nests command substitutions too deeply to judge")
            return
        for inner in _substitutions(command):
            self.command_line(inner, depth + 1)
        try:
            tokens = _tokenize(command)
        except ValueError as exc:
            self.flag(f"it cannot be parsed ({exc})")
            return
        for words, redirects in _simple_commands(tokens):
            for target in redirects:
                self.path(target)
            if words:
                self.simple_command(words, depth)

    def simple_command(self, words: list[str], depth: int) -> None:
        i = 0
        while i < len(words) and (words[i] in _KEYWORDS or _ASSIGNMENT.match(words[i])):
            if _ASSIGNMENT.match(words[i]):
                self.path(words[i].split("=", 1)[1])
            i += 1
        if i >= len(words):
            return
        program, args = _program(words[i]), words[i + 1 :]
        if program in _WRAPPERS:
            # Which later word is the wrapped program depends on the wrapper's options
            # (``nice -n 5 curl``, ``timeout -s KILL 5 curl``): judge the first few.
            starts = [
                j
                for j in range(i + 1, len(words))
                if not words[j].startswith("-") and not _ASSIGNMENT.match(words[j])
            ]
            for j in starts[:_WRAPPER_CANDIDATES]:
                self.simple_command(words[j:], depth)
            return
        if _PYTHON.match(program) and len(args) >= 2 and args[0] == "-m":
            program, args = args[1], args[2:]
        if program == "pip3":
            program = "pip"
        if program in NETWORK_PROGRAMS:
            self.flag(f"{program} reaches the network")
        elif program in NETWORK_SUBCOMMANDS:
            sub = next((a for a in args if not a.startswith("-")), "")
            if sub in NETWORK_SUBCOMMANDS[program]:
                self.flag(f"{program} {sub} may reach the network".replace("  ", " "))
        if program in SYSTEM_PROGRAMS or program.startswith("mkfs."):
            self.flag(f"{program} changes the system outside the workspace")
        if program == "eval":
            self.flag("eval runs text that cannot be judged in advance")
        if program in _SHELLS:
            script = _dash_c_argument(args)
            if script is not None:
                self.command_line(script, depth + 1)
        for arg in args:
            value = arg.split("=", 1)[1] if "=" in arg and arg.startswith("-") else arg
            self.path(value)

    def path(self, word: str) -> None:
        if not word or "://" in word:
            return
        if word.startswith(("/dev/tcp/", "/dev/udp/")):
            self.flag(f"{word} opens a network connection")
            return
        expanded = _expand_home(word, self.home)
        if expanded is None:
            self.flag(f"cannot tell where {word.split('/', 1)[0]} points")
            return
        if not _looks_like_path(expanded):
            return
        glob = _GLOB_CHARS.search(expanded)
        if glob:
            expanded = os.path.dirname(expanded[: glob.start()]) or "."
        resolved = Path(os.path.realpath(os.path.join(self.cwd, expanded)))
        if str(resolved) in HARMLESS_PATHS or str(resolved).startswith("/dev/fd/"):
            return
        if not any(resolved == root or root in resolved.parents for root in self.roots):
            self.flag(f"it names {word}, which is outside the workspace")


def judge_command(command: str, *, roots: Sequence[Path], cwd: Path) -> ShellVerdict:
    """Apply the rule set to ``command``.

    Args:
        command: the command line, as ``bash -c`` will run it.
        roots: the resolved workspace and extra roots.
        cwd: the directory the command starts in (relative paths resolve from it).
    """
    home = Path(os.path.realpath(os.path.expanduser("~")))
    judge = _Judge(tuple(roots), cwd, home)
    judge.command_line(command, 0)
    return ShellVerdict(bool(judge.reasons), tuple(judge.reasons))


def _tokenize(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def _simple_commands(tokens: list[str]) -> Iterator[tuple[list[str], list[str]]]:
    """Split tokens into simple commands: ``(words, redirection targets)``."""
    words: list[str] = []
    redirects: list[str] = []
    redirect_next = False
    for token in tokens:
        if token and all(c in ";&|()<>\n" for c in token):
            if "(" in token or not any(c in "<>" for c in token):
                yield words, redirects
                words, redirects = [], []
                redirect_next = False
            elif token != ")":
                redirect_next = True
            continue
        if redirect_next:
            redirects.append(token)
            redirect_next = False
        else:
            words.append(token)
    yield words, redirects


def _substitutions(command: str) -> list[str]:
    """The bodies of ``$(...)`` and backtick substitutions in ``command`` (outermost)."""
    found: list[str] = []
    i = 0
    while (match := _SUBSTITUTION.search(command, i)) is not None:
        start = match.end()
        if match.group() == "`":
            end = command.find("`", start)
            if end < 0:
                break
            found.append(command[start:end])
            i = end + 1
            continue
        depth, j = 1, start
        while j < len(command) and depth:
            depth += {"(": 1, ")": -1}.get(command[j], 0)
            j += 1
        found.append(command[start : j - 1] if depth == 0 else command[start:])
        i = j
    return found


def _program(word: str) -> str:
    return os.path.basename(word.strip("`"))


def _dash_c_argument(args: list[str]) -> str | None:
    for index, arg in enumerate(args):
        if arg.startswith("-") and "c" in arg[1:] and not arg.startswith("--"):
            return args[index + 1] if index + 1 < len(args) else None
    return None


def _expand_home(word: str, home: Path) -> str | None:
    """``word`` with ``~``, ``$HOME`` or ``${HOME}`` expanded; ``None`` for ``~user``."""
    for prefix in ("$HOME", "${HOME}"):
        if word == prefix or word.startswith(prefix + "/"):
            return str(home) + word[len(prefix) :]
    if word.startswith("~"):
        head, _, rest = word.partition("/")
        if head != "~":
            return None
        return str(home) + ("/" + rest if rest else "")
    return word


def _looks_like_path(word: str) -> bool:
    return "/" in word or word in (".", "..")
