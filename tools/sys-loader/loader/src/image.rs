//! [`LoadedImage`]: a driver image mapped into this process the way the kernel's loader maps
//! one — headers and sections at their RVAs in one reservation, base relocations applied for
//! wherever that landed, every import slot bound to the routine the emulation provides, then
//! each section given its own protection (code read-execute, data read-write, the rest read
//! only) — and the entry point the machine calls.
//!
//! Everything is checked before anything is mapped ([`crate::pe::parse`], and every import
//! resolved): a corrupted file is refused with a message. One mapping serves every machine of
//! the process; [`LoadedImage::reset`] puts its writable sections back to what they were after
//! relocation before each `DriverEntry`, so each load starts from the image's initial data, as
//! a fresh load on Windows would.

use std::ffi::c_void;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use wdf_emu::{Convention, DriverEntry};
use wdk_sys::{NTSTATUS, PCUNICODE_STRING, PDRIVER_OBJECT};

use crate::pe::{self, PAGE, Pe, PeError};

/// Why an image could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// The file could not be read.
    Read(String, std::io::Error),
    /// The file is not a driver image the loader accepts (what is wrong, where).
    Refused(String, PeError),
    /// Imports the emulation does not provide (`module!routine`).
    Unresolved(String, Vec<String>),
    /// The system refused the mapping or a protection change.
    Map(String, std::io::Error),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Read(name, e) => write!(f, "{name}: cannot read the image: {e}"),
            LoadError::Refused(name, e) => write!(f, "{name}: refused before mapping: {e}"),
            LoadError::Unresolved(name, routines) => write!(
                f,
                "{name}: refused before mapping: it imports {}, which the emulated kernel and \
                 framework loader do not provide",
                routines.join(", ")
            ),
            LoadError::Map(name, e) => write!(f, "{name}: cannot map the image: {e}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// The image's entry point, `FxDriverEntry(DriverObject, RegistryPath)`.
type FxDriverEntry = unsafe extern "win64" fn(PDRIVER_OBJECT, PCUNICODE_STRING) -> NTSTATUS;

/// A driver image mapped into the process.
pub struct LoadedImage {
    name: String,
    base: *mut u8,
    pe: Pe,
    /// The writable sections' bytes after relocation: what [`LoadedImage::reset`] restores.
    pristine: Vec<(usize, Vec<u8>)>,
}

// SAFETY: the mapping is process memory owned by this value; after `load` only the image's
// own code writes it (from whichever thread the machine runs it on) and `reset`, which runs
// before DriverEntry when no code of the image runs.
unsafe impl Send for LoadedImage {}
// SAFETY: as above.
unsafe impl Sync for LoadedImage {}

impl fmt::Debug for LoadedImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedImage")
            .field("name", &self.name)
            .field("base", &self.base)
            .field("size", &self.pe.size_of_image)
            .finish_non_exhaustive()
    }
}

impl LoadedImage {
    /// Reads, checks, maps, relocates, binds and protects the image at `path`.
    ///
    /// # Errors
    /// The file cannot be read, is refused (see [`crate::pe::parse`]), imports a routine the
    /// emulation does not provide, or cannot be mapped.
    pub fn load(path: &Path) -> Result<Arc<LoadedImage>, LoadError> {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let data = std::fs::read(path).map_err(|e| LoadError::Read(name.clone(), e))?;
        Self::from_bytes(&name, &data)
    }

    /// [`LoadedImage::load`] from the file's bytes; `name` names it in messages.
    ///
    /// # Errors
    /// As [`LoadedImage::load`].
    pub fn from_bytes(name: &str, data: &[u8]) -> Result<Arc<LoadedImage>, LoadError> {
        let pe = pe::parse(data).map_err(|e| LoadError::Refused(name.to_owned(), e))?;
        let mut bindings = Vec::with_capacity(pe.imports.len());
        let mut unresolved = Vec::new();
        for import in &pe.imports {
            match crate::imports::resolve(&import.module, &import.name) {
                Some(routine) => bindings.push((import.slot as usize, routine)),
                None => unresolved.push(format!("{}!{}", import.module, import.name)),
            }
        }
        if !unresolved.is_empty() {
            return Err(LoadError::Unresolved(name.to_owned(), unresolved));
        }
        let base = map(pe.size_of_image).map_err(|e| LoadError::Map(name.to_owned(), e))?;
        let mut image = LoadedImage {
            name: name.to_owned(),
            base,
            pe,
            pristine: Vec::new(),
        };
        image.copy_in(data);
        image.relocate();
        for (slot, routine) in bindings {
            image.write_u64(slot, routine as u64);
        }
        image.pristine = image
            .pe
            .sections
            .iter()
            .filter(|s| s.writable())
            .map(|s| {
                (
                    s.rva as usize,
                    image.bytes(s.rva as usize, s.span() as usize).to_vec(),
                )
            })
            .collect();
        image
            .protect()
            .map_err(|e| LoadError::Map(name.to_owned(), e))?;
        crate::crash::register(&image);
        Ok(Arc::new(image))
    }

    /// The file name the image was loaded from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where it is mapped.
    pub fn base(&self) -> usize {
        self.base as usize
    }

    /// `SizeOfImage`.
    pub fn size(&self) -> usize {
        self.pe.size_of_image
    }

    /// The base the image was linked for (`ImageBase`).
    pub fn preferred_base(&self) -> u64 {
        self.pe.image_base
    }

    /// How many DIR64 relocations were applied.
    pub fn relocations(&self) -> usize {
        self.pe.relocations.len()
    }

    /// Every import, as `module!routine`.
    pub fn imports(&self) -> Vec<String> {
        self.pe
            .imports
            .iter()
            .map(|i| format!("{}!{}", i.module, i.name))
            .collect()
    }

    /// Whether `address` is inside the mapping.
    pub fn contains(&self, address: usize) -> bool {
        address >= self.base() && address < self.base() + self.size()
    }

    /// The address of an export.
    pub fn export(&self, name: &str) -> Option<usize> {
        self.pe
            .exports
            .get(name)
            .map(|&rva| self.base() + rva as usize)
    }

    /// Puts the writable sections back to their contents after relocation (before a load).
    pub fn reset(&self) {
        for (rva, bytes) in &self.pristine {
            // SAFETY: the section lies inside the mapping and is read-write; no code of the
            // image runs while a machine loads it (the caller's moment: before DriverEntry).
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.at(*rva), bytes.len()) };
        }
    }

    /// The machine's entry point: resets the image's data, then calls `FxDriverEntry` with the
    /// Windows x64 convention; every callback of the driver is called with it too. After an
    /// unload the framework loader must have seen the image bind and unbind once each.
    pub fn entry(self: &Arc<Self>) -> DriverEntry {
        let image = Arc::clone(self);
        let entry = self.base() + self.pe.entry as usize;
        DriverEntry::new(Convention::Win64, move |driver, path| {
            image.reset();
            crate::wdfldr::forget();
            // SAFETY: the entry point of the mapped, relocated and bound image
            // (`/ENTRY:FxDriverEntry`), a DRIVER_INITIALIZE with the Windows x64 convention.
            let fx_driver_entry = unsafe { std::mem::transmute::<usize, FxDriverEntry>(entry) };
            // SAFETY: the machine's driver object and registry path, once per load, at
            // PASSIVE_LEVEL: DriverEntry's contract.
            unsafe { fx_driver_entry(driver, path) }
        })
        .with_unload_check(crate::wdfldr::unload_findings)
    }

    /// The address of `rva` in the mapping.
    fn at(&self, rva: usize) -> *mut u8 {
        self.base.wrapping_add(rva)
    }

    fn bytes(&self, rva: usize, len: usize) -> &[u8] {
        // SAFETY: callers pass ranges inside the mapping (sections, checked by `pe::parse`).
        unsafe { std::slice::from_raw_parts(self.at(rva), len) }
    }

    fn write_u64(&mut self, rva: usize, value: u64) {
        // SAFETY: `rva..rva + 8` is inside a section (checked by `pe::parse`), still writable
        // (before `protect`).
        unsafe { self.at(rva).cast::<u64>().write_unaligned(value) };
    }

    fn read_u64(&self, rva: usize) -> u64 {
        // SAFETY: as in `write_u64`.
        unsafe { self.at(rva).cast::<u64>().read_unaligned() }
    }

    /// The headers and each section's file data at their RVAs (the rest stays zero).
    fn copy_in(&mut self, data: &[u8]) {
        let headers = &data[..self.pe.size_of_headers];
        // SAFETY: the headers fit the mapping (checked: SizeOfHeaders <= SizeOfImage).
        unsafe { std::ptr::copy_nonoverlapping(headers.as_ptr(), self.base, headers.len()) };
        for s in &self.pe.sections {
            let len = s.raw_size.min(s.span()) as usize;
            let source = &data[s.raw_offset as usize..s.raw_offset as usize + len];
            // SAFETY: the section's range is inside the mapping and its file data inside the
            // file (both checked by `pe::parse`).
            unsafe { std::ptr::copy_nonoverlapping(source.as_ptr(), self.at(s.rva as usize), len) };
        }
    }

    /// Adds the distance between where the image is and where it was linked for to every
    /// DIR64 slot.
    fn relocate(&mut self) {
        let delta = (self.base as u64).wrapping_sub(self.pe.image_base);
        for index in 0..self.pe.relocations.len() {
            let rva = self.pe.relocations[index] as usize;
            let value = self.read_u64(rva).wrapping_add(delta);
            self.write_u64(rva, value);
        }
    }

    /// Each section's protection from its characteristics; the headers read-only.
    fn protect(&self) -> std::io::Result<()> {
        protect(
            self.base,
            self.pe.size_of_headers.next_multiple_of(PAGE as usize),
            libc::PROT_READ,
        )?;
        for s in &self.pe.sections {
            let mut prot = libc::PROT_READ;
            if s.writable() {
                prot |= libc::PROT_WRITE;
            }
            if s.executable() {
                prot |= libc::PROT_EXEC;
            }
            let start = self.at(s.rva as usize);
            protect(
                start,
                (s.span() as usize).next_multiple_of(PAGE as usize),
                prot,
            )?;
        }
        Ok(())
    }
}

impl Drop for LoadedImage {
    fn drop(&mut self) {
        crate::crash::unregister(self.base as usize);
        // SAFETY: the reservation `map` made, released once; nothing of the image runs any
        // more (the last `Arc` is gone with the machines that held its entry point).
        unsafe { libc::munmap(self.base.cast::<c_void>(), self.pe.size_of_image) };
    }
}

/// A fresh read-write reservation of `size` bytes.
fn map(size: usize) -> std::io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address of the system's choosing.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(base.cast())
}

fn protect(start: *mut u8, len: usize, prot: i32) -> std::io::Result<()> {
    // SAFETY: a page-aligned range inside a mapping this loader made.
    if unsafe { libc::mprotect(start.cast::<c_void>(), len, prot) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
