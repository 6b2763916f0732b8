//! Which device a scenario uses: [`DeviceSpec`] (an index in GUID_QUERY order or a node GUID)
//! and [`resolve_device`], which picks it out of what GUID_QUERY returned with a message that
//! names what exists when it is not there.
//!
//! A value with a `0x` prefix, a colon, a hex letter or 16 digits is a GUID
//! (`0x0257560000000001`, `0257560000000001` or the ibv_devinfo form `0257:5600:0000:0001`),
//! any other all-decimal value an index.

use std::fmt;
use std::str::FromStr;

/// A device chosen by its index in GUID_QUERY order or by its node GUID (a command line's
/// `--device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    /// Position in GUID_QUERY order.
    Index(usize),
    /// Node GUID.
    Guid(u64),
}

impl FromStr for DeviceSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let bad = || {
            format!(
                "'{s}' is neither a device index (0, 1, …) nor a node GUID \
                 (0x0257560000000001 or 0257:5600:0000:0001)"
            )
        };
        if t.is_empty() {
            return Err(bad());
        }
        let (hex, forced) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(rest) => (rest.to_owned(), true),
            None => (t.replace(':', ""), t.contains(':')),
        };
        let all_decimal = hex.bytes().all(|b| b.is_ascii_digit());
        if !forced && all_decimal && hex.len() < 16 {
            return t.parse().map(DeviceSpec::Index).map_err(|_| bad());
        }
        if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        u64::from_str_radix(&hex, 16)
            .map(DeviceSpec::Guid)
            .map_err(|_| bad())
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Index(i) => write!(f, "{i}"),
            DeviceSpec::Guid(g) => write!(f, "{}", format_guid(*g)),
        }
    }
}

/// A node GUID as ibv_devinfo prints it (`0257:5600:0000:0001`).
pub use wv_client::verbs::format_guid;

/// Of `count` devices, the index of another one than `index` when there are two or more (so
/// that traffic crosses the fabric, as between hosts), else `index` itself (one device loops
/// back to itself).
pub fn other_device(count: usize, index: usize) -> usize {
    (index + 1) % count
}

/// Picks a device from the GUIDs GUID_QUERY returned: returns its index.
///
/// # Errors
/// No device at all, an index out of range, or a GUID not present (the message lists what is).
pub fn resolve_device(guids: &[u64], spec: Option<DeviceSpec>) -> Result<usize, String> {
    if guids.is_empty() {
        return Err("no RDMA device found (GUID_QUERY returned none)".into());
    }
    let list = || {
        guids
            .iter()
            .enumerate()
            .map(|(i, g)| format!("{i} = {}", format_guid(*g)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match spec {
        None => Ok(0),
        Some(DeviceSpec::Index(i)) if i < guids.len() => Ok(i),
        Some(DeviceSpec::Index(i)) => Err(format!("no device with index {i}; devices: {}", list())),
        Some(DeviceSpec::Guid(g)) => guids.iter().position(|&x| x == g).ok_or_else(|| {
            format!(
                "no device with GUID {}; devices: {}",
                format_guid(g),
                list()
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_specs_parse() {
        assert_eq!("1".parse(), Ok(DeviceSpec::Index(1)));
        assert_eq!("0x10".parse(), Ok(DeviceSpec::Guid(0x10)));
        assert_eq!(
            "0257:5600:0000:0001".parse(),
            Ok(DeviceSpec::Guid(0x0257_5600_0000_0001))
        );
        assert_eq!(
            "0257560000000001".parse(),
            Ok(DeviceSpec::Guid(0x0257_5600_0000_0001))
        );
        assert_eq!("ab".parse(), Ok(DeviceSpec::Guid(0xab)));
        assert!("".parse::<DeviceSpec>().is_err());
        assert!("mlx4_0".parse::<DeviceSpec>().is_err());
        assert!("0x".parse::<DeviceSpec>().is_err());
        assert!("0x11112222333344445".parse::<DeviceSpec>().is_err());
    }

    #[test]
    fn devices_resolve_with_clear_errors() {
        let g = [0x0257_5600_0000_0001, 0x0257_5600_0000_0002];
        assert_eq!(resolve_device(&g, None), Ok(0));
        assert_eq!(resolve_device(&g, Some(DeviceSpec::Index(1))), Ok(1));
        assert_eq!(resolve_device(&g, Some(DeviceSpec::Guid(g[1]))), Ok(1));
        let e = resolve_device(&g, Some(DeviceSpec::Index(7))).unwrap_err();
        assert!(
            e.contains("no device with index 7") && e.contains("0257:5600:0000:0002"),
            "{e}"
        );
        assert!(resolve_device(&g, Some(DeviceSpec::Guid(3))).is_err());
        assert!(resolve_device(&[], None).is_err());
    }
}
