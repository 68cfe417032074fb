//! What every kernel shares: its name ([`KERNEL`]), the prologue (the operands' addresses and
//! the constants' registers) and the module's text around the kernel's code (header,
//! library, stage, entry, register declarations).

use super::emit::Gen;
use super::tiled::STAGE;
use super::types::{it_of, V};
use std::fmt::Write;
use strided_apply_expr::ir::{Class, Opcode, Program, MAX_CONSTS};

/// The generated kernel's name.
pub(crate) const KERNEL: &str = "sa_t1";

/// The prologue of every kernel: the operands' global addresses (`ptr{k}` parameters) and
/// the registers of the constants `p` reads (from the `kc` parameter, each in its math type).
pub(super) fn prologue(g: &mut Gen, p: &Program, ops: usize) -> (Vec<String>, Vec<Option<V>>) {
    let base: Vec<String> = (0..ops)
        .map(|k| {
            let r = g.rd();
            emit!(g, "ld.param.u64 {r}, [ptr{k}];");
            emit!(g, "cvta.to.global.u64 {r}, {r};");
            r
        })
        .collect();
    let consts = consts(g, p, "kc");
    (base, consts)
}

/// The registers of the constants `p` reads, from the `.b8 [128]` parameter `param` (each
/// in its math type).
pub(super) fn consts(g: &mut Gen, p: &Program, param: &str) -> Vec<Option<V>> {
    let mut consts: Vec<Option<V>> = vec![None; MAX_CONSTS];
    for i in p.code().iter().filter(|i| i.op == Opcode::Const as u8) {
        let c = i.arg as usize % MAX_CONSTS;
        if consts[c].is_some() {
            continue;
        }
        let v = match Class::from_code(i.class) {
            Some(Class::F64) => {
                let r = g.d();
                emit!(g, "ld.param.f64 {r}, [{param}+{}];", 8 * c);
                V::D(r)
            }
            Some(Class::Bool) => {
                let h = g.h();
                emit!(g, "ld.param.u8 {h}, [{param}+{}];", 8 * c);
                g.pred(|g, p| emit!(g, "setp.ne.u16 {p}, {h}, 0;"))
            }
            // An integer's encoding is its bits zero-extended to 64 (a `u8` fits 32).
            Some(class @ (Class::I32 | Class::U32 | Class::U8 | Class::I64 | Class::U64)) => {
                let it = it_of(class);
                let r = g.ireg(&it);
                emit!(g, "ld.param.{} {r}, [{param}+{}];", it.b, 8 * c);
                V::I(class, r)
            }
            _ => {
                let r = g.f();
                emit!(g, "ld.param.f32 {r}, [{param}+{}];", 8 * c);
                V::F(r)
            }
        };
        consts[c] = Some(v);
    }
    consts
}

/// The module's text: the header for `.target sm_{g.sm}`, the library, the static shared
/// stage (`shared` bytes, if any), the kernel [`KERNEL`] with `params` and `g`'s registers
/// and code.
pub(super) fn text(g: &Gen, params: &[String], shared: u32) -> String {
    let lib = &g.lib;
    let sm = g.sm;
    let mut text = format!(".version 7.8\n.target sm_{sm}\n.address_size 64\n\n{lib}\n");
    if shared > 0 {
        let _ = writeln!(text, ".shared .align 8 .b8 {STAGE}[{shared}];\n");
    }
    // A block size the kernel must launch with bounds ptxas's registers (a block of 1024
    // threads needs 64 or fewer a thread).
    let maxntid = g
        .block
        .map_or(String::new(), |(x, y)| format!(".maxntid {x}, {y}, 1\n"));
    let _ = writeln!(
        text,
        ".visible .entry {KERNEL}(\n\t{}\n)\n{maxntid}{{",
        params.join(",\n\t")
    );
    for (kind, count, prefix) in [
        ("f32", g.f, "%f"),
        ("f64", g.d, "%fd"),
        ("pred", g.p, "%p"),
        ("b32", g.r, "%r"),
        ("b64", g.rd, "%rd"),
        ("b16", g.h, "%h"),
    ] {
        if count > 0 {
            let _ = writeln!(text, ".reg .{kind} {prefix}<{}>;", count + 1);
        }
    }
    text.push_str(&g.s);
    text.push_str("}\n");
    text
}
