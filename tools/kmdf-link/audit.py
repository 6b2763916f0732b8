#!/usr/bin/env python3
"""Audits a linked winverbs.sys by reading the PE image itself (not the linker's map or word).

Usage: audit.py IMAGE [--defs DIR] [--exports FILE] [--ca CERT.pem] [--map FILE]

Each check prints one PASS/FAIL line; the last line is `audit: N passed, N failed` and the
exit status is non-zero on any failure. The checks:

  format         PE32+ for AMD64 (machine 0x8664, optional-header magic 0x20b)
  subsystem      IMAGE_SUBSYSTEM_NATIVE (1)
  entry point    the function at AddressOfEntryPoint is FxDriverEntry: it calls
                 WDFLDR.SYS!WdfVersionBind through the import table and then the image's
                 exported DriverEntry (found from .pdata's bounds of that function and its call
                 instructions, so no symbol table is needed)
  imports        exactly the modules and names of def/*.def (the committed allowlist: ntoskrnl.exe
                 and WDFLDR.SYS), by name, never by ordinal; every name listed for its module in
                 windows-exports.txt with a minimum version no later than Windows 10 2004
  checksum       the optional header's CheckSum equals the PE checksum recomputed here (16-bit
                 one's-complement sum of the file without the field, plus the file length)
  dll flags      FORCE_INTEGRITY (0x80) and NX_COMPAT (0x100) set
  sections       no section both writable and executable; relocations only DIR64; no TLS
  stack frames   every function's fixed stack frame (pushed registers plus the allocation, from
                 its x64 unwind codes in .pdata/.xdata — what Windows itself unwinds with) is
                 under 4 KiB, and no `sub rsp, N` in the disassembly (llvm-objdump) allocates
                 more than the unwind codes say; the largest frames are named from the map file
                 when one is given
  bind info      the image holds one WDF_BIND_INFO naming KmdfLibrary, version 1.31, 458
                 functions, whose FuncTable points at a writable, relocated pointer slot
  signature      an Authenticode signature (WIN_CERTIFICATE revision 2.0, PKCS#7) that
                 osslsigncode verifies against the given test certificate
"""

import argparse
import array
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

IMAGE_FILE_MACHINE_AMD64 = 0x8664
PE32_PLUS = 0x20B
IMAGE_SUBSYSTEM_NATIVE = 1
DLLCHAR_FORCE_INTEGRITY = 0x0080
DLLCHAR_NX_COMPAT = 0x0100
SCN_MEM_EXECUTE = 0x20000000
SCN_MEM_WRITE = 0x80000000
REL_ABSOLUTE, REL_DIR64 = 0, 10
WINDOWS_10_2004 = (10, 0, 19041)
KMDF_MAJOR, KMDF_MINOR, KMDF_FUNCTION_COUNT = 1, 31, 458
STACK_FRAME_LIMIT = 4096
DIR_EXPORT, DIR_IMPORT, DIR_EXCEPTION, DIR_SECURITY, DIR_BASERELOC, DIR_TLS = 0, 1, 3, 4, 5, 9


class AuditError(Exception):
    """The image cannot be read as a PE at all."""


class Section:
    def __init__(self, raw):
        name, self.vsize, self.rva, self.raw_size, self.raw_ptr = struct.unpack_from("<8sIIII", raw)
        self.characteristics = struct.unpack_from("<I", raw, 36)[0]
        self.name = name.rstrip(b"\0").decode("ascii", "replace")

    def contains(self, rva):
        return self.rva <= rva < self.rva + max(self.vsize, self.raw_size)


class Image:
    """The parts of a PE32+ image the checks read."""

    def __init__(self, data):
        self.data = data
        if data[:2] != b"MZ":
            raise AuditError("not a PE image (no MZ header)")
        self.pe = struct.unpack_from("<I", data, 0x3C)[0]
        if data[self.pe:self.pe + 4] != b"PE\0\0":
            raise AuditError("not a PE image (no PE signature)")
        (self.machine, nsections, _, _, _, opt_size, self.characteristics) = struct.unpack_from(
            "<HHIIIHH", data, self.pe + 4)
        self.opt = self.pe + 24
        self.magic = struct.unpack_from("<H", data, self.opt)[0]
        if self.magic != PE32_PLUS:
            raise AuditError(f"optional header magic {self.magic:#x}, not PE32+ (0x20b)")
        self.entry = struct.unpack_from("<I", data, self.opt + 16)[0]
        self.image_base = struct.unpack_from("<Q", data, self.opt + 24)[0]
        self.checksum_offset = self.opt + 64
        self.checksum = struct.unpack_from("<I", data, self.checksum_offset)[0]
        self.subsystem, self.dll_characteristics = struct.unpack_from("<HH", data, self.opt + 68)
        count = struct.unpack_from("<I", data, self.opt + 108)[0]
        self.directories = [struct.unpack_from("<II", data, self.opt + 112 + 8 * i)
                            for i in range(min(count, 16))]
        first = self.opt + opt_size
        self.sections = [Section(data[first + 40 * i:first + 40 * (i + 1)])
                         for i in range(nsections)]

    def directory(self, index):
        return self.directories[index] if index < len(self.directories) else (0, 0)

    def section_of(self, rva):
        for section in self.sections:
            if section.contains(rva):
                return section
        return None

    def offset(self, rva):
        section = self.section_of(rva)
        if section is None or rva - section.rva >= section.raw_size:
            return None
        return section.raw_ptr + rva - section.rva

    def read(self, rva, size):
        offset = self.offset(rva)
        if offset is None:
            raise AuditError(f"RVA {rva:#x} is not backed by the file")
        return self.data[offset:offset + size]

    def u16(self, rva):
        return struct.unpack("<H", self.read(rva, 2))[0]

    def u32(self, rva):
        return struct.unpack("<I", self.read(rva, 4))[0]

    def u64(self, rva):
        return struct.unpack("<Q", self.read(rva, 8))[0]

    def cstring(self, rva):
        offset = self.offset(rva)
        end = self.data.index(b"\0", offset)
        return self.data[offset:end].decode("ascii", "replace")

    def imports(self):
        """{module: [(name or None, ordinal or None, IAT slot RVA)]}."""
        rva, size = self.directory(DIR_IMPORT)
        modules = {}
        while size and True:
            lookup, _, _, name, iat = struct.unpack("<IIIII", self.read(rva, 20))
            if not (lookup or name or iat):
                break
            module = self.cstring(name)
            entries = []
            thunk = lookup or iat
            slot = iat
            while True:
                value = self.u64(thunk)
                if value == 0:
                    break
                if value & (1 << 63):
                    entries.append((None, value & 0xFFFF, slot))
                else:
                    entries.append((self.cstring(value + 2), None, slot))
                thunk += 8
                slot += 8
            modules[module] = entries
            rva += 20
        return modules

    def exports(self):
        """{name: RVA}."""
        rva, size = self.directory(DIR_EXPORT)
        if not size:
            return {}
        (_, _, _, _, _, _, nfunctions, nnames, functions, names, ordinals) = struct.unpack(
            "<IIHHIIIIIII", self.read(rva, 40))
        result = {}
        for i in range(nnames):
            name = self.cstring(self.u32(names + 4 * i))
            ordinal = self.u16(ordinals + 2 * i)
            if ordinal < nfunctions:
                result[name] = self.u32(functions + 4 * ordinal)
        return result

    def relocations(self):
        """[(type, RVA)] of every base relocation entry."""
        rva, size = self.directory(DIR_BASERELOC)
        entries, end = [], rva + size
        while rva < end:
            page, block = struct.unpack("<II", self.read(rva, 8))
            if block < 8:
                break
            for i in range((block - 8) // 2):
                entry = self.u16(rva + 8 + 2 * i)
                entries.append((entry >> 12, page + (entry & 0xFFF)))
            rva += block
        return entries

    def functions(self):
        """[(begin, end, unwind info RVA)] from .pdata."""
        rva, size = self.directory(DIR_EXCEPTION)
        return [struct.unpack("<III", self.read(rva + 12 * i, 12)) for i in range(size // 12)]


def pe_checksum(data, checksum_offset):
    """The PE checksum (what ImageHlp's CheckSumMappedFile computes)."""
    body = bytearray(data)
    body[checksum_offset:checksum_offset + 4] = b"\0\0\0\0"
    if len(body) % 2:
        body.append(0)
    words = array.array("H")
    words.frombytes(bytes(body))
    if sys.byteorder != "little":
        words.byteswap()
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total + len(data)


def frame_size(image, unwind_rva, depth=0):
    """Bytes a function's prologue takes from the stack (pushes and allocations, without the
    return address), from its UNWIND_INFO; chained unwind info adds its parent's."""
    header = image.read(unwind_rva, 4)
    version, flags = header[0] & 7, header[0] >> 3
    count = header[2]
    if version not in (1, 2):
        raise AuditError(f"unwind info at {unwind_rva:#x} has version {version}")
    codes = struct.unpack(f"<{count}H", image.read(unwind_rva + 4, 2 * count))
    total, i = 0, 0
    while i < count:
        op, info = (codes[i] >> 8) & 0xF, codes[i] >> 12
        if op == 0:  # UWOP_PUSH_NONVOL
            total += 8
            i += 1
        elif op == 1:  # UWOP_ALLOC_LARGE
            if info == 0:
                total += codes[i + 1] * 8
                i += 2
            else:
                total += codes[i + 1] | (codes[i + 2] << 16)
                i += 3
        elif op == 2:  # UWOP_ALLOC_SMALL
            total += info * 8 + 8
            i += 1
        elif op == 3:  # UWOP_SET_FPREG
            i += 1
        elif op in (4, 8):  # UWOP_SAVE_NONVOL, UWOP_SAVE_XMM128: inside the allocation
            i += 2
        elif op in (5, 9):  # the _FAR forms
            i += 3
        elif op == 6 and version == 2:  # UWOP_EPILOG (version 2): describes an epilog
            i += 1
        elif op == 10:  # UWOP_PUSH_MACHFRAME
            total += 48 if info else 40
            i += 1
        else:
            raise AuditError(f"unwind info at {unwind_rva:#x}: unknown code {op}")
    if flags & 4 and depth < 32:  # UNW_FLAG_CHAININFO: the parent function's frame follows
        chained = unwind_rva + 4 + 2 * (count + (count & 1))
        _, _, parent = struct.unpack("<III", image.read(chained, 12))
        total += frame_size(image, parent, depth + 1)
    return total


def demangle(symbol):
    """Rust's legacy mangling (`_ZN3foo3bar17h…E`) as `foo::bar`; anything else unchanged."""
    match = re.fullmatch(r"_?_ZN(.*)E(\.\d+)?", symbol)
    if not match:
        return symbol
    rest, parts = match.group(1), []
    while rest:
        digits = re.match(r"\d+", rest)
        if not digits:
            return symbol
        n = int(digits.group(0))
        part, rest = rest[len(digits.group(0)):][:n], rest[len(digits.group(0)) + n:]
        parts.append(part[1:] if part.startswith("_$") else part)
    if parts and re.fullmatch(r"h[0-9a-f]{16}", parts[-1]):
        parts.pop()
    text = "::".join(parts)
    for code, char in (("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$u27$", "'"),
                       ("$u5b$", "["), ("$u5d$", "]"), ("$u7b$", "{"), ("$u7d$", "}"),
                       ("$RF$", "&"), ("$BP$", "*"), ("$C$", ","), ("..", "::"), ("$u7e$", "~")):
        text = text.replace(code, char)
    return text


def map_symbols(map_path, image_base):
    """[(RVA, name)] from an lld-link /MAP file, sorted; empty without one."""
    symbols = []
    if not map_path or not Path(map_path).is_file():
        return symbols
    for line in Path(map_path).read_text(errors="replace").splitlines():
        fields = line.split()
        if len(fields) >= 3 and re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{8}", fields[0]) \
                and re.fullmatch(r"[0-9a-f]{16}", fields[2]):
            symbols.append((int(fields[2], 16) - image_base, fields[1]))
    symbols.sort()
    return symbols


def name_at(symbols, rva):
    best = None
    for address, name in symbols:
        if address > rva:
            break
        best = name
    return demangle(best) if best else f"function at RVA {rva:#x}"


def load_defs(defs_dir):
    """{module: set(names)} from the .def files (LIBRARY line, then EXPORTS names)."""
    allow = {}
    for path in sorted(Path(defs_dir).glob("*.def")):
        module, names, exports = None, set(), False
        for line in path.read_text().splitlines():
            line = line.split(";", 1)[0].strip()
            if not line:
                continue
            if line.upper().startswith("LIBRARY"):
                module = line.split(None, 1)[1].strip().strip('"')
            elif line.upper() == "EXPORTS":
                exports = True
            elif exports:
                names.add(line.split()[0])
        if module is None:
            raise SystemExit(f"{path}: no LIBRARY line")
        allow[module] = names
    return allow


def load_exports(path):
    """{(module lower-case, name): (version tuple, page)} from windows-exports.txt."""
    table = {}
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        module, name, since, page = fields[0], fields[1], fields[2], fields[3]
        table[(module.lower(), name)] = (tuple(int(x) for x in since.split(".")), page)
    return table


def version_text(version):
    return ".".join(str(x) for x in version)


class Audit:
    def __init__(self):
        self.results = []

    def check(self, name, ok, detail):
        self.results.append((ok, name, detail))
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")


def check_format(audit, image):
    audit.check("format", image.machine == IMAGE_FILE_MACHINE_AMD64 and image.magic == PE32_PLUS,
                f"machine {image.machine:#06x}, optional header {image.magic:#x} (PE32+ AMD64 is "
                "0x8664 / 0x20b)")
    audit.check("subsystem", image.subsystem == IMAGE_SUBSYSTEM_NATIVE,
                f"{image.subsystem} (IMAGE_SUBSYSTEM_NATIVE is 1)")


def check_imports(audit, image, allow, known):
    modules = image.imports()
    found = {m: {n for n, _, _ in entries if n} for m, entries in modules.items()}
    ordinals = [f"{m}!#{o}" for m, entries in modules.items() for n, o, _ in entries if n is None]
    lower_allow = {m.lower(): m for m in allow}
    problems = []
    for module in sorted(found):
        if module.lower() not in lower_allow:
            problems.append(f"imports from {module} ({', '.join(sorted(found[module]))}), a module "
                            f"not in the allowlist ({', '.join(sorted(allow))})")
    for module, names in sorted(allow.items()):
        actual = next((found[m] for m in found if m.lower() == module.lower()), set())
        extra, missing = sorted(actual - names), sorted(names - actual)
        if extra:
            problems.append(f"imports {', '.join(extra)} from {module}, not in def/ (the allowlist)")
        if missing:
            problems.append(f"def/ allows {', '.join(missing)} from {module}, which the image does "
                            "not import (the allowlist must be exact)")
    if ordinals:
        problems.append(f"imports by ordinal: {', '.join(ordinals)}")
    unknown, too_new = [], []
    for module, names in sorted(found.items()):
        for name in sorted(names):
            entry = known.get((module.lower(), name))
            if entry is None:
                unknown.append(f"{module}!{name}")
            elif entry[0] > WINDOWS_10_2004:
                too_new.append(f"{module}!{name} (since {version_text(entry[0])})")
    if unknown:
        problems.append(f"imports {', '.join(unknown)}, which Windows 10 2004+ does not export "
                        "(not in windows-exports.txt)")
    if too_new:
        problems.append(f"imports routines newer than Windows 10 2004: {', '.join(too_new)}")
    total = sum(len(n) for n in found.values())
    summary = ", ".join(f"{m}: {len(n)}" for m, n in sorted(found.items()))
    audit.check("imports", not problems,
                "; ".join(problems) if problems else
                f"{total} routines ({summary}), exactly def/'s allowlist, each exported by "
                "Windows 10 2004+ (windows-exports.txt)")
    return modules


def check_entry(audit, image, modules):
    slots = {slot: (module, name) for module, entries in modules.items()
             for name, _, slot in entries}
    exports = image.exports()
    driver_entry = exports.get("DriverEntry")
    function = next(((b, e) for b, e, _ in image.functions() if b <= image.entry < e), None)
    if function is None:
        audit.check("entry point", False, f"AddressOfEntryPoint {image.entry:#x} is in no function "
                    "of .pdata")
        return
    begin, end = function
    code = image.read(begin, end - begin)
    calls = []  # (offset, what)
    for i in range(len(code) - 5):
        if code[i] == 0xE8:
            target = begin + i + 5 + struct.unpack_from("<i", code, i + 1)[0]
            if target == driver_entry:
                calls.append((i, "DriverEntry"))
                continue
            try:
                thunk = image.read(target, 6)
            except AuditError:
                continue
            if thunk[:2] == b"\xff\x25":
                slot = target + 6 + struct.unpack_from("<i", thunk, 2)[0]
                if slot in slots:
                    calls.append((i, "!".join(slots[slot])))
        elif code[i:i + 2] == b"\xff\x15" and i + 6 <= len(code):
            slot = begin + i + 6 + struct.unpack_from("<i", code, i + 2)[0]
            if slot in slots:
                calls.append((i, "!".join(slots[slot])))
    names = [what for _, what in sorted(calls)]
    bind = next((i for i, n in enumerate(names) if n.lower() == "wdfldr.sys!wdfversionbind"), None)
    entry_call = next((i for i, n in enumerate(names) if n == "DriverEntry"), None)
    ok = (driver_entry is not None and bind is not None and entry_call is not None
          and bind < entry_call and image.entry == begin)
    audit.check("entry point", ok,
                f"AddressOfEntryPoint {image.entry:#x}: a function ({end - begin} bytes) that calls "
                f"{' → '.join(names) or 'nothing recognisable'}"
                + ("" if ok else "; FxDriverEntry calls WDFLDR.SYS!WdfVersionBind, then the "
                   "exported DriverEntry"))


def check_checksum(audit, image):
    computed = pe_checksum(image.data, image.checksum_offset)
    audit.check("checksum", image.checksum == computed and computed != 0,
                f"header {image.checksum:#010x}, recomputed {computed:#010x}")


def check_flags_and_sections(audit, image):
    flags = image.dll_characteristics
    audit.check("dll flags", bool(flags & DLLCHAR_FORCE_INTEGRITY and flags & DLLCHAR_NX_COMPAT),
                f"DllCharacteristics {flags:#06x}: FORCE_INTEGRITY "
                f"{'set' if flags & DLLCHAR_FORCE_INTEGRITY else 'MISSING'}, NX_COMPAT "
                f"{'set' if flags & DLLCHAR_NX_COMPAT else 'MISSING'}")
    wx = [s.name for s in image.sections
          if s.characteristics & SCN_MEM_EXECUTE and s.characteristics & SCN_MEM_WRITE]
    relocations = image.relocations()
    odd = sorted({t for t, _ in relocations if t not in (REL_ABSOLUTE, REL_DIR64)})
    tls = image.directory(DIR_TLS)[1]
    problems = []
    if wx:
        problems.append(f"writable and executable: {', '.join(wx)}")
    if odd:
        problems.append(f"relocation types other than DIR64: {odd}")
    if tls:
        problems.append("a TLS directory (a driver cannot have one)")
    layout = ", ".join(
        f"{s.name} {'R' if s.characteristics & 0x40000000 else '-'}"
        f"{'W' if s.characteristics & SCN_MEM_WRITE else '-'}"
        f"{'X' if s.characteristics & SCN_MEM_EXECUTE else '-'}" for s in image.sections)
    audit.check("sections", not problems,
                "; ".join(problems) if problems else
                f"{layout}; {sum(1 for t, _ in relocations if t == REL_DIR64)} DIR64 relocations; "
                "no TLS")


def largest_sub_rsp(image_path):
    """The largest immediate of `sub rsp, N` in the disassembly, or None without llvm-objdump."""
    objdump = shutil.which("llvm-objdump")
    if objdump is None:
        return None
    listing = subprocess.run([objdump, "-d", "-M", "intel", "--no-show-raw-insn", str(image_path)],
                             capture_output=True, text=True, check=True).stdout
    sizes = [int(m.group(1), 0) for m in re.finditer(r"\bsub\s+rsp,\s*(0x[0-9a-f]+|\d+)", listing)]
    return max(sizes, default=0)


def check_stack(audit, image, image_path, symbols):
    frames = []
    for begin, _, unwind in image.functions():
        try:
            frames.append((frame_size(image, unwind), begin))
        except AuditError as error:
            audit.check("stack frames", False, str(error))
            return
    frames.sort(reverse=True)
    largest = frames[0][0] if frames else 0
    top = "; ".join(f"{size} B {name_at(symbols, begin)}" for size, begin in frames[:3])
    sub = largest_sub_rsp(image_path)
    problems = []
    if largest >= STACK_FRAME_LIMIT:
        over = [f"{name_at(symbols, b)} ({s} B)" for s, b in frames if s >= STACK_FRAME_LIMIT]
        problems.append(f"frames of 4 KiB or more: {', '.join(over)}")
    if sub is not None and sub > largest:
        problems.append(f"the disassembly has `sub rsp, {sub}`, more than any unwind code "
                        f"allocates ({largest})")
    cross = ("not cross-checked (no llvm-objdump)" if sub is None
             else f"largest `sub rsp` in the disassembly {sub} B")
    audit.check("stack frames", not problems,
                "; ".join(problems) if problems else
                f"{len(frames)} functions with unwind info, largest frame {largest} B "
                f"(limit {STACK_FRAME_LIMIT}): {top}; {cross}")


def check_bind_info(audit, image):
    relocated = {rva for t, rva in image.relocations() if t == REL_DIR64}
    found = []
    for section in image.sections:
        if section.characteristics & SCN_MEM_EXECUTE:
            continue
        raw = image.data[section.raw_ptr:section.raw_ptr + section.raw_size]
        for offset in range(0, len(raw) - 48 + 1, 8):
            size, component = struct.unpack_from("<I4xQ", raw, offset)
            if size != 48 or not image.image_base <= component < image.image_base + (1 << 32):
                continue
            try:
                text = image.read(component - image.image_base, 24).decode("utf-16-le")
            except (AuditError, UnicodeDecodeError):
                continue
            if text != "KmdfLibrary\0":
                continue
            major, minor, build, count, table, _ = struct.unpack_from("<IIIIQQ", raw, offset + 16)
            found.append((section.rva + offset, major, minor, build, count, table))
    if len(found) != 1:
        audit.check("bind info", False, f"{len(found)} WDF_BIND_INFO structures naming KmdfLibrary "
                    "(exactly one expected)")
        return
    rva, major, minor, build, count, table = found[0]
    table_rva = table - image.image_base
    slot = image.section_of(table_rva)
    problems = []
    if (major, minor, count) != (KMDF_MAJOR, KMDF_MINOR, KMDF_FUNCTION_COUNT):
        problems.append(f"expected {KMDF_MAJOR}.{KMDF_MINOR} with {KMDF_FUNCTION_COUNT} functions")
    if slot is None or not slot.characteristics & SCN_MEM_WRITE:
        problems.append("FuncTable does not point into a writable section")
    if rva + 8 not in relocated or rva + 32 not in relocated:
        problems.append("its Component and FuncTable pointers are not relocated")
    audit.check("bind info", not problems,
                f"WDF_BIND_INFO at RVA {rva:#x}: KmdfLibrary {major}.{minor}.{build}, FuncCount "
                f"{count}, FuncTable → RVA {table_rva:#x} in {slot.name if slot else '?'}"
                + (f"; {'; '.join(problems)}" if problems else ""))


def check_signature(audit, image, image_path, ca):
    offset, size = image.directory(DIR_SECURITY)
    if not size:
        audit.check("signature", False, "no certificate table (the image is not signed)")
        return
    length, revision, kind = struct.unpack_from("<IHH", image.data, offset)
    if revision != 0x0200 or kind != 0x0002:
        audit.check("signature", False, f"WIN_CERTIFICATE revision {revision:#x} type {kind:#x} "
                    "(Authenticode is revision 0x200, type 2)")
        return
    tool = shutil.which("osslsigncode")
    if tool is None or ca is None:
        audit.check("signature", False, "cannot verify: osslsigncode or the CA certificate is "
                    "missing")
        return
    run = subprocess.run([tool, "verify", "-CAfile", str(ca), "-in", str(image_path)],
                         capture_output=True, text=True)
    output = run.stdout + run.stderr
    ok = run.returncode == 0 and "Signature verification: ok" in output
    digest = re.search(r"Message digest algorithm\s*:\s*(\S+)", output)
    audit.check("signature", ok,
                f"Authenticode ({length} bytes, digest {digest.group(1) if digest else '?'}), "
                + ("osslsigncode verifies it against the test certificate" if ok else
                   "osslsigncode verify FAILED: " + " / ".join(
                       l.strip() for l in output.splitlines() if "fail" in l.lower() or
                       "error" in l.lower() or "mismatch" in l.lower())[:400]))


def audit_image(image_path, defs, exports, ca, map_path):
    audit = Audit()
    data = Path(image_path).read_bytes()
    try:
        image = Image(data)
    except AuditError as error:
        audit.check("format", False, str(error))
        return audit
    check_format(audit, image)
    modules = check_imports(audit, image, load_defs(defs), load_exports(exports))
    check_entry(audit, image, modules)
    check_checksum(audit, image)
    check_flags_and_sections(audit, image)
    check_stack(audit, image, image_path, map_symbols(map_path, image.image_base))
    check_bind_info(audit, image)
    check_signature(audit, image, image_path, ca)
    return audit


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("image")
    parser.add_argument("--defs", default=str(HERE / "def"))
    parser.add_argument("--exports", default=str(HERE / "windows-exports.txt"))
    parser.add_argument("--ca", help="the test-signing certificate (PEM)")
    parser.add_argument("--map", help="the linker's map file, to name the largest stack frames")
    args = parser.parse_args()
    audit = audit_image(args.image, args.defs, args.exports, args.ca, args.map)
    passed = sum(1 for ok, _, _ in audit.results if ok)
    failed = len(audit.results) - passed
    print(f"audit: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
