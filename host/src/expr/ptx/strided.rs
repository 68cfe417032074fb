//! The strided shape ([`Shape::Strided`](super::Shape::Strided)): one element per thread
//! and grid-stride step, `rank` collapsed dimensions of any strides, the coordinates by
//! multiply-shift division.

use super::emit::Gen;
use super::frame::Pointwise;
use std::fmt::Write;

/// The shape's parameters after `n`: the divisions by dimensions `0..rank-1`, each of the
/// `ops` operands' strides.
pub(super) fn params(rank: u8, ops: usize) -> Vec<String> {
    let mut params = Vec::new();
    for d in 0..rank.saturating_sub(1) {
        params.extend(["d", "magic", "shift"].map(|s| format!(".param .u32 dim{d}_{s}")));
    }
    for k in 0..ops {
        params.extend((0..rank).map(|d| format!(".param .s32 st{k}_{d}")));
    }
    params
}

/// The shape's body in `pw`'s kernel.
pub(super) fn body(g: &mut Gen, pw: &Pointwise, rank: u8) {
    let (p, ops) = (pw.p, pw.ops);
    let (ntid, nctaid) = (pw.ntid.as_str(), pw.nctaid.as_str());
    let (gid, n) = (pw.gid.as_str(), pw.n.as_str());
    let rank = rank.max(1) as usize;
    let divs: Vec<[String; 3]> = (0..rank - 1)
        .map(|d| g.div_params(&format!("dim{d}")))
        .collect();
    let strides = g.stride_params("st", ops, rank);
    let (step, i, more) = (g.r(), g.r(), g.p());
    emit!(g, "mul.lo.u32 {step}, {ntid}, {nctaid};");
    emit!(g, "mov.u32 {i}, {gid};");
    emit!(g, "LOOP:");
    emit!(g, "setp.ge.u32 {more}, {i}, {n};");
    emit!(g, "@{more} bra DONE;");
    let offs = g.offsets(&i, &divs, &strides);
    let addrs = pw.addresses(g, &offs);
    let ins = pw.inputs_at(g, &addrs, 1, 0);
    let out = pw.run(g, &ins, 1);
    g.store(p, &out, &addrs[0]);
    emit!(g, "add.u32 {i}, {i}, {step};");
    emit!(g, "bra LOOP;");
}
