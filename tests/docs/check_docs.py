#!/usr/bin/env python3
"""Checks that what README.md, CONTRIBUTING.md and docs/*.md tell a reader to open or run still
exists: repository paths (in backticks, shell blocks and links), `ctest -R`/`-L` selections,
`make` targets, `python -m fabric_lib...` modules, and `docs/x.md#anchor` headings.

Prints one `file:line: what` per stale reference and exits 1 if there is any. Docs drift
silently otherwise: a renamed test or script leaves a command that fails only for the reader.

Usage: check_docs.py --build <build dir> [--source <repo>] [FILE.md ...]
With no files: README.md, CONTRIBUTING.md and docs/*.md of the source tree.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# First path components that name something in the repository (build/ is an output, not
# checked). A token starting with one of these is taken for a repository path.
REPO_ROOTS = ("include/", "src/", "tests/", "tools/", "python/", "scripts/", "docs/", "cmake/",
              "cuda/", ".ci/")
REPO_FILES = {"Makefile", "CMakeLists.txt", "CMakePresets.json", "pyproject.toml", "README.md",
              "CONTRIBUTING.md"}
# A path with one of these is a pattern or a placeholder (`src/<backend>/`, `tools/bench/*.cpp`,
# `$OUT/x`, `docs/x.md`'s generic `...`): not a single file to look for.
PLACEHOLDER = re.compile(r"[<>*?{}$\[\]|]|\.\.\.|…")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
COMMAND_START = re.compile(r"(?:^|[\s;&|(])(ctest|make|python3?)(?=\s)")


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


@dataclass
class Facts:
    """What the references are checked against, gathered once."""
    source: Path
    tests: list[str]
    labels: list[str]
    make_targets: set[str]
    anchors: dict[Path, set[str]]


def ctest_lines(build: Path, *args: str) -> list[str]:
    out = subprocess.run(["ctest", "--test-dir", str(build), *args], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return out.splitlines()


def gather(source: Path, build: Path) -> Facts:
    tests = [m.group(1) for line in ctest_lines(build, "-N")
             if (m := re.match(r"\s*Test\s+#\d+:\s+(\S+)", line))]
    labels, in_list = [], False
    for line in ctest_lines(build, "--print-labels"):
        if line.startswith("All Labels:"):
            in_list = True
        elif in_list and line.strip():
            labels.append(line.strip())
    if not tests:
        raise SystemExit(f"check_docs: ctest lists no test in {build}: configure it first")
    targets = set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", (source / "Makefile").read_text(),
                             re.M))
    return Facts(source, tests, labels, targets, {})


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(facts: Facts, md: Path) -> set[str]:
    if md not in facts.anchors:
        found: set[str] = set()
        in_fence = False
        for line in md.read_text().splitlines():
            if FENCE.match(line):
                in_fence = not in_fence
            elif not in_fence and (m := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
                heading = m.group(1)
                if (explicit := re.search(r"\s*\{#([\w-]+)\}$", heading)):  # `## Title {#id}`
                    found.add(explicit.group(1))
                    heading = heading[:explicit.start()]
                base, n = slug(heading), 1
                name = base
                while name in found:  # GitHub numbers repeated headings: x, x-1, x-2
                    name, n = f"{base}-{n}", n + 1
                found.add(name)
        facts.anchors[md] = found
    return facts.anchors[md]


def check_path(facts: Facts, token: str, relative_to: Path | None) -> str | None:
    """None when token exists (or is not a checkable path); else the problem."""
    token = token.strip("'\"").rstrip(".,;:)")
    path, _, anchor = token.partition("#")
    path = re.sub(r"(:\d+(-\d+)?|::.*)$", "", path)  # file:line, a pytest node id
    if not path or PLACEHOLDER.search(path) or "://" in path:
        return None
    if relative_to is not None:
        target = (relative_to / path).resolve()
    elif path.startswith(REPO_ROOTS) or path in REPO_FILES:
        target = facts.source / path
    else:
        return None
    if not target.exists():
        return f"no such path: {path}"
    if anchor and target.suffix == ".md" and anchor not in anchors_of(facts, target):
        return f"no heading for anchor: {path}#{anchor}"
    return None


def words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:  # an unbalanced quote in prose: plain splitting is good enough
        return command.split()


def first_command(text: str) -> list[str]:
    """The words of text up to its first unquoted ;, |, && or ||."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";|&")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    out: list[str] = []
    try:
        for token in lexer:
            if token and set(token) <= set(";|&"):
                break
            out.append(token)
    except ValueError:  # an unbalanced quote in prose
        return words(re.split(r"&&|\|\||[;|]", text)[0])
    return out


def check_ctest(facts: Facts, args: list[str]) -> list[str]:
    problems = []
    for flag, value in zip(args, args[1:]):
        if flag not in ("-R", "-L") or re.search(r"[<>$]", value):  # `-R <name>`
            continue
        try:
            pattern = re.compile(value)
        except re.error:
            problems.append(f"ctest {flag} {value}: not a regular expression")
            continue
        pool = facts.tests if flag == "-R" else facts.labels
        if not any(pattern.search(name) for name in pool):
            kind = "test" if flag == "-R" else "label"
            problems.append(f"ctest {flag} {value}: selects no {kind}")
    return problems


def check_make(facts: Facts, args: list[str]) -> list[str]:
    problems = []
    takes_value = False
    for arg in args:
        if takes_value or "=" in arg:  # `make -C dir`, `make -j 2`, `make test PRESET=asan`
            takes_value = False
            continue
        if arg.startswith("-"):
            takes_value = arg in ("-C", "-f", "-j", "-l", "-o", "-W")
            continue
        if PLACEHOLDER.search(arg) or not re.fullmatch(r"[A-Za-z0-9_.-]+", arg):
            break  # prose after the command ("make test runs ...") ends it
        if arg not in facts.make_targets:
            problems.append(f"make {arg}: no such target in the Makefile")
        break  # only the first target: what follows in prose is not a target
    return problems


def check_python_module(facts: Facts, args: list[str]) -> list[str]:
    if len(args) < 2 or args[0] != "-m" or not args[1].startswith("fabric_lib"):
        return []
    module = args[1].rstrip(",;:")
    if PLACEHOLDER.search(module):
        return []
    base = facts.source / "python" / Path(*module.split("."))
    if base.with_suffix(".py").is_file() or (base / "__main__.py").is_file():
        return []
    return [f"python -m {module}: no python/{module.replace('.', '/')}.py or __main__.py"]


def check_commands(facts: Facts, text: str) -> list[str]:
    """Every ctest/make/python command in one code span or shell line."""
    problems = []
    for m in COMMAND_START.finditer(text):
        rest = first_command(text[m.end():])
        tool = m.group(1)
        if tool == "ctest":
            problems += check_ctest(facts, rest)
        elif tool == "make":
            problems += check_make(facts, rest)
        else:
            problems += check_python_module(facts, rest)
    return problems


def check_line(facts: Facts, md: Path, line: str, fence: str | None) -> list[str]:
    """The problems of one line; fence: the language of the code block it is in, if any."""
    found: list[str] = []
    if fence is not None:
        # Shell blocks are commands and paths; a C++ or Python block is left alone.
        if fence in ("sh", "bash", "shell", "console", "text"):
            found += check_commands(facts, line)
            found += [check_path(facts, token, None) or "" for token in words(line)]
        return found
    for span in CODE_SPAN.finditer(line):
        code = span.group(2).strip()
        found += check_commands(facts, code)
        found += [check_path(facts, token, None) or "" for token in code.split()]
    for link in LINK.finditer(line):
        target = link.group(1)
        if target.startswith("#"):
            if target[1:] not in anchors_of(facts, md):
                found.append(f"no heading for anchor: {target}")
        elif not re.match(r"[a-z]+:", target):
            found.append(check_path(facts, target, md.parent) or "")
    return found


def check_file(facts: Facts, md: Path) -> list[Problem]:
    name = str(md.relative_to(facts.source)) if md.is_relative_to(facts.source) else str(md)
    problems: list[Problem] = []
    fence: str | None = None
    for number, line in enumerate(md.read_text().splitlines(), start=1):
        if FENCE.match(line):
            fence = None if fence else (line.strip()[3:].strip() or "text")
            continue
        found = check_line(facts, md, line, fence)
        problems += [Problem(name, number, what) for what in dict.fromkeys(found) if what]
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, required=True, help="a configured build dir")
    parser.add_argument("--source", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    source = args.source.resolve()
    facts = gather(source, args.build.resolve())
    files = [f.resolve() for f in args.files] or [
        source / "README.md", source / "CONTRIBUTING.md", *sorted((source / "docs").glob("*.md"))]
    problems = [p for md in files for p in check_file(facts, md)]
    for p in problems:
        print(p)
    sys.stdout.flush()
    print(f"check_docs: {len(files)} files, {len(problems)} stale references", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
