//! A corrupted image fails with a clear message and never takes the runner down: imports and
//! relocations are checked before anything is mapped (the load is refused, saying what and
//! where), and what no check can see — a relocation silently dropped — runs in a child process,
//! whose fault handler places the fault in the image before the process dies of it.

use std::path::{Path, PathBuf};
use std::process::Command;

use sys_loader::{LoadError, LoadedImage, image_path, pe};

fn original() -> Vec<u8> {
    std::fs::read(image_path()).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run tools/kmdf-link/build first)",
            image_path().display()
        )
    })
}

/// Every base relocation entry: (file offset of the entry, type, target RVA).
fn relocation_entries(data: &[u8]) -> Vec<(usize, u16, u32)> {
    let image = pe::parse(data).expect("the linked image parses");
    let reloc = image
        .sections
        .iter()
        .find(|s| s.name == ".reloc")
        .expect(".reloc");
    let table = &data[reloc.raw_offset as usize..(reloc.raw_offset + reloc.virtual_size) as usize];
    let mut entries = Vec::new();
    let mut at = 0;
    while at + 8 <= table.len() {
        let page = u32::from_le_bytes(table[at..at + 4].try_into().unwrap());
        let size = u32::from_le_bytes(table[at + 4..at + 8].try_into().unwrap()) as usize;
        if size < 8 {
            break;
        }
        for i in (at + 8..at + size).step_by(2) {
            let entry = u16::from_le_bytes([table[i], table[i + 1]]);
            entries.push((
                reloc.raw_offset as usize + i,
                entry >> 12,
                page + u32::from(entry & 0xFFF),
            ));
        }
        at += size;
    }
    entries
}

fn refused(data: &[u8]) -> String {
    match LoadedImage::from_bytes("winverbs.sys", data) {
        Ok(_) => panic!("the corrupted image was mapped"),
        Err(e @ (LoadError::Refused(..) | LoadError::Unresolved(..))) => e.to_string(),
        Err(e) => panic!("refused for another reason: {e}"),
    }
}

/// The image with the NUL-terminated name `name` (an imported routine's or module's) renamed to
/// `to`, of the same length: the image stays well formed, only what it imports changes.
fn with_name_replaced(name: &str, to: &str) -> Vec<u8> {
    assert_eq!(name.len(), to.len(), "a rename in place keeps the length");
    let mut data = original();
    let needle = [name.as_bytes(), b"\0"].concat();
    let at = data
        .windows(needle.len())
        .position(|w| w == needle)
        .expect(name);
    data[at..at + name.len()].copy_from_slice(to.as_bytes());
    data
}

#[test]
fn an_import_the_kernel_lacks_is_refused_before_mapping() {
    let message = refused(&with_name_replaced("KeSetEvent", "KeZapEvent"));
    assert_eq!(
        message,
        "winverbs.sys: refused before mapping: it imports ntoskrnl.exe!KeZapEvent, which the \
         emulated kernel and framework loader do not provide"
    );
}

#[test]
fn an_import_from_an_unknown_module_is_refused() {
    let message = refused(&with_name_replaced("WDFLDR.SYS", "WDFLDX.SYS"));
    assert!(
        message.contains("WDFLDX.SYS!WdfVersionBind, WDFLDX.SYS!WdfVersionUnbind"),
        "{message}"
    );
}

#[test]
fn a_relocation_of_a_foreign_type_is_refused() {
    let mut data = original();
    let (at, kind, target) = relocation_entries(&data)[0];
    assert_eq!(kind, 10);
    // DIR64 (10) → HIGHLOW (3), an x86 relocation.
    data[at + 1] = (data[at + 1] & 0x0F) | 0x30;
    let message = refused(&data);
    assert!(
        message.contains(&format!("a base relocation of type 3 at RVA {target:#x}")),
        "{message}"
    );
}

#[test]
fn a_relocation_that_points_at_no_address_of_the_image_is_refused() {
    let mut data = original();
    let entries = relocation_entries(&data);
    // The first relocation moved by 4 bytes: its eight bytes straddle two values.
    let (at, _, target) = entries[0];
    let entry = u16::from_le_bytes([data[at], data[at + 1]]) + 4;
    data[at..at + 2].copy_from_slice(&entry.to_le_bytes());
    let message = refused(&data);
    assert!(
        message.contains(&format!(
            "the DIR64 relocation at RVA {:#x} holds",
            target + 4
        )) && message.contains("not an address inside the image"),
        "{message}"
    );
}

#[test]
fn a_relocation_block_of_a_bad_size_is_refused() {
    let mut data = original();
    let (first, _, _) = relocation_entries(&data)[0];
    // The block's size field, four bytes before its first entry.
    data[first - 4..first].copy_from_slice(&3u32.to_le_bytes());
    assert!(refused(&data).contains("has a bad size 0x3"));
}

/// The RVA of a symbol in the map file `tools/kmdf-link/build` keeps beside the image.
fn symbol_rva(image: &Path, needle: &str) -> u32 {
    let map = std::fs::read_to_string(image.with_file_name("winverbs.map")).expect("winverbs.map");
    let line = map
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} in the map"));
    let va = line.split_whitespace().nth(2).expect("an address");
    (u64::from_str_radix(va, 16).expect("hex") - 0x1_8000_0000) as u32
}

#[test]
fn a_dropped_relocation_ends_a_child_process_with_a_clear_message() {
    let mut data = original();
    // The stub's registry path copy: its Buffer pointer (8 bytes into the UNICODE_STRING) is a
    // DIR64 slot; without its relocation it keeps the link-time address.
    let slot = symbol_rva(&image_path(), "wdf_driver_entry13REGISTRY_PATH") + 8;
    let (at, _, _) = relocation_entries(&data)
        .into_iter()
        .find(|&(_, kind, target)| kind == 10 && target == slot)
        .expect("the relocation of REGISTRY_PATH.Buffer");
    // ABSOLUTE (type 0): padding, which the format allows; no check before mapping can know.
    data[at..at + 2].copy_from_slice(&0u16.to_le_bytes());
    let dir = std::env::temp_dir().join(format!("sys-loader-dropped-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corrupted: PathBuf = dir.join("winverbs.sys");
    std::fs::write(&corrupted, &data).unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_sys-loader"))
        .arg(&corrupted)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "the child succeeded: {stderr}");
    assert!(
        stderr.contains("sys-loader: SIGSEGV accessing 0x18")
            && stderr.contains("not where it is mapped: a pointer that missed its relocation"),
        "{stderr}"
    );
}
