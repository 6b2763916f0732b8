//! The build script every KMDF driver crate has: wdk-build checks the static C runtime and
//! emits the `driver_model__driver_type` cfg (here through the Linux shim).

fn main() -> Result<(), wdk_build::ConfigError> {
    wdk_build::configure_wdk_binary_build()
}
