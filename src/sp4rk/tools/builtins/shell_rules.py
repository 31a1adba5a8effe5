"""The rule set that decides which ``bash_exec`` commands need a human's approval.

``bash_exec`` runs commands that stay inside the workspace and offline without asking; a
command needs approval when any rule below matches. The rules are a speed bump for a model
that means well, not a sandbox: a determined program can reach the network or the rest of
the file system in ways no static reading of a command line can see (``python -c``, a
script it wrote, a script it sources). Contain untrusted agents with a container or VM as
well.

Rules, each checked on every simple command (after ``;``, ``&&``, ``||``, ``|``, ``&``, a
newline, ``(``, and inside ``$(...)``, backticks and ``sh -c "..."``); wrappers such as
``env``, ``nice``, ``timeout``, ``xargs``, ``command``, ``exec``, ``nohup`` and
``busybox`` are looked through:

1. **Network** — the program reaches the network: ``curl``, ``wget``, ``ssh``, ``scp``,
   ``rsync``, ``nc``, ``uvx`` and friends (:data:`NETWORK_PROGRAMS`); a package or repository
   command that downloads or uploads (``pip install``, ``npm install``, ``git
   clone/fetch/pull/push``, ``docker pull`` …, :data:`NETWORK_SUBCOMMANDS`, found after the
   program's global options such as ``git -C dir``); ``python -m http.server``; or
   ``/dev/tcp`` / ``/dev/udp``.
2. **System** — the program changes the system or other processes: ``sudo``, ``su``,
   system package managers, ``mount``, ``systemctl``, ``kill``, ``crontab``, ``mkfs``,
   ``dd``, ``shutdown`` … (:data:`SYSTEM_PROGRAMS`).
3. **Outside paths** — an argument, option value (``--out=/x``, ``-C/x``), assignment
   (``X=/y``, ``make PREFIX=/y``) or redirection target names a path that resolves (``..``
   and symlinks included) outside the workspace and the extra roots (the system temporary
   directory counts as outside: other programs and users share it). Relative paths are
   checked from every directory the command may ``cd`` into; a bare ``cd`` goes to the home
   directory. Variables are expanded where their value is known: ``~``, ``$HOME``,
   ``$PWD`` and the other variables of the command's environment, in the ``$NAME`` and
   ``${NAME}`` forms (an unset one is empty). The program's own path (``/usr/bin/python3``)
   and harmless devices (``/dev/null``, ``/dev/stdout`` …) are exempt.
4. **Other processes' secrets** — the command reads what other processes hold, where API
   keys live: ``ps`` with the BSD ``e`` option (``ps e``, ``ps axeww``) or ``-E``, which
   print every process's environment; any mention of a process's files under ``/proc``
   (``/proc/<pid>/…``, ``/proc/self/…``, ``/proc/$PPID/environ``, ``/proc/*/environ``),
   even inside a ``python -c`` script or quotes; or a debugger or tracer attaching to a
   running process (``gdb -p``, ``strace -p``, ``gcore`` …). ``ps aux``, ``ps -ef`` and
   ``env`` (which prints the command's own, allowlisted environment) run unasked.
5. **Opaque** — the command cannot be judged: unbalanced quotes, ``eval``, ``~user``,
   ``$'...'`` quoting, a program name computed at run time (``$a$b``, ``c${x}url``, a glob or
   brace pattern), a path word whose variable part is unknown (``${PWD%/*}/x``, ``$X/..``
   after ``X=…``), ``cd -``, ``popd``, ``cd ..`` inside a loop or function, or substitutions
   nested too deeply.

Everything else runs without approval, including commands that delete or rewrite files
inside the workspace.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from sp4rk._internal.proc import allowlisted_environment
from sp4rk.tools.builtins.paths import is_within

#: Programs whose purpose is network access.
NETWORK_PROGRAMS = frozenset(
    {
        "curl", "wget", "ssh", "scp", "sftp", "ftp", "rsync", "nc", "ncat", "netcat",
        "socat", "telnet", "ping", "ping6", "dig", "nslookup", "host", "whois",
        "traceroute", "tracepath", "mosh", "aria2c", "http", "https", "httpie", "lynx",
        "w3m", "links", "npx", "pnpx", "bunx", "uvx", "pipx", "gh", "hub", "az", "aws",
        "gcloud", "gsutil", "kubectl", "helm", "terraform",
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
#: Global options that take a separate value, skipped when looking for the subcommand.
GLOBAL_OPTIONS_WITH_VALUE: dict[str, frozenset[str]] = {
    "git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                      "--exec-path", "--super-prefix", "--attr-source"}),
    "pip": frozenset({"--proxy", "--python", "--cache-dir", "--log", "--cert", "--client-cert",
                      "--timeout", "--retries", "--exists-action", "--trusted-host"}),
    "uv": frozenset({"--directory", "--project", "--cache-dir", "--config-file", "--color"}),
    "poetry": frozenset({"-C", "--directory", "-P", "--project"}),
    "npm": frozenset({"--prefix", "-C", "-w", "--workspace"}),
    "yarn": frozenset({"--cwd"}),
    "pnpm": frozenset({"-C", "--dir", "-F", "--filter"}),
    "cargo": frozenset({"-C", "--config", "-Z", "--color"}),
    "go": frozenset({"-C"}),
    "docker": frozenset({"-H", "--host", "-c", "--context", "--config", "-l", "--log-level"}),
    "podman": frozenset({"-c", "--connection", "--url", "--root", "--runroot", "--log-level"}),
}  # fmt: skip
#: Python modules that ``python -m`` turns into network programs.
NETWORK_MODULES = frozenset({"http.server", "smtpd", "xmlrpc.server"})
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
#: Programs that delete, move or rewrite files (inside the workspace too).
FILE_CHANGING_PROGRAMS = frozenset(
    {"rm", "rmdir", "unlink", "shred", "truncate", "mv", "cp", "ln", "install", "chmod",
     "chown", "chgrp", "touch", "mkdir", "tee", "patch", "tar", "unzip"}
)  # fmt: skip
#: Subcommands that rewrite or delete files in a working tree.
FILE_CHANGING_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "git": frozenset({"reset", "clean", "checkout", "restore", "rm", "mv", "apply", "am",
                      "merge", "rebase", "stash", "switch", "pull", "commit"}),
}  # fmt: skip
#: Programs that read the memory of a running process (any use).
PROCESS_READERS = frozenset({"gcore", "pstack", "gdbserver"})
#: Debuggers and tracers: they read another process when given one of these options.
ATTACHING_PROGRAMS = frozenset({"gdb", "lldb", "strace", "ltrace", "perf", "bpftrace"})
_ATTACH_OPTIONS = frozenset({"-p", "--pid", "--attach-pid", "--attach"})
#: A process's own files under /proc: a PID, self, or something computed at run time.
_PROC_FILES = re.compile(r"/proc/+(?:\d|self\b|thread-self\b|[$*?\[{`]|[\"'] *[+%.,)])")
#: ps options followed by a value (a format, a user, a PID list …).
_PS_WITH_VALUE = frozenset("oOpqsuUgGCtkDFN")
_PS_LONG_WITH_VALUE = frozenset({"format", "sort", "pid", "ppid", "user", "group", "cols",
                                 "rows", "width", "tty", "sid", "quick-pid"})  # fmt: skip
_PROC_ENVIRON = re.compile(r"/proc\b.*\benviron\b", re.DOTALL)

#: Paths outside the roots that are still harmless to name.
HARMLESS_PATHS = frozenset(
    {
        "/dev/null", "/dev/zero", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty",
        "/dev/random", "/dev/urandom", "/dev/full",
    }
)  # fmt: skip

#: Words after which the next word is again a command.
_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{"})
#: Words that start a loop: what runs inside may run many times.
_LOOPS = frozenset({"for", "select", "while", "until"})
#: Programs that run another program named among their arguments.
_WRAPPERS = frozenset(
    {"env", "nice", "timeout", "xargs", "ionice", "taskset", "watch", "chrt", "time", "exec",
     "command", "builtin", "nohup", "stdbuf", "unbuffer", "busybox", "toybox", "setsid",
     "flock", "caffeinate"}
)  # fmt: skip
#: How many candidate programs after a wrapper are judged.
_WRAPPER_CANDIDATES = 3
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
_CHANGE_DIR = frozenset({"cd", "pushd", "popd"})
#: Most working directories followed through ``cd`` before the command counts as opaque.
_MAX_CWDS = 32
_PYTHON = re.compile(r"^python[0-9.]*$")
_PIP = re.compile(r"^pip[0-9.]*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_SUBSTITUTION = re.compile(r"\$\(|`")
#: What a substitution is replaced with before the outer command is read: an unknown value.
_PLACEHOLDER = "$__SUBSTITUTION__"
_GLOB_CHARS = re.compile(r"[*?\[{]")
_MAX_DEPTH = 4
#: Simple commands and path checks one judgement may take (wrappers of wrappers multiply).
_MAX_WORK = 20_000
#: The work one path check costs (it resolves the path on disk).
_PATH_WORK = 10
#: The longest command judged: Linux refuses a longer ``bash -c`` argument anyway.
MAX_COMMAND_BYTES = 128 * 1024


@dataclass(frozen=True, slots=True)
class ShellVerdict:
    """Whether a command needs approval, and why."""

    needs_confirmation: bool
    reasons: tuple[str, ...] = ()
    taint_risks: tuple[str, ...] = ()
    """What the command does that is allowed without approval but risky after untrusted
    content: changing files inside the workspace, running inline interpreter code."""

    @property
    def reason(self) -> str:
        """The reasons joined for a message (``""`` when none)."""
        return "; ".join(self.reasons)

    @property
    def risk(self) -> str:
        """Everything that matters after untrusted content: the reasons, then the risks."""
        return "; ".join((*self.reasons, *self.taint_risks))


class _Unknown(Exception):
    """A word's value depends on something the rules cannot see."""


class _TooComplex(Exception):
    """Judging the command would take more than :data:`_MAX_WORK` steps."""


@dataclass(slots=True)
class _Judge:
    roots: tuple[Path, ...]
    cwds: list[Path]
    home: Path
    env: Mapping[str, str]
    reasons: list[str] = field(default_factory=list)
    taint_risks: list[str] = field(default_factory=list)
    assigned: set[str] = field(default_factory=set)
    repeats: bool = False
    climbs: bool = False
    work: int = 0

    def flag(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)

    def note_risk(self, reason: str) -> None:
        """Something allowed as it is, that needs approval after untrusted content."""
        if reason not in self.taint_risks:
            self.taint_risks.append(reason)

    def command_line(self, command: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            self.flag("it nests command substitutions too deeply to judge")
            return
        if "$'" in command:
            self.flag("it uses $'...' quoting, which can spell any text")
        outer, bodies = _substitutions(command)
        try:
            tokens = _tokenize(outer)
        except ValueError as exc:
            self.flag(f"it cannot be parsed ({exc})")
            return
        if "function" in tokens or "()" in tokens or _adjacent(tokens, "(", ")"):
            self.repeats = True
        if any(">" in t and all(c in ";&|()<>\n" for c in t) for t in tokens):
            self.note_risk("it writes files through a redirection")
        for words, redirects in _simple_commands(tokens):
            for target in redirects:
                self.path(target)
            if words:
                self.simple_command(words, depth)
        # Substitutions run in subshells; they are judged from every directory the line
        # may have changed into.
        for inner in bodies:
            self.command_line(inner, depth + 1)

    def spend(self, units: int = 1) -> None:
        """Count work; a command that needs more than :data:`_MAX_WORK` is not judged."""
        self.work += units
        if self.work > _MAX_WORK:
            raise _TooComplex

    def simple_command(self, words: list[str], depth: int) -> None:
        self.spend()
        i = 0
        while True:
            while i < len(words) and (words[i] in _KEYWORDS or _ASSIGNMENT.match(words[i])):
                if words[i] in _LOOPS:
                    self.repeats = True
                elif words[i] not in _KEYWORDS:
                    self.assignment(words[i])
                i += 1
            if i >= len(words):
                return
            program, args = self.program(words[i]), words[i + 1 :]
            if program is not None:
                break
            i += 1  # it expands to nothing: the next word is the program
        if program in _WRAPPERS:
            self.wrapped(program, words[i + 1 :], depth)
            return
        if program in _LOOPS:
            self.repeats = True
            if args:
                self.assigned.add(args[0])
                args = args[1:]
        if _PYTHON.match(program) and len(args) >= 2 and args[0] == "-m":
            program, args = args[1], args[2:]
        if _PIP.match(program):
            program = "pip"
        if program in NETWORK_PROGRAMS:
            self.flag(f"{program} reaches the network")
        elif program in NETWORK_MODULES:
            self.flag(f"python -m {program} reaches the network")
        elif program in NETWORK_SUBCOMMANDS:
            sub = _subcommand(program, args)
            if sub in NETWORK_SUBCOMMANDS[program]:
                self.flag(f"{program} {sub} may reach the network".replace("  ", " "))
        if program in FILE_CHANGING_PROGRAMS:
            self.note_risk(f"{program} changes files")
        elif program in FILE_CHANGING_SUBCOMMANDS:
            sub = _subcommand(program, args)
            if sub in FILE_CHANGING_SUBCOMMANDS[program]:
                self.note_risk(f"{program} {sub} changes files")
        elif program in ("sed", "perl") and any(a.startswith(("-i", "--in-place")) for a in args):
            self.note_risk(f"{program} -i rewrites files")
        elif program == "find" and any(a in ("-delete", "-exec", "-execdir") for a in args):
            self.note_risk("find may delete or change files")
        if _inline_code(program, args):
            self.note_risk(f"{program} runs inline code, which can reach the network")
        if program in SYSTEM_PROGRAMS or program.startswith("mkfs."):
            self.flag(f"{program} changes the system outside the workspace")
        if program == "ps" and _ps_shows_environments(args):
            self.flag("ps e prints the environment of other processes, where API keys live")
        if program in PROCESS_READERS or (
            program in ATTACHING_PROGRAMS
            and any(a in _ATTACH_OPTIONS or a.startswith(("--pid=", "-p")) for a in args)
        ):
            self.flag(f"{program} reads the memory of another process, where API keys live")
        if program == "eval":
            self.flag("eval runs text that cannot be judged in advance")
        if program in ("export", "declare", "typeset", "local", "readonly", "read"):
            self.assigned.update(a.split("=", 1)[0] for a in args if not a.startswith("-"))
        if program in _SHELLS:
            script = _dash_c_argument(args)
            if script is not None:
                self.command_line(script, depth + 1)
        if program in _CHANGE_DIR:
            self.change_directory(program, args)
        for arg in args:
            self.argument(arg)

    def program(self, word: str) -> str | None:
        """The program a command word names (``None``: it expands to nothing).

        A name computed at run time (an unknown variable, a glob or brace pattern) is
        flagged.
        """
        try:
            values = self.expand(word)
        except _Unknown:
            values = []
        if values == [""]:
            return None
        computed = len(values) != 1 or "$" in values[0] or _GLOB_CHARS.search(values[0])
        if computed and word not in ("[", "[["):
            self.flag(f"the program name {word} is computed when the command runs")
            return word
        return os.path.basename(values[0])

    def wrapped(self, wrapper: str, rest: list[str], depth: int) -> None:
        """Judge the program a wrapper runs (``nice -n 5 curl``: one of the first words)."""
        options = [w for w in rest if w.startswith("-")]
        if wrapper == "command" and {"-v", "-V"} & set(options):
            return  # only looks the name up
        # Which later word is the wrapped program depends on the wrapper's options
        # (``nice -n 5 curl``, ``timeout -s KILL 5 curl``): judge the first few.
        starts = [
            j for j, w in enumerate(rest) if not w.startswith("-") and not _ASSIGNMENT.match(w)
        ]
        for word in rest:
            if _ASSIGNMENT.match(word):
                self.assignment(word)
            elif word.startswith("-"):
                self.argument(word)
        for j in starts[:_WRAPPER_CANDIDATES]:
            self.simple_command(rest[j:], depth)

    def assignment(self, word: str) -> None:
        name, value = word.split("=", 1)
        self.assigned.add(name.rstrip("+"))
        self.path(value)

    def argument(self, arg: str) -> None:
        if _ASSIGNMENT.match(arg) or (arg.startswith("-") and "=" in arg):
            self.path(arg.split("=", 1)[1])  # make PREFIX=/x, --out=/x
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
            if _path_like(arg[2:]):  # an attached value: -C/etc, -I../include
                self.path(arg[2:])
        else:
            self.path(arg)

    def change_directory(self, program: str, args: list[str]) -> None:
        """Follow ``cd``: later relative paths are checked from every directory it may reach."""
        targets = [a for a in args if not a.startswith(("-", "+")) or a == "-"]
        if program == "popd" or "-" in targets or any(a.startswith("+") for a in args):
            shown = " ".join([program, *args])
            self.flag(f"{shown} returns to a directory the rules cannot see")
            return
        if not targets:
            if program == "pushd":
                self.flag("pushd without a directory returns to one the rules cannot see")
                return
            targets = [str(self.home)]
        target = targets[0]
        try:
            values = self.expand(target)
        except _Unknown:
            values = []
        if not values or "$" in "".join(values):
            self.flag(f"{program} {target} goes to a directory that is computed at run time")
            return
        if ".." in Path(target).parts:
            self.climbs = True
        self.spend(_PATH_WORK * len(values) * len(self.cwds))
        reached = {
            Path(os.path.realpath(os.path.join(cwd, value)))
            for value in values
            for cwd in self.cwds
        }
        for path in sorted(reached - set(self.cwds)):
            if not self.inside(path):
                if not args:  # an explicit target is flagged as a path
                    self.flag(f"{program} without a directory goes to the home directory")
                return
            if len(self.cwds) >= _MAX_CWDS:
                self.flag(f"it changes directory too often to follow ({program} {target})")
                return
            self.cwds.append(path)

    def path(self, word: str) -> None:
        if not word or "://" in word:
            return
        if word.startswith(("/dev/tcp/", "/dev/udp/")):
            self.flag(f"{word} opens a network connection")
            return
        if word.startswith("~") and word.split("/", 1)[0] != "~":
            self.flag(f"cannot tell where {word.split('/', 1)[0]} points")
            return
        try:
            values = self.expand(word)
        except _Unknown:
            values = [word]
        for value in values:
            if not _path_like(value):
                continue
            if "$" in value:
                self.flag(f"cannot tell where {word} points (it is expanded when the command runs)")
                return
            glob = _GLOB_CHARS.search(value)
            if glob:
                value = os.path.dirname(value[: glob.start()]) or "."
            for cwd in self.cwds:
                self.spend(_PATH_WORK)
                joined = os.path.join(cwd, value)
                resolved = Path(os.path.realpath(joined))
                if str(resolved) in HARMLESS_PATHS or str(resolved).startswith("/dev/fd/"):
                    continue
                if os.path.normpath(joined).startswith("/proc/") or not self.inside(resolved):
                    self.flag(f"it names {word}, which is outside the workspace")
                    return

    def expand(self, word: str) -> list[str]:
        """``word`` with ``~`` and known ``$NAME`` references expanded, once per ``$PWD``.

        Raises:
            _Unknown: when it refers to a variable assigned in the command itself or one
                the environment does not hold.
        """
        if word == "~" or word.startswith("~/"):
            word = str(self.home) + word[1:]
        if "$" not in word:
            return [word]
        return [_REFERENCE.sub(partial(self.value_of, cwd=cwd), word) for cwd in self.cwds]

    def value_of(self, match: re.Match[str], *, cwd: Path) -> str:
        name = match.group(1) or match.group(2)
        if name in self.assigned:
            raise _Unknown(name)  # its value was checked where it was assigned
        if name == "PWD":
            return str(cwd)
        if name == "HOME":
            return str(self.home)
        if name not in self.env:
            raise _Unknown(name)  # bash's own variables ($BASH, $OLDPWD …) or unset ones
        value = self.env[name]
        return name if ":" in value else value  # $PATH lists paths but names none of them

    def inside(self, path: Path) -> bool:
        return any(is_within(path, root) for root in self.roots)


def judge_command(
    command: str,
    *,
    roots: Sequence[Path],
    cwd: Path,
    env: Mapping[str, str] | None = None,
) -> ShellVerdict:
    """Apply the rule set to ``command``.

    Args:
        command: the command line, as ``bash -c`` will run it.
        roots: the resolved workspace and extra roots.
        cwd: the directory the command starts in (relative paths resolve from it).
        env: the environment the command runs with, for expanding ``$NAME``; by default
            the allowlisted environment ``bash_exec`` gives its commands.
    """
    environment = env if env is not None else allowlisted_environment()
    home = Path(os.path.realpath(environment.get("HOME") or os.path.expanduser("~")))
    judge = _Judge(tuple(roots), [cwd], home, environment)
    if len(command.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES:
        judge.flag(f"it is longer than {MAX_COMMAND_BYTES} bytes, too long to judge")
        return ShellVerdict(True, tuple(judge.reasons))
    if _PROC_ENVIRON.search(command):
        judge.flag("it reads a process's environment (/proc/…/environ), where API keys live")
    elif _PROC_FILES.search(command):
        judge.flag("it reads another process's files under /proc, where its secrets are")
    try:
        judge.command_line(command, 0)
    except (_TooComplex, RecursionError):
        judge.flag("it is too complex to judge")
    if judge.repeats and judge.climbs:
        judge.flag("it runs cd .. inside a loop or function, which the rules cannot follow")
    return ShellVerdict(bool(judge.reasons), tuple(judge.reasons), tuple(judge.taint_risks))


#: Interpreters and the options that hand them a program on the command line.
_INLINE_CODE_OPTIONS = {
    "node": ("-e", "--eval", "-p", "--print"),
    "nodejs": ("-e", "--eval", "-p", "--print"),
    "deno": ("eval",),
    "bun": ("-e", "--eval"),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "php": ("-r",),
    "lua": ("-e",),
    "Rscript": ("-e",),
    "osascript": ("-e",),
}


def _inline_code(program: str, args: list[str]) -> bool:
    """Whether ``program`` is an interpreter given its program inline (``python -c``)."""
    if _PYTHON.match(program):
        return any(
            a == "-c" or (a.startswith("-") and not a.startswith("--") and "c" in a[1:])
            for a in args
        )
    options = _INLINE_CODE_OPTIONS.get(program)
    return options is not None and any(a in options or a.startswith(options) for a in args)


def _tokenize(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def _adjacent(tokens: list[str], first: str, second: str) -> bool:
    return any(a == first and b == second for a, b in itertools.pairwise(tokens))


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


def _substitutions(command: str) -> tuple[str, list[str]]:
    """Split off the outermost ``$(...)`` and backtick substitutions of ``command``.

    Returns:
        ``command`` with each of them replaced by :data:`_PLACEHOLDER`, and their bodies.
    """
    found: list[str] = []
    outer: list[str] = []
    i = 0
    while (match := _SUBSTITUTION.search(command, i)) is not None:
        start = match.end()
        if match.group() == "`":
            end = command.find("`", start)
            if end < 0:
                break
            found.append(command[start:end])
            outer += [command[i : match.start()], _PLACEHOLDER]
            i = end + 1
            continue
        depth, j = 1, start
        while j < len(command) and depth:
            depth += {"(": 1, ")": -1}.get(command[j], 0)
            j += 1
        found.append(command[start : j - 1] if depth == 0 else command[start:])
        outer += [command[i : match.start()], _PLACEHOLDER]
        i = j
    outer.append(command[i:])
    return "".join(outer), found


def _subcommand(program: str, args: list[str]) -> str:
    """The first argument that is not a global option (or an option's value)."""
    takes_value = GLOBAL_OPTIONS_WITH_VALUE.get(program, frozenset())
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = arg in takes_value
        else:
            return arg
    return ""


def _dash_c_argument(args: list[str]) -> str | None:
    for index, arg in enumerate(args):
        if arg.startswith("-") and "c" in arg[1:] and not arg.startswith("--"):
            return args[index + 1] if index + 1 < len(args) else None
    return None


def _ps_shows_environments(args: list[str]) -> bool:
    """Whether ``ps`` is given BSD ``e`` (``ps e``, ``ps axeww``) or ``-E``."""
    takes_value = False
    for arg in args:
        if takes_value:
            takes_value = False
        elif arg.startswith("--"):
            takes_value = "=" not in arg and arg[2:] in _PS_LONG_WITH_VALUE
        elif arg.startswith("-"):
            if "E" in arg[1:]:
                return True
            takes_value = arg[-1] in _PS_WITH_VALUE
        elif arg.isalpha():  # BSD options, such as aux or axeww
            if "e" in arg:
                return True
            takes_value = arg[-1] in _PS_WITH_VALUE
    return False


def _path_like(word: str) -> bool:
    return "/" in word or ".." in word or word == "."
