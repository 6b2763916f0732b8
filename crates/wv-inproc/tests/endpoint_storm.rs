//! A connect/disconnect storm: endpoints connecting, accepting, rejecting by going away,
//! disconnecting from either side, with random EP_CANCELs, CancelIoEx, endpoint destroys,
//! handle closes, device removals and hot adds in between — seeded, so a failure replays.
//!
//! Whatever happens, every request the storm issued must end (once everything is closed, none
//! may still be pending); before anything is closed, every request that was cancelled (EP_CANCEL
//! of its endpoint or listener, CancelIoEx) or whose endpoint, listener or handle went must
//! have ended already, without waiting for the close; and the host verifier — which records double and missing
//! completions, IRQL and lock rules, and leaks at unload — must stay clean. It runs in the
//! host's deterministic mode (one thread; deferred work and the CM's timers run when the storm
//! says so, the clock jumps to the next timer) and in threaded mode (several actors at once on
//! worker threads, with the real clock).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use wv_client::verbs::*;
use wv_inproc::{File, LowerEdge, Stack, StackConfig};

type F = File;

/// A hang guard for the final waits: everything is closed by then, so each wait is short.
const GUARD: Duration = Duration::from_secs(20);

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A handle with the devices (and a PD on each) opened through it.
struct Handle {
    p: Provider<F>,
    pds: HashMap<u64, Pd<F>>,
}

impl Handle {
    fn open(stack: &Stack) -> Option<Handle> {
        Some(Handle {
            p: Provider::new(stack.open().ok()?),
            pds: HashMap::new(),
        })
    }

    /// An RC QP in INIT on device `guid` (None when the device is gone).
    fn qp(&mut self, guid: u64) -> Option<(Cq<F>, Qp<F>)> {
        if !self.pds.contains_key(&guid) {
            let dev = self.p.open_device(guid).ok()?;
            self.pds.insert(guid, dev.alloc_pd().ok()?);
        }
        let pd = self.pds.get(&guid)?;
        let made = (|| {
            let cq = pd.device().create_cq(4)?;
            let qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq))?;
            qp.modify(&QpAttr::init(1, 0, WV_ACCESS_LOCAL_WRITE))?;
            Ok::<_, VerbsError>((cq, qp))
        })();
        match made {
            Ok(x) => Some(x),
            Err(_) => {
                // Most likely removed: forget the device; a later QP reopens what is there.
                self.pds.remove(&guid);
                None
            }
        }
    }
}

/// One connection attempt, either side.
struct Conn {
    /// Which connection it is, for the requests issued on it.
    key: u64,
    ep: Endpoint<F>,
    qp: Option<(Cq<F>, Qp<F>)>,
    /// The request that moves it on (GET_REQUEST, CONNECT), and what it is for.
    step: Option<usize>,
    server: bool,
    accepted: bool,
}

/// A request the storm issued, with what it belongs to.
struct Issued {
    p: Pending<()>,
    what: &'static str,
    /// The connection it was issued on.
    conn: u64,
    /// A GET_REQUEST: the listener it waits on.
    listener: Option<u64>,
    server: bool,
    /// It was cancelled, or what it belongs to went: it must end without the handles' close.
    due: bool,
}

/// One actor of the storm: a server handle with a listener, a client handle, their
/// connections, and every request it issued.
struct Actor<'s> {
    stack: &'s Stack,
    rng: Rng,
    port: u16,
    removals: bool,
    server: Option<Handle>,
    listener: Option<(u64, Endpoint<F>)>,
    client: Option<Handle>,
    conns: Vec<Conn>,
    /// The next key of a connection or listener.
    next_key: u64,
    /// Every request that pended or may still.
    issued: Vec<Issued>,
    inline_errors: usize,
}

impl<'s> Actor<'s> {
    fn new(stack: &'s Stack, seed: u64, port: u16, removals: bool) -> Self {
        Actor {
            stack,
            rng: Rng(seed | 1),
            port,
            removals,
            server: None,
            listener: None,
            client: None,
            conns: Vec::new(),
            next_key: 0,
            issued: Vec::new(),
            inline_errors: 0,
        }
    }

    fn key(&mut self) -> u64 {
        self.next_key += 1;
        self.next_key
    }

    /// Marks the requests `which` selects as due to have ended (see [`Issued::due`]).
    fn due(&mut self, which: impl Fn(&Issued) -> bool) {
        for i in self.issued.iter_mut().filter(|i| which(i)) {
            i.due = true;
        }
    }

    /// Connection `c` goes (its endpoint is destroyed): its requests end, but a GET_REQUEST
    /// still waiting, whose endpoint the listener holds (the destroy is refused, OFW).
    fn drop_conn(&mut self, c: usize) {
        let key = self.conns[c].key;
        self.due(|i| i.conn == key && (i.listener.is_none() || i.p.is_complete()));
        self.conns.swap_remove(c);
    }

    /// The listener goes: its GET_REQUESTs end.
    fn drop_listener(&mut self) {
        if let Some((key, _)) = self.listener.take() {
            self.due(|i| i.listener == Some(key));
        }
    }

    /// A live device: its index, GUID and address.
    fn live_device(&mut self) -> Option<(usize, u64, IpAddr)> {
        let guids = self.stack.device_guids();
        let guid = *guids.get(self.rng.below(guids.len()))?;
        let index =
            (0..self.stack.device_count()).find(|&i| self.stack.device_guid(i) == Some(guid))?;
        Some((index, guid, self.stack.address(index, 1)))
    }

    fn issue(
        &mut self,
        p: Result<Pending<()>>,
        what: &'static str,
        conn: u64,
        listener: Option<u64>,
        server: bool,
    ) -> Option<usize> {
        match p {
            Ok(p) => {
                self.issued.push(Issued {
                    p,
                    what,
                    conn,
                    listener,
                    server,
                    due: false,
                });
                Some(self.issued.len() - 1)
            }
            Err(_) => {
                self.inline_errors += 1;
                None
            }
        }
    }

    /// Whether request `i` ended well.
    fn succeeded(&self, i: Option<usize>) -> bool {
        i.and_then(|i| self.issued[i].p.wait_timeout(Duration::ZERO))
            .is_some_and(|r| r.is_ok())
    }

    fn step(&mut self) {
        match self.rng.below(16) {
            0 => {
                if self.client.is_none() {
                    self.client = Handle::open(self.stack);
                } else if self.rng.chance(15) {
                    // CloseHandle of the client: its endpoints and QPs go with it.
                    self.conns.retain(|c| c.server);
                    self.client = None;
                    self.due(|i| !i.server);
                }
            }
            1 => {
                if self.server.is_none() {
                    self.server = Handle::open(self.stack);
                } else if self.rng.chance(10) {
                    self.conns.retain(|c| !c.server);
                    self.listener = None;
                    self.server = None;
                    self.due(|i| i.server);
                } else if self.listener.is_none() {
                    let Some(s) = &self.server else { return };
                    let Ok(l) = s.p.create_endpoint() else { return };
                    let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), self.port);
                    if l.bind(any, self.stack).is_ok() && l.listen(4).is_ok() {
                        let key = self.key();
                        self.listener = Some((key, l));
                    }
                }
            }
            2 | 3 => self.connect(),
            4 => self.get_request(),
            5 | 6 => self.accept(),
            7 => self.disconnect(),
            8 => {
                if let Some(c) = self.pick() {
                    let (key, server) = (self.conns[c].key, self.conns[c].server);
                    let ep = self.conns[c].ep.clone();
                    let p = ep.notify_disconnect();
                    self.issue(p, "EP_DISCONNECT_NOTIFY", key, None, server);
                }
            }
            9 => {
                // EP_CANCEL of a connection ends its own requests (not its GET_REQUEST, which
                // waits on the listener's behalf); the listener's ends its GET_REQUESTs.
                if let Some(c) = self.pick() {
                    let key = self.conns[c].key;
                    if self.conns[c].ep.cancel().is_ok() {
                        self.due(|i| i.conn == key && i.listener.is_none());
                    }
                } else if let Some((key, l)) = &self.listener {
                    let key = *key;
                    if l.cancel().is_ok() {
                        self.due(|i| i.listener == Some(key));
                    }
                }
            }
            10 => {
                if !self.issued.is_empty() {
                    let i = self.rng.below(self.issued.len());
                    self.issued[i].p.cancel();
                    self.issued[i].due = true;
                }
            }
            11 => {
                // EP_DESTROY (a queued endpoint refuses it; the drop just forgets it then,
                // and the handle's close ends it).
                if let Some(c) = self.pick() {
                    self.drop_conn(c);
                } else if self.rng.chance(20) {
                    self.drop_listener();
                }
            }
            12 => {
                if self.removals
                    && self.rng.chance(10)
                    && self.stack.device_guids().len() > 2
                    && let Some((index, ..)) = self.live_device()
                {
                    self.stack.remove_device(index);
                    self.stack.add_device();
                }
            }
            _ => {
                // Let the deferred work (and, now and then, the CM's timers) run.
                if self.stack.platform().is_deterministic() {
                    self.stack.run_until_idle();
                    if self.rng.chance(10) {
                        self.stack.platform().run_next_timer();
                    }
                }
            }
        }
    }

    fn pick(&mut self) -> Option<usize> {
        (!self.conns.is_empty()).then(|| self.rng.below(self.conns.len()))
    }

    fn connect(&mut self) {
        let Some((_, guid, local)) = self.live_device() else {
            return;
        };
        let Some((_, _, server)) = self.live_device() else {
            return;
        };
        let Some(h) = self.client.as_mut() else {
            return;
        };
        let Ok(ep) = h.p.create_endpoint() else {
            return;
        };
        let qp = h.qp(guid);
        if ep.bind(SocketAddr::new(local, 0), self.stack).is_err()
            || ep.resolve_route(local, server, self.stack).is_err()
        {
            return;
        }
        let Some((cq, q)) = qp else { return };
        let p = ep.connect(
            &q,
            SocketAddr::new(server, self.port),
            &ConnectParam::default(),
        );
        let key = self.key();
        let step = self.issue(p, "EP_CONNECT", key, None, false);
        self.conns.push(Conn {
            key,
            ep,
            qp: Some((cq, q)),
            step,
            server: false,
            accepted: false,
        });
    }

    fn get_request(&mut self) {
        let (Some(h), Some((lkey, l))) = (&self.server, &self.listener) else {
            return;
        };
        let Ok(ep) = h.p.create_endpoint() else {
            return;
        };
        let p = l.get_request(&ep);
        let lkey = *lkey;
        let key = self.key();
        let step = self.issue(p, "EP_GET_REQUEST", key, Some(lkey), true);
        self.conns.push(Conn {
            key,
            ep,
            qp: None,
            step,
            server: true,
            accepted: false,
        });
    }

    /// ACCEPT on a connection whose GET_REQUEST or CONNECT went through.
    fn accept(&mut self) {
        let Some(c) = self.pick() else { return };
        if self.conns[c].accepted || !self.succeeded(self.conns[c].step) {
            return;
        }
        if self.conns[c].server && self.conns[c].qp.is_none() {
            let Ok(attr) = self.conns[c].ep.query() else {
                return;
            };
            let Some(h) = self.server.as_mut() else {
                return;
            };
            self.conns[c].qp = h.qp(attr.device.device_guid);
        }
        let conn = &mut self.conns[c];
        let Some((_, qp)) = &conn.qp else { return };
        conn.accepted = true;
        let (key, server) = (conn.key, conn.server);
        let p = conn.ep.accept(qp, &ConnectParam::default());
        self.issue(p, "EP_ACCEPT", key, None, server);
    }

    fn disconnect(&mut self) {
        let Some(c) = self.pick() else { return };
        let conn = &self.conns[c];
        let (key, server) = (conn.key, conn.server);
        let qp = conn.qp.as_ref().map(|(_, q)| q);
        let p = conn.ep.disconnect(qp);
        self.issue(p, "EP_DISCONNECT", key, None, server);
    }

    /// Checks that every request due to have ended has, with every handle still open (the
    /// deterministic mode runs the deferred work first, not the CM's timers); returns how
    /// many were due.
    fn check_due(&self) -> std::result::Result<usize, String> {
        let wait = if self.stack.platform().is_deterministic() {
            self.stack.run_until_idle();
            Duration::ZERO
        } else {
            GUARD
        };
        let mut due = 0;
        for i in self.issued.iter().filter(|i| i.due) {
            if i.p.wait_timeout(wait).is_none() {
                return Err(format!(
                    "a {} that was cancelled, or whose endpoint or handle went, was still \
                     pending with the handles open",
                    i.what
                ));
            }
            due += 1;
        }
        Ok(due)
    }

    /// Checks the due requests, closes everything and checks that every request ended;
    /// returns how they ended, by request and status.
    fn finish(mut self) -> std::result::Result<Outcomes, String> {
        let due = self.check_due()?;
        self.conns.clear();
        self.listener = None;
        self.server = None;
        self.client = None;
        let mut outcomes = Outcomes {
            due,
            ..Outcomes::default()
        };
        for Issued { p, what, .. } in self.issued.drain(..) {
            let status = match p.wait_timeout(GUARD) {
                None => return Err(format!("a {what} never ended after every handle closed")),
                Some(Ok(())) => wv_abi::NtStatus::SUCCESS,
                Some(Err(e)) => e.status,
            };
            *outcomes
                .by
                .entry((what, format!("{status:?}")))
                .or_default() += 1;
        }
        Ok(outcomes)
    }
}

/// How the requests ended.
#[derive(Default, Debug)]
struct Outcomes {
    /// (request, status) → count.
    by: std::collections::BTreeMap<(&'static str, String), usize>,
    /// How many had to have ended before the close (and had).
    due: usize,
}

impl Outcomes {
    fn add(&mut self, other: Outcomes) {
        for (k, v) in other.by {
            *self.by.entry(k).or_default() += v;
        }
        self.due += other.due;
    }
    fn count(&self, what: &str, status: &str) -> usize {
        self.by
            .iter()
            .filter(|((w, s), _)| *w == what && s == status)
            .map(|(_, n)| n)
            .sum()
    }
    /// The storm reached what it is for: connections made (and, when `full`, accepted and
    /// disconnected: the threaded storm's timing decides how far its connections get), and
    /// requests ended by a cancel or a closed handle, and by a removed device.
    fn assert_covered(&self, full: bool) {
        let mut want = vec![
            ("EP_CONNECT", "STATUS_SUCCESS"),
            ("EP_GET_REQUEST", "STATUS_SUCCESS"),
            ("EP_CONNECT", "STATUS_CANCELLED"),
        ];
        if full {
            want.extend([
                ("EP_ACCEPT", "STATUS_SUCCESS"),
                ("EP_DISCONNECT", "STATUS_SUCCESS"),
                ("EP_GET_REQUEST", "STATUS_CANCELLED"),
            ]);
        }
        for (what, status) in want {
            assert!(
                self.count(what, status) > 0,
                "no {what} ended with {status}: {self:#?}"
            );
        }
        assert!(self.due > 0, "no request was checked before the close");
        {
            let removed: usize = self
                .by
                .iter()
                .filter(|((_, s), _)| s == "STATUS_DEVICE_REMOVED")
                .map(|(_, n)| n)
                .sum();
            assert!(removed > 0, "no request ended by a removal: {self:#?}");
        }
    }
}

fn config(deterministic: bool, lower: LowerEdge) -> StackConfig {
    StackConfig {
        devices: 4,
        deterministic,
        lower,
        ..StackConfig::default()
    }
}

#[test]
fn a_deterministic_storm_ends_every_request_and_leaves_the_verifier_clean() {
    for (seed, lower) in [
        (0x5EED_0001, LowerEdge::CTable),
        (0x5EED_0002, LowerEdge::Direct),
        (0x5EED_0003, LowerEdge::CTable),
    ] {
        let stack = Stack::new(config(true, lower));
        let mut actor = Actor::new(&stack, seed, 7300, true);
        for _ in 0..3000 {
            actor.step();
        }
        let outcomes = actor
            .finish()
            .unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
        outcomes.assert_covered(true);
        eprintln!(
            "seed {seed:#x}: {} requests ended before the close as they had to",
            outcomes.due
        );
        stack.run_until_idle();
        assert_eq!(stack.unload(), Vec::<String>::new(), "seed {seed:#x}");
    }
}

#[test]
fn a_threaded_storm_ends_every_request_and_leaves_the_verifier_clean() {
    let stack = Stack::new(config(false, LowerEdge::CTable));
    let results: Vec<std::result::Result<Outcomes, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let stack = &stack;
                s.spawn(move || {
                    // Only the first actor removes devices, so removals stay a minority.
                    let mut actor = Actor::new(stack, 0xC0FF_EE00 + t, 7310 + t as u16, t == 0);
                    for _ in 0..1500 {
                        actor.step();
                    }
                    actor.finish()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("actor thread"))
            .collect()
    });
    let mut all = Outcomes::default();
    for r in results {
        all.add(r.unwrap());
    }
    all.assert_covered(false);
    eprintln!(
        "threaded: {} requests ended before the close as they had to",
        all.due
    );
    stack.run_until_idle();
    assert_eq!(stack.unload(), Vec::<String>::new());
}
