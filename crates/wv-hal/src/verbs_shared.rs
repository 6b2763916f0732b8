//! A shared device is a device: `Arc<V>` implements [`Verbs`] by forwarding, so a device that
//! other code also holds (a device model its tests drive, a host's fake) can be handed to the
//! driver as its lower edge. The driver itself receives its lower device as a `KArc`
//! ([`crate::FilterDriver::device_arrival`]), allocated by whoever calls it.

use alloc::sync::Arc;

use crate::{
    AddressVector, CaAttributes, CaEventSink, CqEventSink, Gid, KArc, MemoryKeys, MemoryRegion,
    PortAttributes, QpAttributes, QpCreate, QpCreated, QpEventSink, QpModify, SrqAttributes,
    SrqEventSink, SrqModifyMask, Umv, Verbs, VerbsError,
};

impl<V: Verbs> Verbs for Arc<V> {
    type Ca = V::Ca;
    type Pd = V::Pd;
    type Mr = V::Mr;
    type Mw = V::Mw;
    type Ah = V::Ah;
    type Cq = V::Cq;
    type Srq = V::Srq;
    type Qp = V::Qp;
    type Mcast = V::Mcast;
    type Cm = Arc<V::Cm>;

    fn guid(&self) -> u64 {
        (**self).guid()
    }
    fn library_name(&self) -> &str {
        (**self).library_name()
    }
    fn open_ca(
        &self,
        umv: &mut Umv<'_>,
        events: KArc<dyn CaEventSink>,
    ) -> Result<V::Ca, VerbsError> {
        (**self).open_ca(umv, events)
    }
    fn close_ca(&self, ca: V::Ca) {
        (**self).close_ca(ca)
    }
    fn query_ca(&self) -> Result<CaAttributes, VerbsError> {
        (**self).query_ca()
    }
    fn query_port(&self, port: u8) -> Result<PortAttributes, VerbsError> {
        (**self).query_port(port)
    }
    fn query_gid(&self, port: u8, index: u32) -> Result<Gid, VerbsError> {
        (**self).query_gid(port, index)
    }
    fn query_pkey(&self, port: u8, index: u16) -> Result<u16, VerbsError> {
        (**self).query_pkey(port, index)
    }
    fn allocate_pd(&self, ca: &V::Ca, umv: &mut Umv<'_>) -> Result<V::Pd, VerbsError> {
        (**self).allocate_pd(ca, umv)
    }
    fn deallocate_pd(&self, pd: V::Pd) {
        (**self).deallocate_pd(pd)
    }
    fn register_mr(
        &self,
        pd: &V::Pd,
        region: &MemoryRegion,
    ) -> Result<(V::Mr, MemoryKeys), VerbsError> {
        (**self).register_mr(pd, region)
    }
    fn deregister_mr(&self, mr: V::Mr) -> Result<(), (V::Mr, VerbsError)> {
        (**self).deregister_mr(mr)
    }
    fn create_mw(&self, pd: &V::Pd, umv: &mut Umv<'_>) -> Result<(V::Mw, u32), VerbsError> {
        (**self).create_mw(pd, umv)
    }
    fn destroy_mw(&self, mw: V::Mw) {
        (**self).destroy_mw(mw)
    }
    fn create_ah(
        &self,
        pd: &V::Pd,
        av: &AddressVector,
        umv: &mut Umv<'_>,
    ) -> Result<V::Ah, VerbsError> {
        (**self).create_ah(pd, av, umv)
    }
    fn destroy_ah(&self, ah: V::Ah) {
        (**self).destroy_ah(ah)
    }
    fn create_cq(
        &self,
        ca: &V::Ca,
        entries: u32,
        events: KArc<dyn CqEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<(V::Cq, u32), VerbsError> {
        (**self).create_cq(ca, entries, events, umv)
    }
    fn resize_cq(&self, cq: &V::Cq, entries: u32, umv: &mut Umv<'_>) -> Result<u32, VerbsError> {
        (**self).resize_cq(cq, entries, umv)
    }
    fn destroy_cq(&self, cq: V::Cq) {
        (**self).destroy_cq(cq)
    }
    fn create_srq(
        &self,
        pd: &V::Pd,
        attr: &SrqAttributes,
        events: KArc<dyn SrqEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<V::Srq, VerbsError> {
        (**self).create_srq(pd, attr, events, umv)
    }
    fn modify_srq(
        &self,
        srq: &V::Srq,
        attr: &SrqAttributes,
        mask: SrqModifyMask,
        umv: &mut Umv<'_>,
    ) -> Result<(), VerbsError> {
        (**self).modify_srq(srq, attr, mask, umv)
    }
    fn query_srq(&self, srq: &V::Srq, umv: &mut Umv<'_>) -> Result<SrqAttributes, VerbsError> {
        (**self).query_srq(srq, umv)
    }
    fn destroy_srq(&self, srq: V::Srq) {
        (**self).destroy_srq(srq)
    }
    fn create_qp(
        &self,
        pd: &V::Pd,
        create: &QpCreate<'_, V::Cq, V::Srq>,
        events: KArc<dyn QpEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<(V::Qp, QpCreated), VerbsError> {
        (**self).create_qp(pd, create, events, umv)
    }
    fn query_qp(&self, qp: &V::Qp) -> Result<QpAttributes, VerbsError> {
        (**self).query_qp(qp)
    }
    fn modify_qp(&self, qp: &V::Qp, modify: &QpModify, out: &mut [u8]) -> Result<(), VerbsError> {
        (**self).modify_qp(qp, modify, out)
    }
    fn destroy_qp(&self, qp: V::Qp) {
        (**self).destroy_qp(qp)
    }
    fn attach_mcast(&self, qp: &V::Qp, gid: &Gid, lid: u16) -> Result<V::Mcast, VerbsError> {
        (**self).attach_mcast(qp, gid, lid)
    }
    fn detach_mcast(&self, mcast: V::Mcast) {
        (**self).detach_mcast(mcast)
    }
}
