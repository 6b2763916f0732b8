//! Build script of the driver package: configures the WDK binary build, but only when the target
//! is Windows. On every other target this does nothing, so `cargo build` works anywhere.

fn main() {
    #[cfg(windows)]
    {
        if let Err(error) = wdk_build::configure_wdk_binary_build() {
            panic!("wdk-build could not configure the driver build: {error:?}");
        }
    }
}
