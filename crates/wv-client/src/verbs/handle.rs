//! One generic handle for every object this library holds in the driver — device, PD, CQ,
//! SRQ, QP, MW, AH, endpoint — as winverbs.dll's interface objects are one reference-counted
//! pattern: an id on the provider's handle, what the library keeps beside it (its parents, the
//! user-mode provider's half), and the DESTROY/CLOSE IOCTL its last release sends.
//!
//! Each kind is one row of a type table (the role of rdma-core's `rxe_type_info[]`): a
//! [`Kind`] says its name and destroy IOCTL, and holds its parts; `Pd<F>`, `Cq<F>`, … are
//! [`Handle`]s of those parts.

use core::fmt;
use std::sync::Arc;

use zerocopy::FromBytes;

use crate::raw::{IoStatus, RawFile};
use crate::verbs::{self, Pending, destroy, ioctl, parse, pending_or_error};

/// A kind of driver object: its row of the type table, and the parts the library keeps with
/// one (parents, which it holds so that their destroy never comes first; the UVP's half).
pub trait Kind {
    /// The type's name (in `Debug` output).
    const NAME: &'static str;
    /// The IOCTL the last release sends with the object's id (DESTROY, DEALLOCATE, CLOSE).
    const DESTROY: u32;
    /// What `Debug` shows beyond the id.
    fn debug_fields(&self, _out: &mut fmt::DebugStruct<'_, '_>) {}
}

/// An object of the driver held through the provider's handle. Cloning shares it; when the
/// last clone goes, its kind's DESTROY IOCTL is sent, and only then are its parts (its
/// parents among them) released, so children always go before parents.
pub struct Handle<F: RawFile, K: Kind> {
    inner: Arc<Held<F, K>>,
}

struct Held<F: RawFile, K: Kind> {
    file: Arc<F>,
    id: u64,
    parts: K,
}

impl<F: RawFile, K: Kind> Drop for Held<F, K> {
    fn drop(&mut self) {
        destroy(&*self.file, K::DESTROY, self.id);
    }
}

impl<F: RawFile, K: Kind> Clone for Handle<F, K> {
    fn clone(&self) -> Self {
        Handle {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<F: RawFile, K: Kind> fmt::Debug for Handle<F, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct(K::NAME);
        out.field("id", &self.inner.id);
        self.inner.parts.debug_fields(&mut out);
        out.finish()
    }
}

impl<F: RawFile, K: Kind> Handle<F, K> {
    /// Takes ownership of object `id` the driver created on `file`.
    pub(crate) fn new(file: Arc<F>, id: u64, parts: K) -> Self {
        Handle {
            inner: Arc::new(Held { file, id, parts }),
        }
    }

    /// Takes ownership of object `id` the driver created on `file` once its parts are made
    /// (the user-mode provider has mapped its rings); when they could not be, the object is
    /// destroyed again and the error returned.
    pub(crate) fn adopt<E>(file: &Arc<F>, id: u64, parts: Result<K, E>) -> Result<Self, E> {
        match parts {
            Ok(parts) => Ok(Handle::new(Arc::clone(file), id, parts)),
            Err(e) => {
                destroy(&**file, K::DESTROY, id);
                Err(e)
            }
        }
    }

    /// The driver's id of the object (per handle: the ids of one file name its objects).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The handle the object lives on.
    pub(crate) fn file(&self) -> &Arc<F> {
        &self.inner.file
    }

    /// What the library keeps with it.
    pub(crate) fn parts(&self) -> &K {
        &self.inner.parts
    }

    /// Its parts, to finish them before anyone else holds the object.
    pub(crate) fn parts_mut(&mut self) -> Option<&mut K> {
        Arc::get_mut(&mut self.inner).map(|held| &mut held.parts)
    }

    /// An IOCTL on the object's handle, waited for.
    pub(crate) fn call(
        &self,
        op: &'static str,
        code: u32,
        input: &[u8],
        output_len: usize,
    ) -> verbs::Result<IoStatus> {
        ioctl(&**self.file(), op, code, input, output_len)
    }

    /// An IOCTL whose output is one `T`.
    pub(crate) fn call_as<T: FromBytes>(
        &self,
        op: &'static str,
        code: u32,
        input: &[u8],
    ) -> verbs::Result<T> {
        let st = self.call(op, code, input, size_of::<T>())?;
        parse(op, &st.output)
    }

    /// An IOCTL whose input is the object's id alone and whose output is nothing (a cancel).
    pub(crate) fn command(&self, op: &'static str, code: u32) -> verbs::Result<()> {
        self.call(op, code, &self.id().to_ne_bytes(), 0).map(|_| ())
    }

    /// An IOCTL whose input is the object's id alone and whose output is one `T` (a query).
    pub(crate) fn query_as<T: FromBytes>(&self, op: &'static str, code: u32) -> verbs::Result<T> {
        self.call_as(op, code, &self.id().to_ne_bytes())
    }
}

impl<F: RawFile + Send + Sync + 'static, K: Kind> Handle<F, K> {
    /// An overlapped IOCTL on the object's handle (a notify, a QP modify): its [`Pending`], or
    /// its error when the driver failed it inline.
    pub(crate) fn issue<T>(
        &self,
        op: &'static str,
        code: u32,
        input: &[u8],
        output_len: usize,
        finish: fn(&'static str, &IoStatus) -> verbs::Result<T>,
    ) -> verbs::Result<Pending<T>> {
        let io = self.file().device_io_control(code, input, output_len);
        pending_or_error(self.file(), io, op, finish)
    }
}
