#!/usr/bin/env python3
"""The audit's own tests: each plants one defect into a copy of the linked winverbs.sys and
requires the audit to fail for that reason (and, where the defect touches nothing else, for no
other). Run by `build` after the link; standalone: `python3 -m unittest tools/kmdf-link/test_audit.py`
once `build` has produced target/winverbs/winverbs.sys.
"""

import contextlib
import io
import shutil
import struct
import tempfile
import unittest
from pathlib import Path

import audit

HERE = Path(__file__).resolve().parent
OUT = HERE / "target" / "winverbs"
SIGNED = OUT / "winverbs.sys"
UNSIGNED = OUT / "winverbs.unsigned.sys"
CA = HERE / "target" / "test-signing" / "cert.pem"
MAP = OUT / "winverbs.map"


def results(image_path, defs=HERE / "def"):
    """{check name: (ok, detail)} of an audit of `image_path`, quietly."""
    with contextlib.redirect_stdout(io.StringIO()):
        run = audit.audit_image(image_path, defs, HERE / "windows-exports.txt", CA, MAP)
    return {name: (ok, detail) for ok, name, detail in run.results}


class PlantedDefects(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not SIGNED.is_file() or not CA.is_file():
            raise RuntimeError(f"{SIGNED} or {CA} is missing: run tools/kmdf-link/build first")
        cls.original = SIGNED.read_bytes()

    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="kmdf-link-audit-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.data = bytearray(self.original)
        self.image = audit.Image(bytes(self.data))

    def write(self, fix_checksum=True):
        """The planted copy, with its checksum made valid again unless told otherwise."""
        if fix_checksum:
            offset = self.image.checksum_offset
            struct.pack_into("<I", self.data, offset, audit.pe_checksum(bytes(self.data), offset))
        path = self.dir / "winverbs.sys"
        path.write_bytes(bytes(self.data))
        return path

    def rename(self, old, new):
        """Renames a NUL-terminated ASCII string of the image in place (padded with NULs)."""
        self.assertLessEqual(len(new), len(old))
        at = self.data.find(old.encode() + b"\0")
        self.assertGreater(at, 0, f"{old} not found in the image")
        self.data[at:at + len(old)] = new.encode().ljust(len(old), b"\0")

    def only_failures(self, found, expected):
        failed = sorted(name for name, (ok, _) in found.items() if not ok)
        self.assertEqual(failed, sorted(expected), found)

    def test_the_linked_image_passes_every_check(self):
        found = results(SIGNED)
        self.only_failures(found, [])
        self.assertEqual(len(found), 10)

    def test_an_import_windows_does_not_export_fails_even_when_def_allows_it(self):
        # What a developer who adds a call and its def line to a routine Windows lacks gets.
        self.rename("KeSetEvent", "KeZapEvent")
        defs = self.dir / "def"
        shutil.copytree(HERE / "def", defs)
        nt = defs / "ntoskrnl.def"
        nt.write_text(nt.read_text().replace("KeSetEvent", "KeZapEvent"))
        found = results(self.write(), defs)
        # The signature covers the image: any change after signing breaks it too.
        self.only_failures(found, ["imports", "signature"])
        detail = found["imports"][1]
        self.assertIn("ntoskrnl.exe!KeZapEvent, which Windows 10 2004+ does not export", detail)
        self.assertNotIn("not in def/", detail)

    def test_an_import_missing_from_the_allowlist_fails(self):
        self.rename("KeSetEvent", "KeZapEvent")
        found = results(self.write())
        self.only_failures(found, ["imports", "signature"])
        detail = found["imports"][1]
        self.assertIn("imports KeZapEvent from ntoskrnl.exe, not in def/", detail)
        self.assertIn("def/ allows KeSetEvent from ntoskrnl.exe, which the image does not import",
                      detail)

    def test_an_import_from_another_module_fails(self):
        self.rename("WDFLDR.SYS", "HAL.dll")
        found = results(self.write())
        self.assertFalse(found["imports"][0])
        self.assertIn("imports from HAL.dll (WdfVersionBind, WdfVersionUnbind), a module not in "
                      "the allowlist", found["imports"][1])

    def test_a_wrong_checksum_fails(self):
        offset = self.image.checksum_offset
        struct.pack_into("<I", self.data, offset, self.image.checksum ^ 0x10)
        found = results(self.write(fix_checksum=False))
        # Authenticode's digest leaves the checksum field out: only the checksum check sees it.
        self.only_failures(found, ["checksum"])

    def test_a_zero_checksum_fails(self):
        # lld-link's output without /RELEASE.
        struct.pack_into("<I", self.data, self.image.checksum_offset, 0)
        found = results(self.write(fix_checksum=False))
        self.only_failures(found, ["checksum"])

    def test_missing_force_integrity_fails(self):
        offset = self.image.opt + 70
        flags = struct.unpack_from("<H", self.data, offset)[0]
        struct.pack_into("<H", self.data, offset, flags & ~audit.DLLCHAR_FORCE_INTEGRITY)
        found = results(self.write())
        self.only_failures(found, ["dll flags", "signature"])
        self.assertIn("FORCE_INTEGRITY MISSING", found["dll flags"][1])

    def test_a_writable_executable_section_fails(self):
        index = next(i for i, s in enumerate(self.image.sections) if s.name == ".data")
        offset = self.image.opt + struct.unpack_from("<H", self.data, self.image.pe + 20)[0]
        at = offset + 40 * index + 36
        flags = struct.unpack_from("<I", self.data, at)[0]
        struct.pack_into("<I", self.data, at, flags | audit.SCN_MEM_EXECUTE)
        found = results(self.write())
        self.assertFalse(found["sections"][0])
        self.assertIn("writable and executable: .data", found["sections"][1])

    def largest_frame(self):
        """(size, begin, file offset of its UWOP_ALLOC_LARGE slot) of the largest frame."""
        best = None
        for begin, _, unwind in self.image.functions():
            size = audit.frame_size(self.image, unwind)
            if best is None or size > best[0]:
                best = (size, begin, unwind)
        size, begin, unwind = best
        count = self.image.read(unwind, 4)[2]
        codes = struct.unpack(f"<{count}H", self.image.read(unwind + 4, 2 * count))
        index = next(i for i, c in enumerate(codes) if (c >> 8) & 0xF == 1 and c >> 12 == 0)
        return size, begin, self.image.offset(unwind + 4 + 2 * (index + 1))

    def test_a_frame_of_4_kib_fails(self):
        size, _, slot = self.largest_frame()
        allocation = struct.unpack_from("<H", self.data, slot)[0] * 8
        struct.pack_into("<H", self.data, slot, (allocation + 4096 - size + 8) // 8 + 1)
        found = results(self.write())
        self.assertFalse(found["stack frames"][0])
        self.assertIn("frames of 4 KiB or more", found["stack frames"][1])

    def test_an_allocation_the_unwind_codes_do_not_describe_fails(self):
        # The disassembly cross-check: unwind codes that claim less than the prologue takes.
        _, _, slot = self.largest_frame()
        struct.pack_into("<H", self.data, slot, 1)
        found = results(self.write())
        self.assertFalse(found["stack frames"][0])
        self.assertIn("more than any unwind code allocates", found["stack frames"][1])

    def test_a_bind_info_for_another_table_size_fails(self):
        at = self.data.find(struct.pack("<IIII", 1, 31, 0, 458))
        self.assertGreater(at, 0)
        struct.pack_into("<I", self.data, at + 12, 457)
        found = results(self.write())
        self.only_failures(found, ["bind info", "signature"])
        self.assertIn("expected 1.31 with 458 functions", found["bind info"][1])

    def test_an_entry_point_that_is_not_fx_driver_entry_fails(self):
        driver_entry = self.image.exports()["DriverEntry"]
        struct.pack_into("<I", self.data, self.image.opt + 16, driver_entry)
        found = results(self.write())
        self.only_failures(found, ["entry point", "signature"])

    def test_the_unsigned_image_fails_only_the_signature(self):
        found = results(UNSIGNED)
        self.only_failures(found, ["signature"])
        self.assertIn("not signed", found["signature"][1])


if __name__ == "__main__":
    unittest.main()
