#!/usr/bin/env python3
"""Checks docs/ARCHITECTURE.md's "Layers" block against the tree.

1. The block lists exactly the headers under include/thread_system/<folder>/
   and the sources under src/ (nothing missing, nothing that does not exist).
2. Every #include of one folder's header by another goes down the layer
   order (the block's folder order, lowest first; detail/ and core/ form one
   layer, services/ and diagnostics/ sit beside sync/), and src/ files
   include only headers.
3. Tests mirror headers: every header include/thread_system/<folder>/<h>.hpp
   has tests/<folder>/<h>_test.cpp (the umbrella thread_system.hpp:
   tests/thread_system_test.cpp), and every such test file is built
   (named in a tests/ CMakeLists.txt).

Exit status 0 when all three hold; otherwise every difference is printed.
Usage: scripts/check-architecture.py [repository root]
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
doc = (root / "docs" / "ARCHITECTURE.md").read_text()
section = doc.split("## Layers", 1)[1]
block = section.split("```", 2)[1]

listed = {}  # folder -> set of files, in the block's order
order = []
current = None
for line in block.splitlines():
    m = re.match(r"^  ([a-z_]+)/\s+(.*)$", line)
    if m:
        current = m.group(1)
        order.append(current)
        listed[current] = set(m.group(2).split())
        continue
    m = re.match(r"^src/\s+(.*)$", line)
    if m:
        current = "src"
        listed["src"] = set(m.group(1).split())
        continue
    if current and line.startswith("      ") and line.strip() and not line.strip().startswith("("):
        listed[current] |= set(line.split())
for files in listed.values():
    files.discard("(umbrella)")

problems = []
include_root = root / "include" / "thread_system"
actual = {d.name: {f.name for f in d.glob("*.hpp")} for d in include_root.iterdir() if d.is_dir()}
actual["src"] = {f.name for f in (root / "src").iterdir() if f.suffix in (".cpp", ".hpp")}
for folder in sorted(set(actual) | set(listed)):
    have, doc_has = actual.get(folder, set()), listed.get(folder, set())
    for name in sorted(have - doc_has):
        problems.append(f"{folder}/{name} exists but docs/ARCHITECTURE.md does not list it")
    for name in sorted(doc_has - have):
        problems.append(f"docs/ARCHITECTURE.md lists {folder}/{name}, which does not exist")

# Layer ranks: the block's order, with detail/core sharing the lowest and
# services/diagnostics beside sync.
same_as = {"core": "detail", "services": "sync", "diagnostics": "sync"}
rank = {}
next_rank = 0
for folder in order:
    if folder in same_as and same_as[folder] in rank:
        rank[folder] = rank[same_as[folder]]
    else:
        rank[folder] = next_rank
        next_rank += 1

include_re = re.compile(r'^\s*#\s*include\s+"thread_system/([a-z_]+)/([a-z_]+\.hpp)"', re.M)
for folder, files in actual.items():
    if folder == "src":
        continue
    for name in files:
        text = (include_root / folder / name).read_text()
        for target_folder, target in include_re.findall(text):
            if target_folder == folder:
                continue
            if target_folder not in rank or folder not in rank:
                continue
            if rank[target_folder] > rank[folder]:
                problems.append(
                    f"{folder}/{name} includes {target_folder}/{target}: {target_folder}/ is above {folder}/"
                )

# Tests mirror headers.
# The .cpp files the tests' CMakeLists.txt files name (comments stripped,
# each path resolved against its CMakeLists.txt's folder).
built = set()
for lists in (root / "tests").rglob("CMakeLists.txt"):
    for line in lists.read_text().splitlines():
        code = line.split("#", 1)[0]
        for token in re.findall(r"[A-Za-z0-9_./-]+\.cpp", code):
            built.add((lists.parent / token).resolve())
mirrors = {("", "thread_system.hpp"): root / "tests" / "thread_system_test.cpp"}
for folder, files in actual.items():
    if folder == "src":
        continue
    for name in files:
        mirrors[(folder, name)] = root / "tests" / folder / (name[: -len(".hpp")] + "_test.cpp")
for (folder, name), test in sorted(mirrors.items()):
    header = f"{folder}/{name}" if folder else name
    relative = test.relative_to(root / "tests").as_posix()
    if not test.is_file():
        problems.append(f"{header} has no test file tests/{relative}")
    elif test.resolve() not in built:
        problems.append(f"tests/{relative} is not built (no tests/ CMakeLists.txt names it)")

if problems:
    print("architecture: the tree, docs/ARCHITECTURE.md and tests/ disagree:")
    for p in problems:
        print("  " + p)
    sys.exit(1)
count = sum(len(v) for v in actual.values())
print(f"architecture: {count} files listed, every include goes down the layers, every header has its test file")
