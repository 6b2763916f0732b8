#!/usr/bin/env python3
"""Compares our WDF subset with Microsoft's KMDF headers, for whoever extends the subset.

    python3 tools/kmdf-check/compare_subset.py DIR

DIR holds Microsoft's KMDF 1.31 headers (for example src/publicinc/wdf/kmdf/1.31 of a local
checkout of microsoft/Windows-Driver-Frameworks). Nothing is downloaded and nothing of those
headers is copied into the repository: both header sets are parsed by clang over the same
mingw-w64 base headers, with the flags the check uses, and for every name the subset declares
this compares
  - typedefs (DDI function-pointer types, callbacks, handles), through clang's AST: parameter
    and return types and calling conventions;
  - structure members and their types;
  - sizes and member offsets of every structure;
  - the value of every enumerator (table indices included).
It prints each difference and exits 1 if there is any. `check` does not run it: CI has no
copy of the headers and must not fetch one.
"""

import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OURS = HERE / "include" / "wdf" / "kmdf" / "1.31"
COMPAT = HERE / "include" / "km"
MINGW = Path("/usr/share/mingw-w64/include")
FLAGS = [
    "--target=x86_64-pc-windows-msvc", "-fms-compatibility", "-fms-extensions",
    "-fgnuc-version=4.2.1", "-fno-builtin", "-D_KERNEL_MODE", "-DSTRICT", "-D_WIN64",
    "-D_AMD64_", "-DAMD64", "-DKMDF_VERSION_MAJOR=1", "-DKMDF_VERSION_MINOR=31",
    "-Wno-pragma-pack", "-Wno-ignored-attributes", "-Wno-microsoft",
    "-Wno-incompatible-library-redeclaration", f"-I{COMPAT}", f"-I{MINGW / 'ddk'}", f"-I{MINGW}",
]
PRELUDE = '#include "kmdf_check_base.h"\n#include "wdf.h"\n#include <stddef.h>\n'


def clang(include_dir, source, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as file:
        file.write(PRELUDE + source)
    result = subprocess.run(["clang", *FLAGS, f"-I{include_dir}", *args, file.name],
                            capture_output=True, text=True)
    Path(file.name).unlink()
    if result.returncode != 0:
        raise SystemExit(f"clang failed on {include_dir}:\n{result.stderr[-3000:]}")
    return result.stdout


def case_insensitive_copy(real_dir, scratch):
    """The WDK's wdf.h includes e.g. "WdfQueryInterface.h", shipped as wdfqueryinterface.h; a
    Windows file system does not care, Linux does."""
    files = {path.name.lower(): path for path in Path(real_dir).glob("*.h")}
    for path in files.values():
        (scratch / path.name).symlink_to(path)
    for path in files.values():
        for name in re.findall(r'#include\s+"([^"]+)"', path.read_text(errors="replace")):
            if not (scratch / name).exists() and name.lower() in files:
                (scratch / name).symlink_to(files[name.lower()])
    return scratch


def ast_facts(include_dir):
    """{typedef name: type} and {struct tag: [(depth, member, type)]} from clang's AST dump."""
    dump = clang(include_dir, "", "-fsyntax-only", "-Xclang", "-ast-dump", "-fno-color-diagnostics")
    typedefs, records, current = {}, {}, None
    for line in dump.splitlines():
        depth = len(line) - len(line.lstrip(" |`-"))
        typedef = re.search(r"TypedefDecl .* (?:referenced )?(\w+) '(.*?)'(?::'(.*)')?$", line)
        if typedef and depth <= 2:
            typedefs[typedef.group(1)] = (typedef.group(2), typedef.group(3))
        record = re.search(r"RecordDecl .* struct (\w+) definition", line)
        if depth <= 2:
            current = record.group(1) if record else None
            if current:
                records[current] = []
        field = re.search(r"FieldDecl .* (?:referenced )?(\w+) '(.*?)'", line)
        if field and current:
            kind = re.sub(r"\(unnamed (struct|union) at [^)]*\)", r"(unnamed \1)", field.group(2))
            records[current].append((depth, field.group(1), kind))
    return typedefs, records


def values(include_dir, expressions):
    """Evaluates integer constant expressions by compiling them into globals."""
    source = "".join(f"long long v{i} = (long long)({e});\n" for i, e in enumerate(expressions))
    ir = clang(include_dir, source, "-S", "-emit-llvm", "-o", "-")
    found = dict(re.findall(r"^@v(\d+) = .*? i64 (-?\d+)", ir, re.M))
    return [found.get(str(i)) for i in range(len(expressions))]


def main():
    if len(sys.argv) != 2 or not Path(sys.argv[1], "wdf.h").is_file():
        raise SystemExit(__doc__)
    with tempfile.TemporaryDirectory() as scratch:
        real = case_insensitive_copy(sys.argv[1], Path(scratch))
        ours_typedefs, ours_records = ast_facts(OURS)
        real_typedefs, real_records = ast_facts(real)

        header = (OURS / "wdf.h").read_text()
        names = sorted(set(re.findall(r"\b((?:P?C?WDF|PFN_|EVT_)\w+)\b", header)) & set(ours_typedefs))
        enumerators = sorted(set(re.findall(r"^\s+(Wdf\w+)\s*(?:=[^,]*)?,", header, re.M)))
        structs = [n for n in names if re.fullmatch(r"(const )?struct \w+", ours_typedefs[n][0])]
        layout = [f"sizeof({s})" for s in structs]
        for struct in structs:
            tag = ours_typedefs[struct][0].split()[-1]
            layout += [f"offsetof({struct}, {member})"
                       for depth, member, _ in ours_records.get(tag, []) if depth == 4]

        problems = []
        for name in names:
            if ours_typedefs[name] != real_typedefs.get(name):
                problems.append(f"typedef {name}:\n    ours {ours_typedefs[name]}\n"
                                f"    real {real_typedefs.get(name)}")
        wdf_records = {tag: m for tag, m in ours_records.items() if tag.startswith("_WDF")}
        for tag, members in wdf_records.items():
            if members != real_records.get(tag):
                problems.append(f"struct {tag} members:\n    ours {members}\n"
                                f"    real {real_records.get(tag)}")
        expressions = enumerators + layout
        for expression, ours, real_value in zip(expressions, values(OURS, expressions),
                                                values(real, expressions)):
            if ours != real_value:
                problems.append(f"{expression}: ours {ours}, real {real_value}")

    for problem in problems:
        print("DIFFERENT " + problem)
    print(f"compared {len(names)} typedefs, {len(wdf_records)} structures, "
          f"{len(enumerators)} enumerators, {len(layout)} sizes/offsets: "
          f"{len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
