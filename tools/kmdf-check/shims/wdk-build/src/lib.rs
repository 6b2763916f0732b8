//! Linux stand-in for `wdk-build` 0.6.0, used only by `tools/kmdf-check`.
//!
//! The real crate configures a driver build against an installed WDK and refuses to compile off
//! Windows. This crate keeps the public API that build scripts (`wdk-sys`, `wdk`, `wdk-alloc`,
//! `wdk-panic` and driver crates) call, with the same signatures and error types, and changes
//! only what cannot exist on Linux:
//!
//! - the "WDK content root" is this repository's `tools/kmdf-check/include` (our WDF subset and
//!   the compat header), and the base kernel headers come from Debian's `mingw-w64-common`;
//! - [`configure_wdk_binary_build`] and [`configure_wdk_library_build`] emit the same
//!   `driver_model__driver_type` cfg and check-cfg as the real crate, but no linker arguments
//!   or search paths: nothing is ever linked here, the check stops at type-checking;
//! - [`BuilderExt::wdk_default`] adds the clang flags that make the mingw headers parse like
//!   the WDK's for `x86_64-pc-windows-msvc` (see `bindgen.rs`).
//!
//! Left out on purpose: the `cargo_make` module (the Windows packaging flow, never called from
//! a build script) and the metadata serializer behind it.

use std::{
    env, fmt,
    path::{Path, PathBuf},
    str::FromStr,
};

pub use crate::bindgen::BuilderExt;
use cargo_metadata::MetadataCommand;
use serde::{Deserialize, Serialize};
use thiserror::Error;

mod bindgen;
pub mod metadata;

/// Where Debian's `mingw-w64-common` installs the Windows headers (`ddk/` holds `wdm.h`,
/// `ntddk.h` and `ntifs.h`).
const MINGW_W64_INCLUDE_DIR: &str = "/usr/share/mingw-w64/include";

/// Our own headers: `km/` (what mingw lacks) and `wdf/kmdf/<major>.<minor>/wdf.h` (the subset).
/// Resolved at compile time so that every build script using this crate agrees on it.
const KIT_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include");

/// The cfg keys this crate exports, with the values each may take.
const EXPORTED_CFG_SETTINGS: &[(&str, &[&str])] =
    &[("driver_model__driver_type", &["WDM", "KMDF", "UMDF"])];

/// Configuration parameters for a build dependent on the WDK
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Config {
    /// Root of the header kit: `tools/kmdf-check/include` here, the WDK on Windows.
    wdk_content_root: PathBuf,
    /// CPU architecture to target
    cpu_architecture: CpuArchitecture,
    /// Build configuration of driver
    pub driver_config: DriverConfig,
}

/// The driver type with its associated configuration parameters
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(
    tag = "DRIVER_TYPE",
    deny_unknown_fields,
    rename_all = "UPPERCASE",
    from = "DeserializableDriverConfig"
)]
pub enum DriverConfig {
    /// Windows Driver Model
    Wdm,
    /// Kernel Mode Driver Framework
    Kmdf(KmdfConfig),
    /// User Mode Driver Framework
    Umdf(UmdfConfig),
}

/// The manifest spells the tag `driver-type`; serde cannot use a different tag name for
/// deserializing than for serializing, hence this twin of [`DriverConfig`].
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Hash)]
#[serde(tag = "driver-type", deny_unknown_fields, rename_all = "UPPERCASE")]
enum DeserializableDriverConfig {
    Wdm,
    Kmdf(KmdfConfig),
    Umdf(UmdfConfig),
}

impl From<DeserializableDriverConfig> for DriverConfig {
    fn from(config: DeserializableDriverConfig) -> Self {
        match config {
            DeserializableDriverConfig::Wdm => Self::Wdm,
            DeserializableDriverConfig::Kmdf(kmdf_config) => Self::Kmdf(kmdf_config),
            DeserializableDriverConfig::Umdf(umdf_config) => Self::Umdf(umdf_config),
        }
    }
}

/// The CPU architecture that's configured to be compiled for
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum CpuArchitecture {
    /// AMD64 CPU architecture. Also known as x64 or x86-64.
    Amd64,
    /// ARM64 CPU architecture. Also known as aarch64.
    Arm64,
}

impl FromStr for CpuArchitecture {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_lowercase().as_str() {
            "amd64" => Ok(Self::Amd64),
            "arm64" => Ok(Self::Arm64),
            _ => Err(format!("'{s}' is not a valid target architecture")),
        }
    }
}

impl fmt::Display for CpuArchitecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Amd64 => "amd64",
            Self::Arm64 => "arm64",
        })
    }
}

impl CpuArchitecture {
    /// Converts [`CpuArchitecture`] to the string corresponding to what the
    /// architecture is typically referred to in Windows
    #[must_use]
    pub const fn as_windows_str(&self) -> &str {
        match self {
            Self::Amd64 => "x64",
            Self::Arm64 => "ARM64",
        }
    }

    /// Converts from a cargo-provided [`std::str`] to a [`CpuArchitecture`].
    #[must_use]
    pub fn try_from_cargo_str<S: AsRef<str>>(cargo_str: S) -> Option<Self> {
        match cargo_str.as_ref() {
            "x86_64" => Some(Self::Amd64),
            "aarch64" => Some(Self::Arm64),
            _ => None,
        }
    }

    /// The clang target triple bindgen parses the headers for.
    const fn clang_target(self) -> &'static str {
        match self {
            Self::Amd64 => "x86_64-pc-windows-msvc",
            Self::Arm64 => "aarch64-pc-windows-msvc",
        }
    }
}

/// The configuration parameters for KMDF drivers
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(
    deny_unknown_fields,
    rename_all(serialize = "SCREAMING_SNAKE_CASE", deserialize = "kebab-case")
)]
pub struct KmdfConfig {
    /// Major KMDF Version
    pub kmdf_version_major: u8,
    /// Minor KMDF Version (Target Version)
    pub target_kmdf_version_minor: u8,
    /// Minor KMDF Version (Minimum Required)
    pub minimum_kmdf_version_minor: Option<u8>,
}

impl Default for KmdfConfig {
    fn default() -> Self {
        // The real crate's default, kept so that `KmdfConfig::new()` means the same thing.
        Self {
            kmdf_version_major: 1,
            target_kmdf_version_minor: 33,
            minimum_kmdf_version_minor: None,
        }
    }
}

impl KmdfConfig {
    /// Creates a new [`KmdfConfig`] with default values
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

/// The configuration parameters for UMDF drivers
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(
    deny_unknown_fields,
    rename_all(serialize = "SCREAMING_SNAKE_CASE", deserialize = "kebab-case")
)]
pub struct UmdfConfig {
    /// Major UMDF Version
    pub umdf_version_major: u8,
    /// Minor UMDF Version (Target Version)
    pub target_umdf_version_minor: u8,
    /// Minor UMDF Version (Minimum Required)
    pub minimum_umdf_version_minor: Option<u8>,
}

impl Default for UmdfConfig {
    fn default() -> Self {
        Self {
            umdf_version_major: 2,
            target_umdf_version_minor: 33,
            minimum_umdf_version_minor: None,
        }
    }
}

impl UmdfConfig {
    /// Creates a new [`UmdfConfig`] with default values
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

/// Metadata providing additional context for [`std::io::Error`] failures
#[non_exhaustive]
#[derive(Debug, Error)]
pub enum IoErrorMetadata {
    /// Path related to [`std::io::Error`] failure
    #[error(r#"failed to perform an IO operation on "{path}""#)]
    Path {
        /// The file system path where the I/O error occurred
        path: PathBuf,
    },
    /// Source and destination paths related to [`std::io::Error`] failure.
    #[error(r#"failed to perform an IO operation from "{from_path}" to "{to_path}""#)]
    SrcDestPaths {
        /// The source path in a copy or move operation that failed
        from_path: PathBuf,
        /// The destination path in a copy or move operation that failed
        to_path: PathBuf,
    },
}

/// Dedicated error type for I/O operations with extra metadata context
#[derive(Debug, Error)]
#[error("{metadata}")]
pub struct IoError {
    /// Extra metadata related to the error
    metadata: IoErrorMetadata,
    /// [`std::io::Error`] that caused the operation to fail
    #[source]
    source: std::io::Error,
}

impl IoError {
    /// Creates a new `IoError` with a single path and source error.
    pub fn with_path(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self {
            metadata: IoErrorMetadata::Path { path: path.into() },
            source,
        }
    }

    /// Creates a new `IoError` for operations involving a source and
    /// destination path.
    pub fn with_src_dest_paths(
        from_path: impl Into<PathBuf>,
        to_path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self {
            metadata: IoErrorMetadata::SrcDestPaths {
                from_path: from_path.into(),
                to_path: to_path.into(),
            },
            source,
        }
    }
}

/// Errors that could result from configuring a build via [`wdk_build`][crate]
///
/// Same variants as the real crate, so that code matching on them compiles unchanged.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// Error returned when an [`std::io`] operation fails
    #[error(transparent)]
    IoError(#[from] IoError),

    /// Error returned when an expected directory does not exist
    #[error("cannot find directory: {directory}")]
    DirectoryNotFound {
        /// Path of directory that was not found
        directory: String,
    },

    /// Error returned when a package is not found in Cargo metadata
    #[error("cannot find wdk-build package in Cargo metadata")]
    WdkBuildPackageNotFoundInCargoMetadata,

    /// Error returned Cargo manifest contains an unsupported edition
    #[error("Cargo manifest contains unsupported Rust edition: {edition}")]
    UnsupportedRustEdition {
        /// Edition of the Cargo manifest that was not supported
        edition: String,
    },

    /// Error returned when `bindgen` does not support `rust-version` in Cargo
    /// manifest
    #[error("Rust version {msrv} not supported by Bindgen: {reason}")]
    MsrvNotSupportedByBindgen {
        /// MSRV that was not supported by Bindgen
        msrv: String,
        /// Reason why the MSRV was not supported
        reason: String,
    },

    /// Error returned when `semver` parsing of the Rust version fails
    #[error("failed to parse rust-version in manifest")]
    RustVersionParseError {
        /// [`semver::Error`](cargo_metadata::semver::Error) that caused parsing the Rust version
        /// to fail
        #[source]
        error_source: cargo_metadata::semver::Error,
    },

    /// Error returned when a [`metadata::Wdk`] fails to be parsed from a Cargo
    /// Manifest
    #[error(transparent)]
    TryFromCargoMetadataError(#[from] metadata::TryFromCargoMetadataError),

    /// Error returned when the WDK content root cannot be found (always the case on Linux for
    /// [`detect_wdk_build_number`])
    #[error(
        "WDKContentRoot should be able to be detected. Ensure that the WDK is installed, or that \
         the environment setup scripts in the eWDK have been run."
    )]
    WdkContentRootDetectionError,

    /// Error returned when the WDK version string does not match the expected
    /// format
    #[error("the WDK version string provided ({version}) was not in a valid format")]
    WdkVersionStringFormatError {
        /// The incorrect WDK version string.
        version: String,
    },

    /// Error returned when `cargo_metadata` execution or parsing fails
    #[error(transparent)]
    CargoMetadataError(#[from] cargo_metadata::Error),

    /// Error returned when no wdk-build package is detected
    #[error("no wdk-build package is detected")]
    NoWdkBuildCrateDetected,

    /// Error returned when multiple versions of the wdk-build package are
    /// detected
    #[error(
        "multiple versions of the wdk-build package are detected, but only one version is \
         allowed: {package_ids:#?}"
    )]
    MultipleWdkBuildCratesDetected {
        /// package ids of the wdk-build crates detected
        package_ids: Vec<cargo_metadata::PackageId>,
    },

    /// Error returned when the c runtime is not configured to be statically
    /// linked
    #[error(
        "the C runtime is not properly configured to be statically linked. This is required for \
         building WDK drivers: add `-C target-feature=+crt-static` to the target's rustflags \
         (.cargo/config.toml)"
    )]
    StaticCrtNotEnabled,

    /// Error returned when [`metadata::Wdk`] cannot be turned into cfg settings
    #[error(transparent)]
    SerdeError(#[from] metadata::Error),
}

/// Subset of APIs in the Windows Driver Kit
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub enum ApiSubset {
    /// API subset typically required for all Windows drivers
    Base,
    /// API subset required for WDF (Windows Driver Framework) drivers
    Wdf,
    /// API subset for GPIO drivers (no headers in the kmdf-check kit)
    Gpio,
    /// API subset for HID drivers (no headers in the kmdf-check kit)
    Hid,
    /// API subset for Parallel Ports drivers (no headers in the kmdf-check kit)
    ParallelPorts,
    /// API subset for SPB drivers (no headers in the kmdf-check kit)
    Spb,
    /// API subset for Storage drivers (no headers in the kmdf-check kit)
    Storage,
    /// API subset for USB drivers (no headers in the kmdf-check kit)
    Usb,
}

/// Error when parsing a [`TwoPartVersion`].
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TwoPartVersionError {
    /// Supplied string didn't match MAJOR.MINOR format.
    #[error("Invalid version: {0}. Expected format is 'major.minor'")]
    InvalidFormat(String),
    /// A numeric component failed to parse (component name, original string).
    #[error("Error parsing {0} version to 'u32'. Version string: {1}")]
    ParseError(String, String),
}

/// Version of the form MAJOR.MINOR (both u32). Accepts leading zeros.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
pub struct TwoPartVersion(pub u32, pub u32);

impl FromStr for TwoPartVersion {
    type Err = TwoPartVersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || TwoPartVersionError::InvalidFormat(s.to_string());
        if s.matches('.').count() != 1 {
            return Err(invalid());
        }
        let (major_str, minor_str) = s.split_once('.').ok_or_else(invalid)?;
        if major_str.is_empty() || minor_str.is_empty() {
            return Err(invalid());
        }
        let parse = |component: &str, text: &str| {
            text.parse::<u32>()
                .map_err(|_| TwoPartVersionError::ParseError(component.to_string(), s.to_string()))
        };
        Ok(Self(parse("major", major_str)?, parse("minor", minor_str)?))
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            wdk_content_root: PathBuf::from(KIT_ROOT),
            driver_config: DriverConfig::Wdm,
            cpu_architecture: detect_cpu_architecture_in_build_script(),
        }
    }
}

impl Config {
    /// Create a new [`Config`] with default values
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Create a [`Config`] from the `metadata.wdk` sections that `cargo metadata` reports for the
    /// top-level manifest's workspace, as the real crate does, and emit
    /// `cargo:rerun-if-changed` for every manifest it read.
    ///
    /// # Errors
    ///
    /// This function will return an error if:
    /// * the execution of `cargo metadata` fails
    /// * the parsing of [`metadata::Wdk`] from any of the Cargo manifests fail
    /// * multiple conflicting [`metadata::Wdk`] configurations are detected
    /// * no [`metadata::Wdk`] configurations are detected
    ///
    /// # Panics
    ///
    /// Panics if the resolved top-level Cargo manifest path is not valid UTF-8
    pub fn from_env_auto() -> Result<Self, ConfigError> {
        let top_level_cargo_manifest_path = find_top_level_cargo_manifest();
        let cwd = top_level_cargo_manifest_path
            .parent()
            .expect("Cargo manifest should have a valid parent directory");

        let cargo_metadata = MetadataCommand::new()
            // The top-level directory, so that its .cargo/config.toml and toolchain apply.
            .current_dir(cwd)
            .manifest_path(&top_level_cargo_manifest_path)
            .exec()?;
        let wdk_metadata = metadata::Wdk::try_from(&cargo_metadata)?;

        for manifest_path in metadata::iter_manifest_paths(cargo_metadata)
            .into_iter()
            .chain(std::iter::once(
                top_level_cargo_manifest_path
                    .try_into()
                    .expect("Path to Cargo manifests should always be valid UTF8"),
            ))
        {
            println!("cargo:rerun-if-changed={manifest_path}");
        }

        Ok(Self {
            driver_config: wdk_metadata.driver_model,
            ..Default::default()
        })
    }

    /// Emit `cargo::rustc-check-cfg` directives corresponding to all the
    /// possible `rustc-cfg` settings `wdk_build` could emit
    pub fn emit_check_cfg_settings() {
        for (cfg_key, allowed_values) in EXPORTED_CFG_SETTINGS {
            let values: String = allowed_values
                .iter()
                .map(|value| format!(r#""{value}","#))
                .collect();
            println!("cargo::rustc-check-cfg=cfg({cfg_key}, values({values}))");
        }
    }

    /// Emit the check-cfg settings and the `driver_model__driver_type` cfg of this [`Config`].
    fn emit_cfg_settings(&self) {
        Self::emit_check_cfg_settings();
        let driver_type = match self.driver_config {
            DriverConfig::Wdm => "WDM",
            DriverConfig::Kmdf(_) => "KMDF",
            DriverConfig::Umdf(_) => "UMDF",
        };
        println!(r#"cargo::rustc-cfg=driver_model__driver_type="{driver_type}""#);
    }

    /// Return header include paths required to build and link based off of the
    /// configuration of `Config`: our compat directory, mingw's `ddk/` and base directories,
    /// and for KMDF the WDF subset of the configured version.
    ///
    /// # Errors
    ///
    /// This function will return an error if any of the required paths do not
    /// exist (mingw-w64-common not installed, or no WDF subset for the configured version).
    pub fn include_paths(&self) -> Result<impl Iterator<Item = PathBuf>, ConfigError> {
        let mut include_paths = vec![];
        let mingw = Path::new(MINGW_W64_INCLUDE_DIR);
        Self::validate_and_add_folder_path(&mut include_paths, &self.wdk_content_root.join("km"))?;
        Self::validate_and_add_folder_path(&mut include_paths, &mingw.join("ddk"))?;
        Self::validate_and_add_folder_path(&mut include_paths, mingw)?;
        match &self.driver_config {
            DriverConfig::Wdm => {}
            DriverConfig::Kmdf(kmdf_config) => {
                let kmdf_include_path = self.wdk_content_root.join(format!(
                    "wdf/kmdf/{}.{}",
                    kmdf_config.kmdf_version_major, kmdf_config.target_kmdf_version_minor
                ));
                Self::validate_and_add_folder_path(&mut include_paths, &kmdf_include_path)?;
            }
            DriverConfig::Umdf(umdf_config) => {
                let umdf_include_path = self.wdk_content_root.join(format!(
                    "wdf/umdf/{}.{}",
                    umdf_config.umdf_version_major, umdf_config.target_umdf_version_minor
                ));
                Self::validate_and_add_folder_path(&mut include_paths, &umdf_include_path)?;
            }
        }
        Ok(include_paths.into_iter())
    }

    fn validate_and_add_folder_path(
        include_paths: &mut Vec<PathBuf>,
        path: &Path,
    ) -> Result<(), ConfigError> {
        if !path.is_dir() {
            return Err(ConfigError::DirectoryNotFound {
                directory: path.to_string_lossy().into(),
            });
        }
        let absolute_path = path
            .canonicalize()
            .map_err(|source| IoError::with_path(path, source))?;
        include_paths.push(absolute_path);
        Ok(())
    }

    /// Return library paths required to link. Always empty here: the Linux check never links,
    /// and the import libraries are part of the WDK, which is not on this machine.
    ///
    /// # Errors
    ///
    /// Never; the signature matches the real crate's.
    pub fn library_paths(&self) -> Result<impl Iterator<Item = PathBuf>, ConfigError> {
        Ok(Vec::new().into_iter())
    }

    /// Return an iterator of strings that represent compiler definitions
    /// derived from the `Config`: the real crate's, plus `STRICT` for kernel-mode configs.
    pub fn preprocessor_definitions(&self) -> impl Iterator<Item = (String, Option<String>)> {
        let architecture: Vec<(&str, Option<u8>)> = match self.cpu_architecture {
            CpuArchitecture::Amd64 => vec![("_WIN64", None), ("_AMD64_", None), ("AMD64", None)],
            CpuArchitecture::Arm64 => vec![
                ("_ARM64_", None),
                ("ARM64", None),
                ("_USE_DECLSPECS_FOR_SAL", Some(1)),
                ("STD_CALL", None),
            ],
        };
        let driver_model: Vec<(&str, Option<u8>)> = match self.driver_config {
            // mingw's ntdef.h declares DECLARE_HANDLE types as distinct structs only under
            // STRICT; without it every WDF handle is a plain HANDLE and a swapped handle
            // argument type-checks. The WDK's kernel headers always make them distinct.
            DriverConfig::Wdm => vec![("_KERNEL_MODE", None), ("STRICT", None)],
            DriverConfig::Kmdf(kmdf_config) => {
                let mut definitions = vec![
                    ("_KERNEL_MODE", None),
                    ("STRICT", None),
                    ("KMDF_VERSION_MAJOR", Some(kmdf_config.kmdf_version_major)),
                    (
                        "KMDF_VERSION_MINOR",
                        Some(kmdf_config.target_kmdf_version_minor),
                    ),
                ];
                if let Some(minimum_minor_version) = kmdf_config.minimum_kmdf_version_minor {
                    definitions
                        .push(("KMDF_MINIMUM_VERSION_REQUIRED", Some(minimum_minor_version)));
                }
                definitions
            }
            DriverConfig::Umdf(umdf_config) => {
                let mut definitions = vec![
                    ("UMDF_VERSION_MAJOR", Some(umdf_config.umdf_version_major)),
                    (
                        "UMDF_VERSION_MINOR",
                        Some(umdf_config.target_umdf_version_minor),
                    ),
                    ("_ATL_NO_WIN_SUPPORT", None),
                    ("WIN32_LEAN_AND_MEAN", Some(1)),
                ];
                if let Some(minimum_minor_version) = umdf_config.minimum_umdf_version_minor {
                    definitions
                        .push(("UMDF_MINIMUM_VERSION_REQUIRED", Some(minimum_minor_version)));
                }
                if umdf_config.umdf_version_major >= 2 {
                    definitions.extend([
                        ("UMDF_USING_NTSTATUS", None),
                        ("_UNICODE", None),
                        ("UNICODE", None),
                    ]);
                }
                definitions
            }
        };
        architecture
            .into_iter()
            .chain(driver_model)
            .map(|(key, value)| (key.to_string(), value.map(|v| v.to_string())))
    }

    /// Return an iterator of strings that represent compiler flags used by bindgen to parse the
    /// headers: the real crate's MSVC-compatibility flags and warning switches, plus what the
    /// mingw headers need to parse as the WDK's would (they test `__GNUC__` for the MSVC
    /// extensions they use, and redeclare a few clang builtins).
    pub fn wdk_bindgen_compiler_flags() -> impl Iterator<Item = String> {
        [
            "-fms-compatibility",
            "-fms-extensions",
            "-fdelayed-template-parsing",
            "-fgnuc-version=4.2.1",
            "--warn-=no-nonportable-include-path",
            "--warn-=no-pragma-pack",
            "--warn-=no-ignored-attributes",
            "--warn-=no-ignored-pragma-intrinsic",
            "--warn-=no-visibility",
            "--warn-=no-switch",
            "--warn-=no-comment",
            "--warn-=no-deprecated-declarations",
            "--warn-=no-invalid-token-paste",
            "--warn-=no-microsoft",
            "--warn-=no-incompatible-library-redeclaration",
        ]
        .into_iter()
        .map(ToString::to_string)
    }

    /// Returns a [`String`] iterator over all the headers for a given
    /// [`ApiSubset`]
    ///
    /// # Errors
    /// [`ConfigError::DirectoryNotFound`] for the subsets the kmdf-check kit has no headers for
    /// (everything but [`ApiSubset::Base`] and [`ApiSubset::Wdf`]).
    pub fn headers(
        &self,
        api_subset: ApiSubset,
    ) -> Result<impl Iterator<Item = String>, ConfigError> {
        let headers: Vec<&str> = match api_subset {
            // The compat header includes ntifs.h, ntddk.h and ntstrsafe.h (the real crate's
            // base list) and adds what mingw lacks.
            ApiSubset::Base => vec!["kmdf_check_base.h"],
            ApiSubset::Wdf => {
                if matches!(
                    self.driver_config,
                    DriverConfig::Kmdf(_) | DriverConfig::Umdf(_)
                ) {
                    vec!["wdf.h"]
                } else {
                    vec![]
                }
            }
            ApiSubset::Gpio
            | ApiSubset::Hid
            | ApiSubset::ParallelPorts
            | ApiSubset::Spb
            | ApiSubset::Storage
            | ApiSubset::Usb => {
                return Err(ConfigError::DirectoryNotFound {
                    directory: self
                        .wdk_content_root
                        .join(format!("{api_subset:?}").to_lowercase())
                        .to_string_lossy()
                        .into(),
                });
            }
        };
        Ok(headers
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()
            .into_iter())
    }

    /// Returns a [`String`] containing the contents of a header file designed
    /// for [`bindgen`](https://docs.rs/bindgen) to process
    ///
    /// # Errors
    /// [`ConfigError`] - if the headers for a [`ApiSubset`] could not be
    /// determined
    pub fn bindgen_header_contents(
        &self,
        api_subsets: impl IntoIterator<Item = ApiSubset> + fmt::Debug,
    ) -> Result<String, ConfigError> {
        Ok(api_subsets
            .into_iter()
            .map(|api_subset| self.headers(api_subset))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flat_map(|iter| iter.map(|header| format!("#include \"{header}\"\n")))
            .collect())
    }

    /// Returns the `#[link]` directives the real crate puts into the generated bindings, gated
    /// the same way (`not(any(test, feature = "suppress-wdk-linking"))`). They cost nothing
    /// here: a check build never links.
    #[must_use]
    pub fn bindgen_library_link_raw_lines(&self, api_subset: ApiSubset) -> Option<String> {
        let libraries: Vec<&str> = match (api_subset, &self.driver_config) {
            (ApiSubset::Base, DriverConfig::Wdm) => {
                vec!["BufferOverflowFastFailK", "ntoskrnl", "hal", "wmilib"]
            }
            (ApiSubset::Base, DriverConfig::Kmdf(_)) => vec![
                "BufferOverflowFastFailK",
                "ntoskrnl",
                "hal",
                "wmilib",
                "WdfLdr",
                "WdfDriverEntry",
            ],
            (ApiSubset::Base, DriverConfig::Umdf(umdf_config)) => {
                if umdf_config.umdf_version_major >= 2 {
                    vec!["WdfDriverStubUm", "ntdll", "OneCoreUAP"]
                } else {
                    vec!["OneCoreUAP"]
                }
            }
            (ApiSubset::Hid, DriverConfig::Wdm | DriverConfig::Kmdf(_)) => vec!["VhfKm"],
            (ApiSubset::Hid, DriverConfig::Umdf(_)) => vec!["VhfUm"],
            _ => vec![],
        };
        let mut libraries = libraries;
        if api_subset == ApiSubset::Base
            && !matches!(self.driver_config, DriverConfig::Umdf(_))
            && self.cpu_architecture == CpuArchitecture::Arm64
        {
            libraries.push("arm64rt");
        }
        (!libraries.is_empty()).then(|| {
            libraries
                .iter()
                .map(|name| {
                    format!(
                        "#[cfg(not(any(test, feature = \"suppress-wdk-linking\")))]\n#[link(name \
                         = \"{name}\", kind = \"static\", modifiers = \"-bundle\")]\nunsafe \
                         extern \"C\" {{}}\n"
                    )
                })
                .collect()
        })
    }

    /// Configure a Cargo build of a library that depends on the WDK: emits the cfg settings.
    ///
    /// # Errors
    ///
    /// Never here; the signature matches the real crate's.
    pub fn configure_library_build(&self) -> Result<(), ConfigError> {
        self.emit_cfg_settings();
        Ok(())
    }

    /// Compute the name of the `WdfFunctions` symbol used for WDF function
    /// dispatching based off of the [`Config`]. Returns `None` if the driver
    /// model is [`DriverConfig::Wdm`]
    #[must_use]
    pub fn compute_wdffunctions_symbol_name(&self) -> Option<String> {
        let (wdf_major_version, wdf_minor_version) = match self.driver_config {
            DriverConfig::Kmdf(config) => {
                (config.kmdf_version_major, config.target_kmdf_version_minor)
            }
            DriverConfig::Umdf(config) => {
                (config.umdf_version_major, config.target_umdf_version_minor)
            }
            DriverConfig::Wdm => return None,
        };
        Some(format!(
            "WdfFunctions_{wdf_major_version:02}0{wdf_minor_version:02}"
        ))
    }

    /// Configure a Cargo build of a binary (driver) that depends on the WDK. Like the real crate
    /// it refuses a kernel-mode build without a static C runtime; unlike it, it emits no linker
    /// settings, only the cfg settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError::StaticCrtNotEnabled`] if `crt-static` is not among the target features of
    /// a WDM or KMDF build.
    ///
    /// # Panics
    ///
    /// Panics if the invoked from outside a Cargo build environment
    pub fn configure_binary_build(&self) -> Result<(), ConfigError> {
        let target_features = env::var("CARGO_CFG_TARGET_FEATURE")
            .expect("CARGO_CFG_TARGET_FEATURE should be set by Cargo");
        if !target_features.split(',').any(|f| f == "crt-static")
            && !matches!(self.driver_config, DriverConfig::Umdf(_))
        {
            return Err(ConfigError::StaticCrtNotEnabled);
        }
        self.emit_cfg_settings();
        Ok(())
    }

    /// The clang target triple for this configuration's CPU architecture.
    fn clang_target(&self) -> &'static str {
        self.cpu_architecture.clang_target()
    }
}

/// The CPU architecture of the target being built, from Cargo's build-script environment.
///
/// # Panics
///
/// Panics if `CARGO_CFG_TARGET_ARCH` is not set or names an architecture Windows drivers do not
/// support.
fn detect_cpu_architecture_in_build_script() -> CpuArchitecture {
    let target_arch = env::var("CARGO_CFG_TARGET_ARCH").expect(
        "Cargo should have set the CARGO_CFG_TARGET_ARCH environment variable when executing \
         build.rs",
    );
    CpuArchitecture::try_from_cargo_str(&target_arch).unwrap_or_else(|| {
        panic!("The target architecture, {target_arch}, is currently not supported.")
    })
}

/// Find the path of the toplevel Cargo manifest of the currently executing
/// Cargo subcommand: the `Cargo.toml` beside the first `Cargo.lock` above `OUT_DIR`.
///
/// # Panics
///
/// Panics if a `Cargo.lock` file cannot be found in any of the ancestors of
/// `OUT_DIR` or if this function was called outside of a `build.rs` file
#[must_use]
pub fn find_top_level_cargo_manifest() -> PathBuf {
    let out_dir =
        PathBuf::from(env::var("OUT_DIR").expect(
            "Cargo should have set the OUT_DIR environment variable when executing build.rs",
        ));
    out_dir
        .ancestors()
        .find(|path| path.join("Cargo.lock").exists())
        .expect("a Cargo.lock file should exist in the same directory as the top-level Cargo.toml")
        .join("Cargo.toml")
}

/// Configure a Cargo build of a library that depends on the WDK.
///
/// A graph without WDK metadata is not an error, as in the real crate: only the check-cfg
/// settings are emitted.
///
/// # Errors
///
/// This function will return an error if the metadata cannot be read or is inconsistent.
pub fn configure_wdk_library_build() -> Result<(), ConfigError> {
    configure_wdk_library_build_and_then(|_| Ok::<(), ConfigError>(()))
}

/// Configure a Cargo build of a library that depends on the WDK, then execute a
/// function or closure with the [`Config`] derived from `metadata.wdk` sections
/// of `Cargo.toml`s.
///
/// # Errors
///
/// This function will return an error if the metadata cannot be read or is inconsistent, or
/// if `f` fails.
pub fn configure_wdk_library_build_and_then<F, E>(mut f: F) -> Result<(), E>
where
    F: FnMut(Config) -> Result<(), E>,
    E: std::convert::From<ConfigError>,
{
    match Config::from_env_auto() {
        Ok(config) => {
            config.configure_library_build()?;
            f(config)
        }
        Err(ConfigError::TryFromCargoMetadataError(
            metadata::TryFromCargoMetadataError::NoWdkConfigurationsDetected,
        )) => {
            println!("cargo::warning=No WDK configurations detected.");
            Config::emit_check_cfg_settings();
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

/// Configure a Cargo build of a binary that depends on the WDK using a
/// [`Config`] derived from `metadata.wdk` sections of `Cargo.toml`s.
///
/// # Errors
///
/// This function will return an error if the metadata cannot be read or is inconsistent, or
/// if the C runtime is not configured to be statically linked
///
/// # Panics
///
/// Panics if the invoked from outside a Cargo build environment
pub fn configure_wdk_binary_build() -> Result<(), ConfigError> {
    Config::from_env_auto()?.configure_binary_build()
}

/// Detects the WDK build number. There is no WDK on a Linux host, so this always fails.
///
/// # Errors
///
/// Always [`ConfigError::WdkContentRootDetectionError`].
pub fn detect_wdk_build_number() -> Result<u32, ConfigError> {
    Err(ConfigError::WdkContentRootDetectionError)
}
