//! The `metadata.wdk` sections of Cargo manifests, as the real crate reads them.

use std::collections::HashSet;

use cargo_metadata::{Metadata, camino::Utf8PathBuf};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::DriverConfig;

/// Metadata specified in the `metadata.wdk` section of the `Cargo.toml`
/// of a crate that depends on the WDK, or in a cargo workspace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(
    deny_unknown_fields,
    rename_all(serialize = "SCREAMING_SNAKE_CASE", deserialize = "kebab-case")
)]
pub struct Wdk {
    /// Metadata corresponding to the `Driver Model` property page in the WDK
    pub driver_model: DriverConfig,
}

/// A specialized [`Result`](std::result::Result) type for metadata serialization.
pub type Result<T> = std::result::Result<T, Error>;

/// Errors of the real crate's metadata serializer. The shim does not serialize metadata (it
/// emits the one cfg directly), but [`crate::ConfigError::SerdeError`] carries this type.
#[derive(Debug, Error)]
pub enum Error {
    /// catch-all error emitted during serialization
    #[error("custom serialization error: {message}")]
    CustomSerialization {
        /// Message describing the error
        message: String,
    },

    /// error emitted when an empty key name is encountered during serialization
    #[error("empty key name encountered during serialization of value: {value_being_serialized}")]
    EmptySerializationKeyName {
        /// Value being serialized
        value_being_serialized: String,
    },

    /// error emitted when duplicate key names are found during serialization
    #[error(
        "duplicate keys found during serialization:\nkey: {key}\nvalue 1: {value_1}\nvalue 2: \
         {value_2}"
    )]
    DuplicateSerializationKeys {
        /// Key name
        key: String,
        /// One of the conflicting values
        value_1: String,
        /// One of the conflicting values
        value_2: String,
    },
}

/// Errors that could result from trying to construct a [`Wdk`] from information parsed by
/// `cargo metadata`
#[derive(Debug, Error)]
pub enum TryFromCargoMetadataError {
    /// Error returned when no WDK configuration metadata is detected in the
    /// dependency graph
    #[error(
        "no WDK configuration metadata is detected in the dependency graph. This could happen \
         when building WDR itself, or building library crates that depend on the WDK but defer \
         WDK configuration to their consumers"
    )]
    NoWdkConfigurationsDetected,

    /// Error returned when multiple configurations of the WDK are detected
    /// across the dependency graph
    #[error(
        "multiple configurations of the WDK are detected across the dependency graph, but only \
         one configuration is allowed: {wdk_metadata_configurations:#?}"
    )]
    MultipleWdkConfigurationsDetected {
        /// [`HashSet`] of unique [`Wdk`] derived from detected WDK metadata
        wdk_metadata_configurations: HashSet<Wdk>,
    },

    /// Error returned when [`Wdk`] fails to be deserialized from [`cargo_metadata::Metadata`]
    /// output
    #[error("failed to deserialize metadata::Wdk from {metadata_source}")]
    WdkMetadataDeserialization {
        /// `String` that describes what part of `cargo_metadata::Metadata` was used as the
        /// source for deserialization
        metadata_source: String,
        /// [`serde_json::Error`] that caused the deserialization to fail
        #[source]
        error_source: serde_json::Error,
    },
}

impl TryFrom<&Metadata> for Wdk {
    type Error = TryFromCargoMetadataError;

    fn try_from(metadata: &Metadata) -> std::result::Result<Self, Self::Error> {
        let mut configurations = HashSet::new();
        for package in &metadata.packages {
            match &package.metadata["wdk"] {
                serde_json::Value::Null => {}
                // An empty section only marks a package as a driver (the packaging flow looks
                // for it); the configuration then comes from the workspace.
                serde_json::Value::Object(map) if map.is_empty() => {}
                section => {
                    configurations.insert(deserialize(
                        section,
                        format!("package.metadata[\"wdk\"] for {} package", package.name),
                    )?);
                }
            }
        }
        match &metadata.workspace_metadata["wdk"] {
            serde_json::Value::Null => {}
            section => {
                configurations.insert(deserialize(
                    section,
                    "workspace_metadata[\"wdk\"]".to_string(),
                )?);
            }
        }

        if configurations.len() > 1 {
            return Err(
                TryFromCargoMetadataError::MultipleWdkConfigurationsDetected {
                    wdk_metadata_configurations: configurations,
                },
            );
        }
        configurations
            .into_iter()
            .next()
            .ok_or(TryFromCargoMetadataError::NoWdkConfigurationsDetected)
    }
}

fn deserialize(
    section: &serde_json::Value,
    metadata_source: String,
) -> std::result::Result<Wdk, TryFromCargoMetadataError> {
    Wdk::deserialize(section).map_err(|error_source| {
        TryFromCargoMetadataError::WdkMetadataDeserialization {
            metadata_source,
            error_source,
        }
    })
}

/// Every manifest `cargo metadata` read: each package's and the workspace root's.
pub(crate) fn iter_manifest_paths(metadata: Metadata) -> impl IntoIterator<Item = Utf8PathBuf> {
    let mut paths: HashSet<Utf8PathBuf> = metadata
        .packages
        .into_iter()
        .map(|package| package.manifest_path)
        .collect();
    paths.insert(metadata.workspace_root.join("Cargo.toml"));
    paths
}
