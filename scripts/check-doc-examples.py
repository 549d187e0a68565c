#!/usr/bin/env python3
"""Compiles every C++ example of README.md and docs/*.md against the headers.

A reader copies these blocks into a program; an example that no longer
compiles (an API renamed, a result that is [[nodiscard]] and ignored) is a
defect like a broken test. Each ```cpp block is compiled with
`-std=c++20 -fsyntax-only -Wall -Wextra -Werror` (unused variables and
parameters aside: an example shows calls, not complete programs).

Most blocks are fragments: they use a `pool` they never declare, or names
of the reader's program (`process(item)`, `flush()`). HARNESS below gives
each block, in the order the blocks appear in their file, what the
fragment assumes: declarations of those names, the local variables it uses,
and where it goes:

  program  the block is a whole translation unit, compiled as it is;
  body     the block's statements form the body of a function;
  split    the block's lines before the line starting with `body_from`
           (function definitions) go to namespace scope, the rest into a
           function body.

`seed_from`: the block's lines from the one starting with it on (all of
them for "") show code written for the seed system, as ported (only its
namespace changed), which ignores the result<void> its calls return: the
compiler's warning for that is switched off for those lines only (a
diagnostic pragma), not for the rest of the block.

`scopes` lists lines that start a new block scope inside the body (an
example showing two alternatives that declare the same name). Lines
`#include ...` and `using namespace ...;` of a block move to the top; a
line `...` and a `{ ... }` stand for code left out. docs/PERFORMANCE.md is
not checked: its programs record what was measured at a past commit.

A block with no harness entry, or an entry whose first line no longer
matches its block, fails the check: adding or moving an example means
saying here what it assumes.

Usage: scripts/check-doc-examples.py [--cxx g++] [--flags "..."]
"""
import argparse
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parent.parent
UMBRELLA = "#include <thread_system/thread_system.hpp>"
COMMON = """#include <array>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>
"""
USING = "using namespace thread_system;\nusing namespace std::chrono_literals;\n"

# file -> one entry per ```cpp block, in order. `first`: the block's first
# line (stripped), to notice blocks added, removed or reordered.
HARNESS = {
    "README.md": [
        {"first": "#include <thread_system/thread_system.hpp>", "mode": "program"},
        {
            "first": "task<std::uint64_t> fib(int n) {",
            "mode": "split",
            "body_from": "const std::uint64_t v",
            "includes": [UMBRELLA],
            "decls": "task<void> log_later(thread_pool& pool);",
            "locals": "thread_pool pool{2};",
        },
        {
            "first": "pool_options opt;",
            "mode": "body",
            "includes": [UMBRELLA],
            "decls": "int crunch();\nvoid flush_metrics();",
        },
        {
            "first": "typed_thread_pool_t<job_types> pool{\"PriorityPool\"};",
            "mode": "body",
            "includes": [UMBRELLA],
            "decls": "void on_tick();",
        },
        {"first": "pool_options opt;", "mode": "body", "includes": [UMBRELLA]},
        {
            "first": "// concise",
            "mode": "body",
            "includes": [UMBRELLA],
            "scopes": ["// seed style"],
            "locals": "std::vector<std::unique_ptr<thread_worker>> workers;",
            "seed_from": "// seed style",
        },
    ],
    "docs/CONTROL.md": [
        {
            "first": "#include <thread_system/sync/cancellation.hpp>",
            "mode": "body",
            "includes": [UMBRELLA],
            "decls": "struct chunk {};\nvoid process(const chunk& c);\n"
            "struct connection {\n  void interrupt();\n  void read_all();\n};",
            "locals": "thread_pool pool{2};\nstd::vector<chunk> chunks;\nconnection socket;",
        },
        {
            "first": "#include <thread_system/sync/wait_group.hpp>",
            "mode": "body",
            "includes": ["#include <thread_system/pools/thread_pool.hpp>"],
            "decls": "void process(int& item);",
            "locals": "thread_pool pool{2};\nstd::vector<int> items;",
        },
        {
            "first": "#include <thread_system/services/service_registry.hpp>",
            "mode": "body",
            "decls": "struct clock_service {\n  virtual ~clock_service() = default;\n};\n"
            "struct system_clock : clock_service {};\nstruct fake_clock : clock_service {};\n"
            "struct logger {\n  virtual ~logger() = default;\n};\n"
            "struct file_logger : logger {\n  explicit file_logger(const char* path);\n};",
        },
        {
            "first": "#include <thread_system/scheduler/timer_queue.hpp>",
            "mode": "body",
            "includes": ["#include <thread_system/pools/thread_pool.hpp>"],
            "decls": "void flush();\nvoid expire();\n"
            "void report(std::chrono::steady_clock::time_point at, std::uint64_t index);",
            "locals": "const auto deadline = std::chrono::steady_clock::now() + 1s;",
        },
        {
            "first": "timer_queue timers{timer_routed_dispatch{[&](job_function&& f, timer_route r) {",
            "mode": "body",
            "includes": [UMBRELLA, "#include <thread_system/scheduler/timer_queue.hpp>"],
            "decls": "void refresh();",
            "locals": "std::array<job_queue, 4> queues;",
        },
        {
            "first": "using namespace thread_system;",
            "mode": "body",
            "includes": [UMBRELLA],
            "decls": "void step();\nvoid work();\nvoid flush();\n"
            "void sample(std::chrono::steady_clock::time_point at);",
        },
    ],
    "docs/COROUTINES.md": [
        {
            "first": "task<int> answer(thread_pool& pool) {",
            "mode": "split",
            "body_from": "int v = sync_wait",
            "includes": [UMBRELLA],
            "decls": "task<int> half(thread_pool& pool);\ntask<void> log_later(thread_pool& pool);",
            "locals": "thread_pool pool{2};",
        },
    ],
    "docs/LOGGER.md": [
        {
            "first": "#include <thread_system/logger/logger.hpp>",
            "mode": "body",
            "locals": 'std::string host = "localhost";\nint port = 8080;\n'
            'std::string already_formatted_text = "ready";\nstd::string disk = "/dev/sda";',
        },
        {
            "first": "#include <thread_system/logger/log_module.hpp>",
            "mode": "body",
            "locals": 'int value = 42;\nstd::string error = "none";',
            "seed_from": "",
        },
    ],
    "docs/MONITORING.md": [
        {"first": "#include <thread_system/monitoring/monitoring.hpp>", "mode": "body"},
    ],
}

FLAGS = [
    "-std=c++20",
    "-fsyntax-only",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-variable",
    "-Wno-unused-but-set-variable",
    "-Wno-unused-parameter",
]


# Info strings that name C or C++ (any case, attributes after a space).
CXX_FENCES = {"cpp", "c++", "cxx", "cc", "hpp", "hxx", "h++", "h", "c"}


def is_cxx_fence(line):
    info = line.strip()[3:].strip().split(" ")[0].split("{")[0].lower()
    return line.strip().startswith("```") and info in CXX_FENCES


def blocks_of(text):
    """(line number, [lines]) of each C++ block (```cpp, ```c++, ```C++ ...)."""
    out, current, start, inside = [], [], 0, None  # inside: None, "cxx" or "other"
    for number, line in enumerate(text.splitlines(), 1):
        fence = line.strip().startswith("```")
        if inside is None and fence:
            inside = "cxx" if is_cxx_fence(line) else "other"
            current, start = [], number + 1
        elif inside is not None and line.strip() == "```":
            if inside == "cxx":
                out.append((start, current))
            inside = None
        elif inside == "cxx":
            current.append(line)
    return out


def left_out(line):
    if line.strip() == "...":
        return "/* ... */"
    return line.replace("{ ... }", "{ /* ... */ }")


def translation_unit(block, entry):
    if entry["mode"] == "program":
        return "\n".join(block) + "\n"
    top, rest = [], []
    for line in block:
        stripped = line.strip()
        if stripped.startswith("#include") or re.match(r"^using namespace [\w:]+;", stripped):
            top.append(stripped)
        else:
            rest.append(left_out(line))
    outside = []
    if entry["mode"] == "split":
        cut = next(i for i, line in enumerate(rest) if line.strip().startswith(entry["body_from"]))
        outside, rest = rest[:cut], rest[cut:]
    body, scopes = [], entry.get("scopes", [])
    opened = False
    seed_from = entry.get("seed_from")
    for line in rest:
        if seed_from is not None and line.strip().startswith(seed_from):
            body.append('#pragma GCC diagnostic ignored "-Wunused-result"  // seed code, as ported')
            seed_from = None
        if any(line.strip().startswith(s) for s in scopes):
            body.append("}" if opened else "")
            body.append("{")
            opened = True
        body.append(line)
    if opened:
        body.append("}")
    pragma = ["#pragma GCC diagnostic push"] if entry.get("seed_from") is not None else []
    return "\n".join(
        entry.get("includes", [])
        + top
        + [COMMON, USING, entry.get("decls", ""), ""]
        + outside
        + ["", "void documentation_example() {", entry.get("locals", "")]
        + pragma
        + body
        + (["#pragma GCC diagnostic pop"] if pragma else [])
        + ["}", ""]
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cxx", default=os.environ.get("CXX_FOR_DOC_CHECK", "g++"))
    parser.add_argument("--flags", default="", help="extra compiler flags (e.g. -stdlib=libc++)")
    args = parser.parse_args()

    problems, jobs = [], []
    files = ["README.md"] + sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md") if p.name != "PERFORMANCE.md"
    )
    for name in files:
        found = blocks_of((ROOT / name).read_text())
        entries = HARNESS.get(name, [])
        for i, (line, block) in enumerate(found):
            first = next((b.strip() for b in block if b.strip()), "")
            if i >= len(entries):
                problems.append(f"{name}:{line}: a C++ example with no harness entry (add one to {__file__})")
                continue
            if entries[i]["first"] != first:
                problems.append(
                    f"{name}:{line}: example {i + 1} starts with {first!r}, its harness entry with "
                    f"{entries[i]['first']!r}: update HARNESS"
                )
                continue
            jobs.append((f"{name}:{line}", translation_unit(block, entries[i])))
        for i in range(len(found), len(entries)):
            problems.append(f"{name}: harness entry {i + 1} ({entries[i]['first']!r}) has no example")

    includes = [f"-I{ROOT / d}" for d in ("include", "logger/include", "monitoring/include")]
    command = [args.cxx] + FLAGS + shlex.split(args.flags) + includes

    def compile_one(job):
        where, source = job
        with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as tu:
            tu.write(source)
        try:
            run = subprocess.run(command + [tu.name], capture_output=True, text=True, check=False)
        finally:
            os.unlink(tu.name)
        if run.returncode == 0:
            return None
        numbered = "\n".join(f"{n:4} | {l}" for n, l in enumerate(source.splitlines(), 1))
        return f"{where}: does not compile\n{run.stderr.strip()}\n  as compiled:\n{numbered}"

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        problems += [p for p in pool.map(compile_one, jobs) if p]
    if problems:
        print("\n\n".join(problems), file=sys.stderr)
        print(f"check-doc-examples.py: {len(problems)} problem(s) in the documentation's examples", file=sys.stderr)
        return 1
    print(f"documentation: {len(jobs)} C++ examples compile ({args.cxx}, -Wall -Wextra -Werror)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
