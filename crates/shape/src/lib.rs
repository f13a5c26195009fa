//! One shaping layer. The lab's bottleneck and `bloatlab tune`'s shaper are
//! the same thing in two places: a device's egress held to a rate with a
//! queue under it. This crate is that thing once:
//! - [`qdisc`]: the commands that install a shaper on a device's egress
//!   (HTB or TBF over a leaf queue, or cake, burst and quantum sized to the
//!   rate), the IFB redirect that brings an ingress to an egress, and the
//!   commands that remove them;
//! - [`exec`]: running them (`ip`, `tc` through crates/host), in a network
//!   namespace when given one;
//! - [`probe`]: what the kernel offers, tried on a scratch veth pair;
//! - [`counters`]: the queues' counters (rtnetlink through crates/host, or
//!   `tc -s -j qdisc show`);
//! - [`tree`]: a device's qdisc tree as `tc -j qdisc show` lists it, whether
//!   it is the kernel's own, and whether it reads as it did before.
//!
//! bloatlab's user-space shaper (crates/emulator) is the other backend: the
//! lab runs it in-process between its namespaces, tune as `bloatlab
//! emulate` with policy routing on a live router.
#![forbid(unsafe_code)]

pub mod counters;
pub mod exec;
pub mod probe;
pub mod qdisc;
pub mod tree;
