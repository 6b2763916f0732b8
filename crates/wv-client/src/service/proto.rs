//! The device service's socket protocol: frames on a Unix stream socket, little-endian, each a
//! 16-byte [`Header`] then `len` payload bytes.
//!
//! A connection is one file handle on `\\.\WinVerbs`:
//!
//! 1. The client sends [`Kind::Hello`] ([`Hello`]); the service answers [`Kind::Hello`]
//!    ([`Welcome`]) with the connection's shared memory (a sealed memfd) as `SCM_RIGHTS`, or
//!    [`Kind::Error`] and closes (another user, a protocol version it does not speak).
//! 2. [`Kind::Ioctl`] ([`IoctlHead`] + input bytes) is DeviceIoControl with an OVERLAPPED, the
//!    tag its identity. The service answers [`Kind::Complete`] ([`CompleteHead`] + output
//!    bytes) with [`COMPLETE_INLINE`] when the driver completed it inline, else
//!    [`Kind::Pending`] at once and [`Kind::Complete`] when it ends.
//! 3. [`Kind::Cancel`] ([`CancelBody`]) is CancelIoEx of the request with that tag; the answer
//!    is [`Kind::Cancelled`] ([`CancelledBody`]: whether a cancellable request was found).
//! 4. [`Kind::Admin`] is an action of the machine's owner or a question to the host's address
//!    service ([`Admin`]); the answer is [`Kind::AdminReply`] ([`AdminReply`]).
//!
//! Order: every answer the service sends (an inline completion, a cancel's, an admin action's)
//! comes after the completions of the requests that call ended — on this connection and, for
//! an admin action, on every other — as on Windows, where those requests have their status
//! when the call returns. [`Kind::Sync`] is the client's way to see completions that ended
//! before it asked (what `HasOverlappedIoCompleted` sees at once): its [`Kind::Synced`] comes
//! after them.
//! 5. The client shutting its sending side down (or dying) is CloseHandle: the driver cleans
//!    up, the requests still pending end (their [`Kind::Complete`] frames still come), then the
//!    service closes the connection.
//!
//! A frame the service cannot take (unknown kind, short payload, an IOCTL beyond
//! [`MAX_IOCTL_BYTES`]) gets [`Kind::Error`] with the frame's tag and the connection goes on;
//! a header announcing more than [`MAX_FRAME`] bytes ends the connection after the error,
//! since the stream can no longer be followed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Protocol version [`Hello`] and [`Welcome`] carry.
pub const VERSION: u32 = 1;
/// "WVD1": the first word of a [`Hello`].
pub const HELLO_MAGIC: u32 = 0x3144_5657;
/// Largest payload of a frame.
pub const MAX_FRAME: u32 = 4 << 20;
/// Largest IOCTL input, and largest output buffer an IOCTL may ask for.
pub const MAX_IOCTL_BYTES: u32 = 1 << 20;

wv_hal::wire_enum! {
    /// Frame kinds.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Kind: u16 {
        /// Both directions: the handshake.
        Hello = 1,
        /// Client → service: DeviceIoControl.
        Ioctl = 2,
        /// Client → service: CancelIoEx.
        Cancel = 3,
        /// Client → service: an admin action or address question.
        Admin = 4,
        /// Client → service: answer [`Kind::Synced`] once every completion that ended before
        /// has been sent.
        Sync = 5,
        /// Service → client: the request pended.
        Pending = 0x81,
        /// Service → client: the request ended.
        Complete = 0x82,
        /// Service → client: the answer to [`Kind::Cancel`].
        Cancelled = 0x83,
        /// Service → client: the answer to [`Kind::Admin`].
        AdminReply = 0x84,
        /// Service → client: the answer to [`Kind::Sync`].
        Synced = 0x85,
        /// Service → client: the frame with this tag was refused (a UTF-8 reason follows an
        /// [`ErrorHead`]).
        Error = 0x8f,
    }
    /// The kind of a header's `kind` field.
    fn from_u16;
}

/// Every frame's first 16 bytes.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct Header {
    /// Payload bytes after the header.
    pub len: u32,
    /// A [`Kind`].
    pub kind: u16,
    /// Per kind ([`COMPLETE_INLINE`]).
    pub flags: u16,
    /// The request's identity, chosen by the client; answers carry the tag they answer.
    pub tag: u64,
}

/// Bytes of a [`Header`].
pub const HEADER_BYTES: usize = 16;

/// [`Header::flags`] of a [`Kind::Complete`]: the driver completed the request inline (no
/// [`Kind::Pending`] came before).
pub const COMPLETE_INLINE: u16 = 1;

/// [`Kind::Hello`] from the client.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct Hello {
    /// [`HELLO_MAGIC`].
    pub magic: u32,
    /// [`VERSION`].
    pub version: u32,
}

/// [`Kind::Hello`] from the service; the shared memory comes with it as `SCM_RIGHTS`.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct Welcome {
    /// [`VERSION`].
    pub version: u32,
    /// The service's process id (for diagnostics).
    pub service_pid: u32,
    /// Bytes of the shared memory (map all of it, shared, read-write).
    pub shared_bytes: u64,
    /// Offset of the doorbell page in it.
    pub doorbell: u64,
}

/// [`Kind::Ioctl`]'s fixed part; the input bytes follow.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IoctlHead {
    /// The IOCTL code.
    pub code: u32,
    /// The output buffer's size.
    pub output_len: u32,
}

/// [`Kind::Complete`]'s fixed part; the output bytes follow (`information` of them for a
/// success or warning status, none for an error).
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct CompleteHead {
    /// The NTSTATUS.
    pub status: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// `IoStatus.Information`.
    pub information: u64,
}

/// [`Kind::Cancel`]'s payload.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct CancelBody {
    /// The tag of the request to cancel.
    pub target: u64,
}

/// [`Kind::Cancelled`]'s payload.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct CancelledBody {
    /// 1 when a cancellable request was found.
    pub found: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// [`Kind::Error`]'s fixed part; a UTF-8 reason follows.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct ErrorHead {
    /// An errno value (`EPROTO` for a malformed frame, `EACCES` for a refused user, `E2BIG`
    /// for a frame too large, `EPERM` for an admin action of another user).
    pub errno: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// Words of the doorbell page (32-bit, each on its own cache line).
pub mod doorbell {
    /// Bumped by the client after it set doorbell bits; the futex word the service sleeps on.
    pub const SEQ: usize = 0;
    /// Non-zero while the service's doorbell thread sleeps (or is about to): the client must
    /// wake it after bumping [`SEQ`].
    pub const SLEEPING: usize = 16;
    /// Bytes of the page.
    pub const PAGE: usize = 4096;
}

/// An admin action or address question ([`Kind::Admin`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admin {
    /// The node GUIDs of the devices present.
    DeviceGuids,
    /// How many devices were ever added.
    DeviceCount,
    /// The node GUID of device `index`.
    DeviceGuid(u64),
    /// Brings `port` of device `index` up or down.
    SetPortState {
        /// The device index.
        index: u64,
        /// The port.
        port: u8,
        /// Up or down.
        up: bool,
    },
    /// Surprise removal of device `index`.
    RemoveDevice(u64),
    /// Hot add.
    AddDevice,
    /// The IPv4 address of `port` of device `index`.
    Address {
        /// The device index.
        index: u64,
        /// The port.
        port: u8,
    },
    /// Connection ids alive in device `index`'s connection manager.
    CmIds(u64),
    /// Which device and port own an address (IBAT).
    Locate(IpAddr),
    /// The path between two addresses.
    ResolvePath(IpAddr, IpAddr),
    /// Reserves `port` on an address (0: a free one), for this connection's lifetime or until
    /// released.
    ReservePort(IpAddr, u16),
    /// Releases a reservation.
    ReleasePort(u64),
    /// What the service holds (the stress test's leak check).
    Stats,
    /// Unloads the driver, reports the verifier's findings and ends the service.
    Unload,
}

/// What an [`Admin`] answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminReply {
    /// Done.
    Ok,
    /// A number (a count, an index, a GUID).
    Num(u64),
    /// Absent (no such device, no path).
    None,
    /// GUIDs.
    Guids(Vec<u64>),
    /// An address.
    Ip(IpAddr),
    /// A located address: device GUID, P_Key, port.
    Located {
        /// Node GUID.
        guid: u64,
        /// P_Key.
        pkey: u16,
        /// Port.
        port: u8,
    },
    /// A path record's bytes.
    Path(Vec<u8>),
    /// A reservation: its id and the port it holds.
    Lease {
        /// The reservation's id.
        id: u64,
        /// The port.
        port: u16,
    },
    /// Lines of text (verifier findings).
    Lines(Vec<String>),
    /// Named counters.
    Counts(Vec<(String, u64)>),
    /// A refusal, in words.
    Refused(String),
}

/// A small writer for admin payloads.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn ip(&mut self, ip: IpAddr) -> &mut Self {
        match ip {
            IpAddr::V4(a) => self.u8(4).bytes(&a.octets()),
            IpAddr::V6(a) => self.u8(6).bytes(&a.octets()),
        }
    }
}

/// A reader over admin payloads: every read is bounds-checked.
struct In<'a>(&'a [u8]);

impl In<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2)?.try_into().ok().map(u16::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n).map(<[u8]>::to_vec)
    }
    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?).ok()
    }
    fn ip(&mut self) -> Option<IpAddr> {
        match (self.u8()?, self.bytes()?) {
            (4, b) => <[u8; 4]>::try_from(b)
                .ok()
                .map(|o| IpAddr::V4(Ipv4Addr::from(o))),
            (6, b) => <[u8; 16]>::try_from(b)
                .ok()
                .map(|o| IpAddr::V6(Ipv6Addr::from(o))),
            _ => None,
        }
    }
    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

impl Admin {
    /// The payload bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Out::default();
        match self {
            Admin::DeviceGuids => o.u8(1),
            Admin::DeviceCount => o.u8(2),
            Admin::DeviceGuid(i) => o.u8(3).u64(*i),
            Admin::SetPortState { index, port, up } => {
                o.u8(4).u64(*index).u8(*port).u8(u8::from(*up))
            }
            Admin::RemoveDevice(i) => o.u8(5).u64(*i),
            Admin::AddDevice => o.u8(6),
            Admin::Address { index, port } => o.u8(7).u64(*index).u8(*port),
            Admin::CmIds(i) => o.u8(8).u64(*i),
            Admin::Locate(ip) => o.u8(9).ip(*ip),
            Admin::ResolvePath(a, b) => o.u8(10).ip(*a).ip(*b),
            Admin::ReservePort(ip, port) => o.u8(11).ip(*ip).u16(*port),
            Admin::ReleasePort(id) => o.u8(12).u64(*id),
            Admin::Stats => o.u8(13),
            Admin::Unload => o.u8(14),
        };
        o.0
    }

    /// Parses a payload; `None` for anything malformed (trailing bytes included).
    pub fn decode(bytes: &[u8]) -> Option<Admin> {
        let mut i = In(bytes);
        let a = match i.u8()? {
            1 => Admin::DeviceGuids,
            2 => Admin::DeviceCount,
            3 => Admin::DeviceGuid(i.u64()?),
            4 => Admin::SetPortState {
                index: i.u64()?,
                port: i.u8()?,
                up: match i.u8()? {
                    0 => false,
                    1 => true,
                    _ => return None,
                },
            },
            5 => Admin::RemoveDevice(i.u64()?),
            6 => Admin::AddDevice,
            7 => Admin::Address {
                index: i.u64()?,
                port: i.u8()?,
            },
            8 => Admin::CmIds(i.u64()?),
            9 => Admin::Locate(i.ip()?),
            10 => Admin::ResolvePath(i.ip()?, i.ip()?),
            11 => Admin::ReservePort(i.ip()?, i.u16()?),
            12 => Admin::ReleasePort(i.u64()?),
            13 => Admin::Stats,
            14 => Admin::Unload,
            _ => return None,
        };
        i.done().then_some(a)
    }

    /// Whether only the machine's owner (the service's own user) may ask it: the actions that
    /// change the machine or end it. Address questions and reservations are every client's,
    /// as IBAT and the socket layer are every process's.
    pub fn owner_only(&self) -> bool {
        matches!(
            self,
            Admin::SetPortState { .. } | Admin::RemoveDevice(_) | Admin::AddDevice | Admin::Unload
        )
    }
}

impl AdminReply {
    /// The payload bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Out::default();
        match self {
            AdminReply::Ok => o.u8(1),
            AdminReply::Num(n) => o.u8(2).u64(*n),
            AdminReply::None => o.u8(3),
            AdminReply::Guids(g) => {
                o.u8(4).u64(g.len() as u64);
                for v in g {
                    o.u64(*v);
                }
                &mut o
            }
            AdminReply::Ip(ip) => o.u8(5).ip(*ip),
            AdminReply::Located { guid, pkey, port } => o.u8(6).u64(*guid).u16(*pkey).u8(*port),
            AdminReply::Path(b) => o.u8(7).bytes(b),
            AdminReply::Lease { id, port } => o.u8(8).u64(*id).u16(*port),
            AdminReply::Lines(l) => {
                o.u8(9).u64(l.len() as u64);
                for s in l {
                    o.bytes(s.as_bytes());
                }
                &mut o
            }
            AdminReply::Counts(c) => {
                o.u8(10).u64(c.len() as u64);
                for (k, v) in c {
                    o.bytes(k.as_bytes()).u64(*v);
                }
                &mut o
            }
            AdminReply::Refused(s) => o.u8(11).bytes(s.as_bytes()),
        };
        o.0
    }

    /// Parses a payload; `None` for anything malformed.
    pub fn decode(bytes: &[u8]) -> Option<AdminReply> {
        let mut i = In(bytes);
        // Counts are bounded by the payload: each element takes at least 8 bytes.
        let count = |i: &mut In<'_>| -> Option<usize> {
            let n = usize::try_from(i.u64()?).ok()?;
            (n <= i.0.len() / 8).then_some(n)
        };
        let r = match i.u8()? {
            1 => AdminReply::Ok,
            2 => AdminReply::Num(i.u64()?),
            3 => AdminReply::None,
            4 => {
                let n = count(&mut i)?;
                AdminReply::Guids((0..n).map(|_| i.u64()).collect::<Option<_>>()?)
            }
            5 => AdminReply::Ip(i.ip()?),
            6 => AdminReply::Located {
                guid: i.u64()?,
                pkey: i.u16()?,
                port: i.u8()?,
            },
            7 => AdminReply::Path(i.bytes()?),
            8 => AdminReply::Lease {
                id: i.u64()?,
                port: i.u16()?,
            },
            9 => {
                let n = count(&mut i)?;
                AdminReply::Lines((0..n).map(|_| i.string()).collect::<Option<_>>()?)
            }
            10 => {
                let n = count(&mut i)?;
                AdminReply::Counts(
                    (0..n)
                        .map(|_| Some((i.string()?, i.u64()?)))
                        .collect::<Option<_>>()?,
                )
            }
            11 => AdminReply::Refused(i.string()?),
            _ => return None,
        };
        i.done().then_some(r)
    }
}

/// A whole frame: header and payload.
pub fn frame(kind: Kind, flags: u16, tag: u64, parts: &[&[u8]]) -> Vec<u8> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let header = Header {
        len: len as u32,
        kind: kind as u16,
        flags,
        tag,
    };
    let mut v = Vec::with_capacity(HEADER_BYTES + len);
    v.extend_from_slice(header.as_bytes());
    for p in parts {
        v.extend_from_slice(p);
    }
    v
}

/// An [`Kind::Error`] frame.
pub fn error_frame(tag: u64, errno: i32, reason: &str) -> Vec<u8> {
    let head = ErrorHead {
        errno: errno as u32,
        reserved: 0,
    };
    frame(Kind::Error, 0, tag, &[head.as_bytes(), reason.as_bytes()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert_eq!(size_of::<Header>(), HEADER_BYTES);
        assert_eq!(size_of::<Hello>(), 8);
        assert_eq!(size_of::<Welcome>(), 24);
        assert_eq!(size_of::<IoctlHead>(), 8);
        assert_eq!(size_of::<CompleteHead>(), 16);
    }

    #[test]
    fn admin_round_trips_and_refuses_garbage() {
        let ip4 = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let ip6 = IpAddr::V6(Ipv6Addr::new(0xfd57, 0x5600, 0, 0, 0, 0, 1, 1));
        let all = [
            Admin::DeviceGuids,
            Admin::DeviceCount,
            Admin::DeviceGuid(3),
            Admin::SetPortState {
                index: 1,
                port: 2,
                up: true,
            },
            Admin::RemoveDevice(0),
            Admin::AddDevice,
            Admin::Address { index: 1, port: 1 },
            Admin::CmIds(1),
            Admin::Locate(ip4),
            Admin::ResolvePath(ip4, ip6),
            Admin::ReservePort(ip6, 4791),
            Admin::ReleasePort(9),
            Admin::Stats,
            Admin::Unload,
        ];
        for a in all {
            let b = a.encode();
            assert_eq!(Admin::decode(&b), Some(a.clone()));
            // Every truncation and one extra byte are refused.
            for n in 0..b.len() {
                assert_eq!(Admin::decode(&b[..n]), None, "{a:?} cut at {n}");
            }
            let mut longer = b.clone();
            longer.push(0);
            assert_eq!(Admin::decode(&longer), None);
        }
        let replies = [
            AdminReply::Ok,
            AdminReply::Num(7),
            AdminReply::None,
            AdminReply::Guids(vec![1, 2]),
            AdminReply::Ip(ip6),
            AdminReply::Located {
                guid: 5,
                pkey: 0xffff,
                port: 1,
            },
            AdminReply::Path(vec![1, 2, 3]),
            AdminReply::Lease { id: 4, port: 49152 },
            AdminReply::Lines(vec!["a".into(), String::new()]),
            AdminReply::Counts(vec![("qps".into(), 0)]),
            AdminReply::Refused("no".into()),
        ];
        for r in replies {
            let b = r.encode();
            assert_eq!(AdminReply::decode(&b), Some(r.clone()));
            for n in 0..b.len() {
                assert_eq!(AdminReply::decode(&b[..n]), None, "{r:?} cut at {n}");
            }
        }
        // A count far beyond the payload is refused without allocating for it.
        let mut huge = vec![4u8];
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(AdminReply::decode(&huge), None);
    }
}
