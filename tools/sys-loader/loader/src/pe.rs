//! Reading a PE32+ driver image and checking, before anything is mapped, everything the
//! loader will trust: headers, section bounds and alignment, base relocations (only DIR64, each
//! inside a section and holding an address of the image), imports (by name, slots in bounds)
//! and the entry point (inside an executable section). A file that fails any of these is
//! refused with a message that says what is wrong and where; nothing of it is executed.

use std::collections::HashMap;
use std::fmt;

/// What the loader needs of an image, read and checked.
#[derive(Debug)]
pub struct Pe {
    /// The preferred base (`ImageBase`).
    pub image_base: u64,
    /// `SizeOfImage`.
    pub size_of_image: usize,
    /// `SizeOfHeaders`.
    pub size_of_headers: usize,
    /// `AddressOfEntryPoint`.
    pub entry: u32,
    /// The sections.
    pub sections: Vec<Section>,
    /// The RVA of every DIR64 base relocation.
    pub relocations: Vec<u32>,
    /// Every import.
    pub imports: Vec<Import>,
    /// The exports by name (RVA).
    pub exports: HashMap<String, u32>,
}

/// A section.
#[derive(Clone, Debug)]
pub struct Section {
    /// Its name.
    pub name: String,
    /// `VirtualAddress`.
    pub rva: u32,
    /// `VirtualSize`.
    pub virtual_size: u32,
    /// `PointerToRawData`.
    pub raw_offset: u32,
    /// `SizeOfRawData`.
    pub raw_size: u32,
    /// `Characteristics`.
    pub characteristics: u32,
}

/// `IMAGE_SCN_MEM_EXECUTE`.
pub const SCN_MEM_EXECUTE: u32 = 0x2000_0000;
/// `IMAGE_SCN_MEM_READ`.
pub const SCN_MEM_READ: u32 = 0x4000_0000;
/// `IMAGE_SCN_MEM_WRITE`.
pub const SCN_MEM_WRITE: u32 = 0x8000_0000;

impl Section {
    /// Its extent in memory.
    pub fn span(&self) -> u32 {
        self.virtual_size.max(self.raw_size)
    }

    /// Whether `rva..rva + len` lies inside it.
    pub fn holds(&self, rva: u32, len: u32) -> bool {
        rva >= self.rva
            && u64::from(rva) + u64::from(len) <= u64::from(self.rva) + u64::from(self.span())
    }

    /// Writable.
    pub fn writable(&self) -> bool {
        self.characteristics & SCN_MEM_WRITE != 0
    }

    /// Executable.
    pub fn executable(&self) -> bool {
        self.characteristics & SCN_MEM_EXECUTE != 0
    }
}

/// One imported routine.
#[derive(Clone, Debug)]
pub struct Import {
    /// The module (`ntoskrnl.exe`, `WDFLDR.SYS`).
    pub module: String,
    /// The routine.
    pub name: String,
    /// Its slot in the import address table.
    pub slot: u32,
}

/// Why an image is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeError(pub String);

impl fmt::Display for PeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PeError {}

fn error<T>(message: impl Into<String>) -> Result<T, PeError> {
    Err(PeError(message.into()))
}

/// The machine type of x64 images.
const IMAGE_FILE_MACHINE_AMD64: u16 = 0x8664;
/// The optional header magic of PE32+.
const PE32_PLUS: u16 = 0x20B;
/// `IMAGE_SUBSYSTEM_NATIVE`: a driver.
const IMAGE_SUBSYSTEM_NATIVE: u16 = 1;
/// The section alignment the loader maps with (one page per protection).
pub const PAGE: u32 = 4096;
/// Base relocation types.
const REL_ABSOLUTE: u16 = 0;
const REL_DIR64: u16 = 10;
/// Data directory indices.
const DIR_EXPORT: usize = 0;
const DIR_IMPORT: usize = 1;
const DIR_BASERELOC: usize = 5;
const DIR_TLS: usize = 9;

/// A little-endian reader over the file with bounds checks.
struct File<'a>(&'a [u8]);

impl File<'_> {
    fn bytes(&self, offset: usize, len: usize, what: &str) -> Result<&[u8], PeError> {
        offset
            .checked_add(len)
            .and_then(|end| self.0.get(offset..end))
            .ok_or_else(|| {
                PeError(format!(
                    "{what} at file offset {offset:#x} is beyond the end of the file"
                ))
            })
    }

    fn u16(&self, offset: usize, what: &str) -> Result<u16, PeError> {
        let b = self.bytes(offset, 2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&self, offset: usize, what: &str) -> Result<u32, PeError> {
        let b = self.bytes(offset, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&self, offset: usize, what: &str) -> Result<u64, PeError> {
        let b = self.bytes(offset, 8, what)?;
        let mut v = [0; 8];
        v.copy_from_slice(b);
        Ok(u64::from_le_bytes(v))
    }
}

/// The file offset of `rva..rva + len`, which must lie in one section's file data.
fn offset_of(sections: &[Section], rva: u32, len: u32, what: &str) -> Result<usize, PeError> {
    for s in sections {
        if rva >= s.rva
            && u64::from(rva) + u64::from(len) <= u64::from(s.rva) + u64::from(s.raw_size)
        {
            return Ok((s.raw_offset + (rva - s.rva)) as usize);
        }
    }
    error(format!(
        "{what} (RVA {rva:#x}, {len} bytes) is not in any section's file data"
    ))
}

fn cstring(file: &File<'_>, sections: &[Section], rva: u32, what: &str) -> Result<String, PeError> {
    let start = offset_of(sections, rva, 1, what)?;
    let tail = &file.0[start..];
    let Some(end) = tail.iter().position(|&b| b == 0) else {
        return error(format!("{what} at RVA {rva:#x} has no terminating NUL"));
    };
    let text = &tail[..end];
    if text.is_empty() || text.len() > 255 || !text.iter().all(|b| b.is_ascii_graphic()) {
        return error(format!(
            "{what} at RVA {rva:#x} is not a printable ASCII name"
        ));
    }
    Ok(String::from_utf8_lossy(text).into_owned())
}

/// Reads and checks `data` as an x64 driver image.
///
/// # Errors
/// The first thing found wrong, in words.
pub fn parse(data: &[u8]) -> Result<Pe, PeError> {
    let file = File(data);
    if file.bytes(0, 2, "the MZ signature")? != b"MZ" {
        return error("not a PE image: no MZ signature");
    }
    let pe = file.u32(0x3C, "e_lfanew")? as usize;
    if file.bytes(pe, 4, "the PE signature")? != b"PE\0\0" {
        return error("not a PE image: no PE signature");
    }
    let machine = file.u16(pe + 4, "Machine")?;
    if machine != IMAGE_FILE_MACHINE_AMD64 {
        return error(format!("machine {machine:#06x}: not an x64 (AMD64) image"));
    }
    let nsections = file.u16(pe + 6, "NumberOfSections")? as usize;
    let optional_size = file.u16(pe + 20, "SizeOfOptionalHeader")? as usize;
    let opt = pe + 24;
    let magic = file.u16(opt, "the optional header's magic")?;
    if magic != PE32_PLUS {
        return error(format!("optional header magic {magic:#x}: not PE32+"));
    }
    let entry = file.u32(opt + 16, "AddressOfEntryPoint")?;
    let image_base = file.u64(opt + 24, "ImageBase")?;
    let section_alignment = file.u32(opt + 32, "SectionAlignment")?;
    let size_of_image = file.u32(opt + 56, "SizeOfImage")? as usize;
    let size_of_headers = file.u32(opt + 60, "SizeOfHeaders")? as usize;
    let subsystem = file.u16(opt + 68, "Subsystem")?;
    let ndirs = file.u32(opt + 108, "NumberOfRvaAndSizes")?.min(16) as usize;
    if subsystem != IMAGE_SUBSYSTEM_NATIVE {
        return error(format!(
            "subsystem {subsystem}: not a driver (IMAGE_SUBSYSTEM_NATIVE is 1)"
        ));
    }
    if section_alignment != PAGE {
        return error(format!(
            "SectionAlignment {section_alignment:#x}: the loader maps 4 KiB pages"
        ));
    }
    if size_of_image == 0
        || size_of_image > 64 << 20
        || !size_of_image.is_multiple_of(PAGE as usize)
    {
        return error(format!(
            "SizeOfImage {size_of_image:#x} is not a plausible driver size"
        ));
    }
    if size_of_headers > size_of_image || size_of_headers > data.len() {
        return error(format!(
            "SizeOfHeaders {size_of_headers:#x} is larger than the image or the file"
        ));
    }
    let mut directories = [(0u32, 0u32); 16];
    for (i, dir) in directories.iter_mut().enumerate().take(ndirs) {
        *dir = (
            file.u32(opt + 112 + 8 * i, "a data directory")?,
            file.u32(opt + 116 + 8 * i, "a data directory")?,
        );
    }
    if directories[DIR_TLS].1 != 0 {
        return error("the image has a TLS directory, which a driver cannot have");
    }

    let first = opt + optional_size;
    let mut sections: Vec<Section> = Vec::with_capacity(nsections);
    for i in 0..nsections {
        let at = first + 40 * i;
        let raw = file.bytes(at, 40, "a section header")?;
        let name = String::from_utf8_lossy(&raw[..8])
            .trim_end_matches('\0')
            .to_owned();
        let s = Section {
            name,
            virtual_size: file.u32(at + 8, "VirtualSize")?,
            rva: file.u32(at + 12, "VirtualAddress")?,
            raw_size: file.u32(at + 16, "SizeOfRawData")?,
            raw_offset: file.u32(at + 20, "PointerToRawData")?,
            characteristics: file.u32(at + 36, "Characteristics")?,
        };
        if !s.rva.is_multiple_of(PAGE) || (s.rva as usize) < size_of_headers {
            return error(format!(
                "section {} at RVA {:#x} is not page-aligned after the headers",
                s.name, s.rva
            ));
        }
        if u64::from(s.rva) + u64::from(s.span()) > size_of_image as u64 {
            return error(format!("section {} ends beyond SizeOfImage", s.name));
        }
        if u64::from(s.raw_offset) + u64::from(s.raw_size) > data.len() as u64 {
            return error(format!(
                "section {}'s file data ends beyond the end of the file",
                s.name
            ));
        }
        if let Some(prev) = sections.last()
            && s.rva < prev.rva + prev.span().next_multiple_of(PAGE)
        {
            return error(format!("section {} overlaps section {}", s.name, prev.name));
        }
        if s.writable() && s.executable() {
            return error(format!("section {} is writable and executable", s.name));
        }
        sections.push(s);
    }

    if !sections.iter().any(|s| s.executable() && s.holds(entry, 1)) {
        return error(format!(
            "the entry point (RVA {entry:#x}) is not in an executable section"
        ));
    }

    let relocations = relocations(
        &file,
        &sections,
        directories[DIR_BASERELOC],
        image_base,
        size_of_image,
    )?;
    let imports = imports(&file, &sections, directories[DIR_IMPORT])?;
    let exports = exports(&file, &sections, directories[DIR_EXPORT])?;
    Ok(Pe {
        image_base,
        size_of_image,
        size_of_headers,
        entry,
        sections,
        relocations,
        imports,
        exports,
    })
}

/// Every DIR64 relocation, checked: inside a section's file data, eight bytes that hold an
/// address inside the image at its preferred base (what a DIR64 relocation of a driver points
/// at: its own code and data). Anything else is a corrupted table.
fn relocations(
    file: &File<'_>,
    sections: &[Section],
    (rva, size): (u32, u32),
    image_base: u64,
    size_of_image: usize,
) -> Result<Vec<u32>, PeError> {
    let mut out = Vec::new();
    if size == 0 {
        return Ok(out);
    }
    let start = offset_of(sections, rva, size, "the base relocation table")?;
    let table = file.bytes(start, size as usize, "the base relocation table")?;
    let mut at = 0usize;
    while at + 8 <= table.len() {
        let page = u32::from_le_bytes([table[at], table[at + 1], table[at + 2], table[at + 3]]);
        let block = u32::from_le_bytes([table[at + 4], table[at + 5], table[at + 6], table[at + 7]])
            as usize;
        if block < 8 || !block.is_multiple_of(2) || at + block > table.len() {
            return error(format!(
                "base relocation block at offset {at:#x} has a bad size {block:#x}"
            ));
        }
        for i in (at + 8..at + block).step_by(2) {
            let entry = u16::from_le_bytes([table[i], table[i + 1]]);
            let (kind, target) = (entry >> 12, page + u32::from(entry & 0xFFF));
            match kind {
                REL_ABSOLUTE => {}
                REL_DIR64 => {
                    let offset = offset_of(sections, target, 8, "a DIR64 relocation's target")?;
                    let value = file.u64(offset, "a DIR64 relocation's target")?;
                    if value < image_base || value >= image_base + size_of_image as u64 {
                        return error(format!(
                            "the DIR64 relocation at RVA {target:#x} holds {value:#x}, which is not \
                             an address inside the image ({image_base:#x}..{:#x}): a corrupted \
                             relocation",
                            image_base + size_of_image as u64
                        ));
                    }
                    out.push(target);
                }
                other => {
                    return error(format!(
                        "a base relocation of type {other} at RVA {target:#x}: an x64 image has \
                         only DIR64 (10) relocations"
                    ));
                }
            }
        }
        at += block;
    }
    Ok(out)
}

fn imports(
    file: &File<'_>,
    sections: &[Section],
    (rva, size): (u32, u32),
) -> Result<Vec<Import>, PeError> {
    let mut out = Vec::new();
    if size == 0 {
        return Ok(out);
    }
    for n in 0.. {
        let at = offset_of(sections, rva + 20 * n, 20, "an import descriptor")?;
        let lookup = file.u32(at, "an import descriptor")?;
        let name = file.u32(at + 12, "an import descriptor")?;
        let iat = file.u32(at + 16, "an import descriptor")?;
        if lookup == 0 && name == 0 && iat == 0 {
            break;
        }
        let module = cstring(file, sections, name, "an imported module's name")?;
        let mut thunk = if lookup != 0 { lookup } else { iat };
        let mut slot = iat;
        loop {
            let value = file.u64(
                offset_of(sections, thunk, 8, "an import lookup entry")?,
                "an import lookup entry",
            )?;
            if value == 0 {
                break;
            }
            if value & (1 << 63) != 0 {
                return error(format!(
                    "{module} is imported by ordinal ({}): only by name",
                    value & 0xFFFF
                ));
            }
            let hint_name = u32::try_from(value)
                .map_err(|_| PeError(format!("an import of {module} names RVA {value:#x}")))?;
            let name = cstring(file, sections, hint_name + 2, "an imported routine's name")?;
            offset_of(sections, slot, 8, "an import address table slot")?;
            out.push(Import {
                module: module.clone(),
                name,
                slot,
            });
            thunk += 8;
            slot += 8;
        }
    }
    Ok(out)
}

fn exports(
    file: &File<'_>,
    sections: &[Section],
    (rva, size): (u32, u32),
) -> Result<HashMap<String, u32>, PeError> {
    let mut out = HashMap::new();
    if size == 0 {
        return Ok(out);
    }
    let at = offset_of(sections, rva, 40, "the export directory")?;
    let functions = file.u32(at + 28, "the export directory")?;
    let names = file.u32(at + 32, "the export directory")?;
    let ordinals = file.u32(at + 36, "the export directory")?;
    let nfunctions = file.u32(at + 20, "the export directory")?;
    let nnames = file.u32(at + 24, "the export directory")?;
    for i in 0..nnames {
        let name_rva = file.u32(
            offset_of(sections, names + 4 * i, 4, "an export name")?,
            "an export name",
        )?;
        let ordinal = u32::from(file.u16(
            offset_of(sections, ordinals + 2 * i, 2, "an export ordinal")?,
            "an export ordinal",
        )?);
        if ordinal >= nfunctions {
            continue;
        }
        let function = file.u32(
            offset_of(sections, functions + 4 * ordinal, 4, "an export address")?,
            "an export address",
        )?;
        out.insert(
            cstring(file, sections, name_rva, "an export's name")?,
            function,
        );
    }
    Ok(out)
}
