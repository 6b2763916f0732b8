//! Build script of libibverbs.so.1 over WinVerbs.
//!
//! On Linux targets it
//! 1. reads the installed rdma-core `libibverbs.so.1` (Debian's `libibverbs-dev`; another path
//!    with `WV_IBVERBS_REFERENCE`) and turns its dynamic symbol table into
//!    * a linker version script (`OUT_DIR/libibverbs.map`: one node per version definition, in
//!      the reference's order, each with its parent), and
//!    * `OUT_DIR/exports.rs`: one `global_asm!` that gives every exported symbol its version
//!      with `.symver` (`name@@VERSION` for the default, `name@VERSION` for the compatibility
//!      entries), aliasing the Rust function `crate::api::<name>` (default) or
//!      `crate::compat::<node>::<name>` (compatibility). A symbol without its Rust function is
//!      a compile error, so the library cannot silently miss one;
//! 2. runs bindgen over `<infiniband/verbs.h>` into `OUT_DIR/verbs_h.rs`, against which
//!    `src/abi` asserts its hand-written layouts (cfg `wv_verbs_h`).
//!
//! Windows targets get neither: the crate compiles as a library there (the DLL's exports would
//! come from a .def file; that build has never been linked).

use std::collections::BTreeMap;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, Sym};
use object::{Endianness, Object, ObjectSection, SectionKind};

const DEFAULT_REFERENCE: &str = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
const SONAME: &str = "libibverbs.so.1";

/// One exported symbol of the reference library.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Export {
    name: String,
    version: String,
    /// `name@@version` (true) or the hidden `name@version` (false).
    default: bool,
    /// A data object (size in bytes) instead of a function.
    object_size: Option<u64>,
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=WV_IBVERBS_REFERENCE");
    println!("cargo:rustc-check-cfg=cfg(wv_verbs_h)");
    println!("cargo:rustc-check-cfg=cfg(wv_exports)");
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        return;
    }
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let reference =
        env::var("WV_IBVERBS_REFERENCE").unwrap_or_else(|_| DEFAULT_REFERENCE.to_string());
    println!("cargo:rerun-if-changed={reference}");
    let data = fs::read(&reference).unwrap_or_else(|e| {
        panic!(
            "wv-ibverbs: cannot read the reference {reference} ({e}). The library's exports are \
             generated from rdma-core's libibverbs.so.1: install Debian's `libibverbs-dev` \
             (apt-get install libibverbs-dev) or point WV_IBVERBS_REFERENCE at a libibverbs.so.1"
        )
    });
    let (nodes, exports) = read_exports(&data)
        .unwrap_or_else(|e| panic!("wv-ibverbs: {reference} is not a usable ELF library: {e}"));
    let map = out.join("libibverbs.map");
    fs::write(&map, version_script(&nodes, &exports)).expect("write version script");
    fs::write(out.join("exports.rs"), exports_asm(&exports)).expect("write exports.rs");
    fs::write(out.join("exports.txt"), export_list(&exports)).expect("write exports.txt");
    println!("cargo:rustc-cfg=wv_exports");
    // Every linked artefact of the package gets the nodes (the test executables link the
    // `.symver` directives too); the shared object also gets rdma-core's soname.
    println!(
        "cargo:rustc-link-arg=-Wl,--version-script={}",
        map.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");

    bindgen_layouts(&out);
}

/// A version node and its parent.
type Node = (String, Option<String>);

/// The version nodes in definition order and every exported symbol.
fn read_exports(data: &[u8]) -> Result<(Vec<Node>, Vec<Export>), String> {
    let file = ElfFile64::<Endianness>::parse(data).map_err(|e| e.to_string())?;
    let endian = file.endian();
    let header = file.elf_header();
    let sections = header.sections(endian, data).map_err(|e| e.to_string())?;
    let versions = sections
        .versions(endian, data)
        .map_err(|e| e.to_string())?
        .ok_or("no symbol versions")?;
    let dynsyms = sections
        .symbols(endian, data, elf::SHT_DYNSYM)
        .map_err(|e| e.to_string())?;

    // Version definitions, with their parents (the second verdaux).
    let mut nodes = Vec::new();
    if let Some((mut verdefs, link)) = sections
        .gnu_verdef(endian, data)
        .map_err(|e| e.to_string())?
    {
        let strings = sections
            .strings(endian, data, link)
            .map_err(|e| e.to_string())?;
        while let Some((verdef, mut aux)) = verdefs.next().map_err(|e| e.to_string())? {
            let flags = verdef.vd_flags.get(endian);
            let mut names = Vec::new();
            while let Some(a) = aux.next().map_err(|e| e.to_string())? {
                let name = a.name(endian, strings).map_err(|e| e.to_string())?;
                names.push(String::from_utf8_lossy(name).into_owned());
            }
            if flags & elf::VER_FLG_BASE != 0 || names.is_empty() {
                continue;
            }
            let parent = names.get(1).cloned();
            nodes.push((names[0].clone(), parent));
        }
    }
    let node_names: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();

    let mut exports = Vec::new();
    for (index, sym) in dynsyms.iter().enumerate() {
        let shndx = sym.st_shndx(endian);
        let bind = sym.st_bind();
        if shndx == elf::SHN_UNDEF || !(bind == elf::STB_GLOBAL || bind == elf::STB_WEAK) {
            continue;
        }
        let name = String::from_utf8_lossy(
            sym.name(endian, dynsyms.strings())
                .map_err(|e| e.to_string())?,
        )
        .into_owned();
        let vindex = versions.version_index(endian, object::SymbolIndex(index));
        let Some(version) = versions.version(vindex).map_err(|e| e.to_string())? else {
            continue;
        };
        let version = String::from_utf8_lossy(version.name()).into_owned();
        // The version nodes' own absolute symbols are the linker's, not exports.
        if shndx == elf::SHN_ABS && node_names.contains(&name.as_str()) {
            continue;
        }
        let object_size = (sym.st_type() == elf::STT_OBJECT).then(|| sym.st_size(endian));
        exports.push(Export {
            name,
            version,
            default: !vindex.is_hidden(),
            object_size,
        });
    }
    // Make sure the section data we read was the dynamic table of a shared object.
    if file.sections().all(|s| s.kind() != SectionKind::Text) || exports.is_empty() {
        return Err("no exported functions".into());
    }
    exports.sort();
    Ok((nodes, exports))
}

fn version_script(nodes: &[Node], exports: &[Export]) -> String {
    let mut by_node: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    // Compatibility symbols are listed in their node too (the `.symver` directive makes them
    // non-default); GNU ld drops a `name@NODE` whose node does not name it.
    for e in exports {
        by_node.entry(&e.version).or_default().push(&e.name);
    }
    let mut s = String::from(
        "/* Generated by wv-ibverbs' build script from the reference libibverbs.so.1. */\n",
    );
    for (i, (node, parent)) in nodes.iter().enumerate() {
        let _ = writeln!(s, "{node} {{");
        let names = by_node.get(node.as_str()).cloned().unwrap_or_default();
        if !names.is_empty() {
            s.push_str("  global:\n");
            for n in names {
                let _ = writeln!(s, "    {n};");
            }
        }
        if i == 0 {
            s.push_str("  local: *;\n");
        }
        match parent {
            Some(p) => {
                let _ = writeln!(s, "}} {p};");
            }
            None => s.push_str("};\n"),
        }
    }
    s
}

/// A Rust identifier for a version node (`IBVERBS_1.0` → `v1_0`, `IBVERBS_PRIVATE_34` →
/// `private_34`).
fn node_module(version: &str) -> String {
    version
        .trim_start_matches("IBVERBS_")
        .to_ascii_lowercase()
        .replace('.', "_")
        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_")
        .replace("1_", "v1_")
}

fn exports_asm(exports: &[Export]) -> String {
    let mut lines = Vec::new();
    let mut operands = Vec::new();
    for (i, e) in exports.iter().enumerate() {
        let alias = format!("__wv_export_{i}");
        let at = if e.default { "@@" } else { "@" };
        match e.object_size {
            Some(size) => {
                // Data: the storage itself, zero-initialised, in .bss.
                lines.push(format!(".pushsection .bss.{alias},\\\"aw\\\",@nobits"));
                lines.push(".balign 8".to_string());
                lines.push(format!(".globl {alias}"));
                lines.push(format!(".type {alias},@object"));
                lines.push(format!(".size {alias},{size}"));
                lines.push(format!("{alias}:"));
                lines.push(format!(".zero {}", size.max(1)));
                lines.push(".popsection".to_string());
            }
            None => {
                let path = if e.default {
                    format!("crate::api::{}", e.name)
                } else {
                    format!("crate::compat::{}::{}", node_module(&e.version), e.name)
                };
                // A one-jump entry point: `.symver` needs a symbol defined in this object,
                // and the Rust function may live in another codegen unit.
                lines.push(".text".to_string());
                lines.push(".p2align 4".to_string());
                lines.push(format!(".globl {alias}"));
                lines.push(format!(".type {alias},@function"));
                lines.push(format!("{alias}:"));
                lines.push(format!("jmp {{f{i}}}@PLT"));
                lines.push(format!(".size {alias},.-{alias}"));
                operands.push(format!("    f{i} = sym {path},"));
            }
        }
        lines.push(format!(".symver {alias},{}{at}{}", e.name, e.version));
    }
    let mut s = String::from(
        "// Generated by wv-ibverbs' build script from the reference libibverbs.so.1.\n\
         core::arch::global_asm!(\n",
    );
    for l in lines {
        let _ = writeln!(s, "    \"{l}\",");
    }
    for o in operands {
        let _ = writeln!(s, "{o}");
    }
    s.push_str(");\n");
    s
}

/// `name version default|compat func|object`, one line each: what the symbol-table diff of
/// `tools/ibverbs-symbols` compares the built library with.
fn export_list(exports: &[Export]) -> String {
    let mut s = String::new();
    for e in exports {
        let _ = writeln!(
            s,
            "{} {}{}",
            e.name,
            if e.default { "@@" } else { "@" },
            e.version
        );
    }
    s
}

fn bindgen_layouts(out: &Path) {
    println!("cargo:rerun-if-changed=/usr/include/infiniband/verbs.h");
    let bindings = bindgen::Builder::default()
        .header_contents("wv_verbs.h", "#include <infiniband/verbs.h>\n")
        .allowlist_type("ibv_.*|_ibv_.*|verbs_context|_compat_ibv_port_attr")
        .layout_tests(false)
        .derive_debug(false)
        .derive_default(false)
        .derive_copy(false)
        .generate_comments(false)
        .generate_inline_functions(false)
        .generate()
        .unwrap_or_else(|e| {
            panic!(
                "wv-ibverbs: bindgen over <infiniband/verbs.h> failed ({e}): install Debian's \
                 `libibverbs-dev` (the header) and `libclang-dev` (bindgen's parser)"
            )
        });
    bindings
        .write_to_file(out.join("verbs_h.rs"))
        .expect("write verbs_h.rs");
    println!("cargo:rustc-cfg=wv_verbs_h");
}
