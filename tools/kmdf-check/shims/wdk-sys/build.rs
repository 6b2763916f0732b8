//! Build script of the kmdf-check `wdk-sys` shim.
//!
//! Produces in `OUT_DIR` the same files the real wdk-sys 0.5.2 build script does (`types.rs`,
//! `constants.rs`, `ntddk.rs`, `wdf.rs`, `wdf_function_count.rs`,
//! `call_unsafe_wdf_function_binding.rs`, `test_stubs.rs`), split the same way, so that the real
//! `wdk-macros` finds what it parses. The inputs differ: mingw-w64's DDK headers plus our WDF
//! subset, through the `wdk-build` shim's bindgen builder. Two things the real script does are
//! left out: compiling `wdf.c` (it only exports `__declspec(selectany)` symbols to the linker,
//! and nothing links here) and the feature subsets (no headers for them; enabling one fails
//! below with the directory that would be needed). One thing is added: `status.rs`, the
//! `STATUS_*` constants read from mingw's `ntstatus.h` (the real crate hand-copies them from
//! windows-sys, because bindgen cannot evaluate `((NTSTATUS)0x...)` casts).

use std::{
    collections::BTreeMap,
    env,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    thread,
};

use bindgen::CodegenConfig;
use wdk_build::{
    ApiSubset, BuilderExt, Config, ConfigError, DriverConfig, IoError, KmdfConfig,
    configure_wdk_library_build_and_then,
};

/// The API subsets selected by cargo features, as in the real crate.
const ENABLED_API_SUBSETS: &[ApiSubset] = &[
    ApiSubset::Base,
    ApiSubset::Wdf,
    #[cfg(feature = "gpio")]
    ApiSubset::Gpio,
    #[cfg(feature = "hid")]
    ApiSubset::Hid,
    #[cfg(feature = "parallel-ports")]
    ApiSubset::ParallelPorts,
    #[cfg(feature = "spb")]
    ApiSubset::Spb,
    #[cfg(feature = "storage")]
    ApiSubset::Storage,
    #[cfg(feature = "usb")]
    ApiSubset::Usb,
];

/// Generates one of the bindgen outputs into `OUT_DIR`.
type GenerateFn = fn(&Path, &Config) -> Result<(), ConfigError>;

const BINDGEN_FILE_GENERATORS: &[(&str, GenerateFn)] = &[
    ("constants.rs", generate_constants),
    ("types.rs", generate_types),
    ("ntddk.rs", generate_base),
    ("wdf.rs", generate_wdf),
];

fn main() -> Result<(), ConfigError> {
    configure_wdk_library_build_and_then(|config| {
        let out_path = PathBuf::from(
            env::var("OUT_DIR").expect("OUT_DIR should exist in a Cargo build environment"),
        );
        if matches!(config.driver_config, DriverConfig::Umdf(_)) {
            // The kit has no user-mode headers (windows.h route); say so instead of failing
            // somewhere inside bindgen.
            return Err(ConfigError::DirectoryNotFound {
                directory: "UMDF headers (the kmdf-check kit covers WDM and KMDF only)".into(),
            });
        }
        // Fail early, with the missing directory, if a feature asks for a subset we lack.
        config.bindgen_header_contents(ENABLED_API_SUBSETS.iter().copied())?;

        // Four independent clang parses, as in the real script; each takes a few seconds.
        thread::scope(|scope| {
            let workers: Vec<_> = BINDGEN_FILE_GENERATORS
                .iter()
                .map(|(file_name, generate)| {
                    let (out_path, config) = (&out_path, &config);
                    thread::Builder::new()
                        .name(format!("bindgen {file_name}"))
                        .spawn_scoped(scope, move || generate(out_path, config))
                        .expect("scoped thread should spawn")
                })
                .collect();
            workers.into_iter().try_for_each(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
        })?;

        generate_status_constants(&out_path, &config)?;
        if let DriverConfig::Kmdf(kmdf_config) = config.driver_config {
            generate_wdf_function_count(&out_path, kmdf_config)?;
            generate_call_unsafe_wdf_function_binding_macro(&out_path)?;
            generate_test_stubs(&out_path, &config)?;
        }
        Ok(())
    })
}

fn write(path: PathBuf, contents: &str) -> Result<(), ConfigError> {
    fs::write(&path, contents).map_err(|source| IoError::with_path(path, source).into())
}

fn write_bindings(
    builder: bindgen::Builder,
    out_path: &Path,
    file_name: &str,
) -> Result<(), ConfigError> {
    let output_file_path = out_path.join(file_name);
    builder
        .generate()
        .unwrap_or_else(|error| panic!("bindgen failed to generate {file_name}: {error}"))
        .write_to_file(&output_file_path)
        .map_err(|source| IoError::with_path(output_file_path, source).into())
}

/// Every variable and `#define` of the enabled headers.
fn generate_constants(out_path: &Path, config: &Config) -> Result<(), ConfigError> {
    generate_from_enabled(out_path, config, CodegenConfig::VARS, "constants")
}

/// Every type of the enabled headers; `wdk-macros` parses this file for the `PFN_WDF*`
/// signatures and the `_WDFFUNCENUM` indices.
fn generate_types(out_path: &Path, config: &Config) -> Result<(), ConfigError> {
    generate_from_enabled(out_path, config, CodegenConfig::TYPES, "types")
}

/// The items of kind `codegen` of every enabled header, into `<name>.rs` (the input parsed as
/// `<name>-input.h`).
fn generate_from_enabled(
    out_path: &Path,
    config: &Config,
    codegen: CodegenConfig,
    name: &str,
) -> Result<(), ConfigError> {
    let header_contents = config.bindgen_header_contents(ENABLED_API_SUBSETS.iter().copied())?;
    let builder = bindgen::Builder::wdk_default(config)?
        .with_codegen_config(codegen)
        .header_contents(&format!("{name}-input.h"), &header_contents);
    write_bindings(builder, out_path, &format!("{name}.rs"))
}

/// The kernel routines of the base headers (`wdk_sys::ntddk`).
fn generate_base(out_path: &Path, config: &Config) -> Result<(), ConfigError> {
    let header_contents = config.bindgen_header_contents([ApiSubset::Base])?;
    let mut builder = bindgen::Builder::wdk_default(config)?
        .with_codegen_config((CodegenConfig::TYPES | CodegenConfig::VARS).complement())
        .header_contents("ntddk-input.h", &header_contents);
    if let Some(raw_lines) = config.bindgen_library_link_raw_lines(ApiSubset::Base) {
        builder = builder.raw_line(raw_lines);
    }
    write_bindings(builder, out_path, "ntddk.rs")
}

/// The routines declared in WDF headers (`wdk_sys::wdf`). The WDK declares none outside the
/// function table; the file exists because the module includes it.
fn generate_wdf(out_path: &Path, config: &Config) -> Result<(), ConfigError> {
    if !matches!(config.driver_config, DriverConfig::Kmdf(_)) {
        return Ok(());
    }
    let header_contents = config.bindgen_header_contents([ApiSubset::Base, ApiSubset::Wdf])?;
    let builder = bindgen::Builder::wdk_default(config)?
        .with_codegen_config((CodegenConfig::TYPES | CodegenConfig::VARS).complement())
        .header_contents("wdf-input.h", &header_contents)
        .allowlist_file("(?i).*wdf.*");
    write_bindings(builder, out_path, "wdf.rs")
}

/// `STATUS_*` constants from mingw's `ntstatus.h`: `#define STATUS_X ((NTSTATUS)0x...)`.
fn generate_status_constants(out_path: &Path, config: &Config) -> Result<(), ConfigError> {
    let ntstatus_h = config
        .include_paths()?
        .map(|directory| directory.join("ntstatus.h"))
        .find(|path| path.is_file())
        .ok_or_else(|| ConfigError::DirectoryNotFound {
            directory: "an include directory holding ntstatus.h (mingw-w64-common)".into(),
        })?;
    println!("cargo::rerun-if-changed={}", ntstatus_h.display());
    let text = fs::read_to_string(&ntstatus_h)
        .map_err(|source| IoError::with_path(&ntstatus_h, source))?;

    let mut values = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some("#define"), Some(name), Some(value), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            continue;
        };
        let Some(hex) = value
            .strip_prefix("((NTSTATUS)0x")
            .and_then(|rest| rest.strip_suffix(')'))
            .map(|digits| digits.trim_end_matches(['L', 'l']))
        else {
            continue;
        };
        if name.starts_with("STATUS_")
            && let Ok(bits) = u32::from_str_radix(hex, 16)
        {
            // NTSTATUS is a signed 32-bit value; error codes have the top bit set.
            values.insert(name.to_string(), i32::from_ne_bytes(bits.to_ne_bytes()));
        }
    }
    let mut generated = String::new();
    for (name, value) in values {
        writeln!(generated, "pub const {name}: NTSTATUS = {value}_i32;")
            .expect("writing to a String cannot fail");
    }
    write(out_path.join("status.rs"), &generated)
}

/// Same as the real crate: from KMDF 1.25 on the table size is the framework's exported
/// `WdfFunctionCount`, before that the header's `WdfFunctionTableNumEntries`.
fn generate_wdf_function_count(
    out_path: &Path,
    kmdf_config: KmdfConfig,
) -> Result<(), ConfigError> {
    let count_expression =
        if kmdf_config.kmdf_version_major >= 1 && kmdf_config.target_kmdf_version_minor >= 25 {
            "// SAFETY: `crate::WdfFunctionCount` is generated as a mutable static, but is not \
             supposed to be ever mutated by WDF.\n    (unsafe { crate::WdfFunctionCount }) as usize"
        } else {
            "crate::_WDFFUNCENUM::WdfFunctionTableNumEntries as usize"
        };
    write(
        out_path.join("wdf_function_count.rs"),
        &format!(
            "#[allow(clippy::must_use_candidate)]\n/// Returns the number of functions available \
             in the WDF function table.\n/// Should not be used in public API.\npub fn \
             get_wdf_function_count() -> usize {{\n    {count_expression}\n}}\n"
        ),
    )
}

/// The `macro_rules!` front of `wdk_macros::call_unsafe_wdf_function_binding`: it passes the
/// path of the generated `types.rs`, the only way the proc-macro learns where it is.
fn generate_call_unsafe_wdf_function_binding_macro(out_path: &Path) -> Result<(), ConfigError> {
    let types_path = out_path.join("types.rs");
    let types_path = types_path
        .to_str()
        .expect("path to the generated types.rs should be valid UTF-8");
    write(
        out_path.join("call_unsafe_wdf_function_binding.rs"),
        &format!(
            r#"
/// Calls a WDF function by name through the `WdfFunctions` table, passing
/// `WdfDriverGlobals` first; the arguments are type-checked against the DDI's
/// `PFN_WDF*` signature in the generated bindings.
///
/// # Safety
/// Function arguments must abide by any rules outlined in the WDF
/// documentation. This macro does not perform any validation of the
/// arguments passed to it, beyond type validation.
#[macro_export]
macro_rules! call_unsafe_wdf_function_binding {{
    ( $($tt:tt)* ) => {{
        $crate::__proc_macros::call_unsafe_wdf_function_binding! (
            r"{types_path}",
            $($tt)*
        )
    }}
}}
"#
        ),
    )
}

/// The one test stub whose name depends on the configuration: the versioned function table.
fn generate_test_stubs(out_path: &Path, config: &Config) -> Result<(), ConfigError> {
    let symbol = config
        .compute_wdffunctions_symbol_name()
        .expect("KMDF configs always have a WdfFunctions symbol name");
    write(
        out_path.join("test_stubs.rs"),
        &format!(
            "\nuse crate::WDFFUNC;\n\n/// Stubbed version of the symbol that `WdfFunctions` \
             links to so that test targets will compile\n// SAFETY: Generated WDF symbol name is \
             required for test compilation and is unique per build.\n#[unsafe(no_mangle)]\npub \
             static mut {symbol}: *const WDFFUNC = core::ptr::null();\n"
        ),
    )
}
