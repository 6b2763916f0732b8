//! The bindgen builder the real crate hands to `wdk-sys`, with the flags that make Debian's
//! mingw-w64 headers parse as the WDK's do for a Windows target.

use std::{borrow::Borrow, env, fmt, path::PathBuf, process::Command};

use bindgen::{
    Builder,
    callbacks::{ItemInfo, ItemKind, ParseCallbacks},
};

use crate::{Config, ConfigError, IoError};

/// An extension trait that provides a way to create a [`bindgen::Builder`]
/// configured for generating bindings to the wdk
pub trait BuilderExt {
    /// Returns a `bindgen::Builder` with the default configuration for
    /// generation of bindings to the wdk
    ///
    /// # Errors
    ///
    /// Implementation may return `wdk_build::ConfigError` if it fails to create
    /// a builder
    fn wdk_default(config: impl Borrow<Config> + fmt::Debug) -> Result<Builder, ConfigError>;
}

impl BuilderExt for Builder {
    fn wdk_default(config: impl Borrow<Config> + fmt::Debug) -> Result<Self, ConfigError> {
        let config = config.borrow();
        let builder = Self::default()
            .use_core()
            // C integer types through `wdk_sys::ctypes`, which has Windows' widths (LLP64:
            // `long` is 32-bit) on every host. With bindgen's default `::core::ffi` the same
            // Windows-layout bindings would take the host's `long` (64-bit on Linux), and a
            // host build (the KMDF emulation in tools/wdf-emu) would fail its layout checks.
            .ctypes_prefix("ctypes")
            // `Default` is all-zero, exactly like the real bindings (the *_INIT helpers are not
            // generated on either side).
            .derive_default(true)
            .generate_cstr(true)
            // Only our include paths: the host's /usr/include must never leak into a
            // Windows kernel-mode parse.
            .detect_include_paths(false)
            // Parse for the Windows target whatever the host is: type sizes, calling
            // conventions and `long` (32-bit on Windows) follow from it.
            .clang_arg(format!("--target={}", config.clang_target()))
            // So that `size_t` in the signatures of memcpy-like functions maps to `usize`.
            .clang_arg("-fno-builtin")
            // Debian's libclang does not find its own builtin headers (stddef.h, the x86
            // intrinsics mingw's intrin.h pulls in); the clang driver knows where they are.
            .clang_arg(format!("-resource-dir={}", clang_resource_dir()?.display()))
            .clang_args(config.include_paths()?.map(|include_path| {
                format!(
                    "--include-directory={}",
                    include_path
                        .to_str()
                        .expect("Non Unicode paths are not supported")
                )
            }))
            .clang_args(
                config
                    .preprocessor_definitions()
                    .map(|(key, value)| {
                        format!(
                            "--define-macro={key}{}",
                            value.map(|v| format!("={v}")).unwrap_or_default()
                        )
                    })
                    .chain(Config::wdk_bindgen_compiler_flags()),
            )
            // The same deprecated allocators the real crate hides, so that code calling them
            // fails here as it would on Windows.
            .blocklist_item("ExAllocatePoolWithTag")
            .blocklist_item("ExAllocatePoolWithQuotaTag")
            .blocklist_item("ExAllocatePoolWithTagPriority")
            .blocklist_item("ExAllocatePool")
            .opaque_type("_KGDTENTRY64")
            .opaque_type("_KIDTENTRY64")
            .must_use_type("NTSTATUS")
            .must_use_type("HRESULT")
            .default_enum_style(bindgen::EnumVariation::ModuleConsts)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
            .parse_callbacks(Box::new(WdkCallbacks {
                wdf_function_table_symbol_name: config.compute_wdffunctions_symbol_name(),
            }))
            .formatter(bindgen::Formatter::Prettyplease)
            .rust_target(stable_rust_target()?)
            // The real crate asks `cargo metadata` for its own edition; ours is 2024.
            .rust_edition(bindgen::RustEdition::Edition2024);
        Ok(builder)
    }
}

/// Renames the versioned function table (`WdfFunctions_01031`) to `WdfFunctions`, the name
/// `call_unsafe_wdf_function_binding!` expands to; bindgen cannot follow the header's
/// `#define WdfFunctions WdfFunctions_01031` by itself.
#[derive(Debug)]
struct WdkCallbacks {
    wdf_function_table_symbol_name: Option<String>,
}

impl ParseCallbacks for WdkCallbacks {
    fn generated_name_override(&self, item_info: ItemInfo) -> Option<String> {
        if let Some(symbol_name) = &self.wdf_function_table_symbol_name
            && let ItemInfo {
                name,
                kind: ItemKind::Var,
                ..
            } = item_info
            && name == symbol_name
        {
            return Some("WdfFunctions".to_string());
        }
        None
    }
}

/// The builtin-header directory of the clang that bindgen's libclang belongs to. `CLANG_PATH`
/// selects the clang binary, as it does for clang-sys.
fn clang_resource_dir() -> Result<PathBuf, ConfigError> {
    let clang = env::var_os("CLANG_PATH").unwrap_or_else(|| "clang".into());
    let output = Command::new(&clang)
        .arg("-print-resource-dir")
        .output()
        .map_err(|source| IoError::with_path(PathBuf::from(&clang), source))?;
    let resource_dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if !output.status.success() || !resource_dir.join("include").is_dir() {
        return Err(ConfigError::DirectoryNotFound {
            directory: format!(
                "clang resource directory ({} -print-resource-dir gave {:?}); install clang",
                clang.to_string_lossy(),
                resource_dir
            ),
        });
    }
    Ok(resource_dir)
}

/// The Rust version bindgen may generate code for: this crate's `rust-version`, as the real
/// crate does (its nightly mode only matters with the `nightly` feature on a nightly toolchain).
fn stable_rust_target() -> Result<bindgen::RustTarget, ConfigError> {
    if cfg!(feature = "nightly") && rustversion::cfg!(nightly) {
        return Ok(bindgen::RustTarget::nightly());
    }
    let msrv = cargo_metadata::semver::Version::parse(env!("CARGO_PKG_RUST_VERSION"))
        .map_err(|error_source| ConfigError::RustVersionParseError { error_source })?;
    bindgen::RustTarget::stable(msrv.minor, msrv.patch).map_err(|error| {
        ConfigError::MsrvNotSupportedByBindgen {
            msrv: msrv.to_string(),
            reason: error.to_string(),
        }
    })
}
