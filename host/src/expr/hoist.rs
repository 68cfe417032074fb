//! Broadcast-invariant hoisting: a subexpression whose inputs are all broadcast along some
//! output axes has one value per index of the other axes. It is computed once per distinct
//! index, by a launch over that smaller shape into a temporary of its math type (exact),
//! and the main program reads the temporary as an input. The same instructions on the same
//! values in the same math type: the bits of the unhoisted program.
//!
//! In `sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)` with `a` a row and `b` a column, `cos(a)`
//! is computed once per column and `log(cos(b)+2)` once per row.

use gpu_kernels::elem::ElemType;
use strided_apply_expr::eval::fast_class;
use strided_apply_expr::ir::{elem_code, NOT_FAST};
use strided_apply_expr::{Class, Instr, Opcode, Program, MAX_INPUTS};

/// A subexpression computed on its own: its program (inputs: `inputs`, original indices)
/// and the output axes it does not vary along (bit `d` of `axes`: axis `d`, outermost 0).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Part {
    pub program: Program,
    pub inputs: Vec<usize>,
    pub axes: u64,
    pub elem: ElemType,
}

/// The main program after hoisting: it reads the original inputs `inputs` (indices), then
/// one temporary per part, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Hoisted {
    pub program: Program,
    pub inputs: Vec<usize>,
    pub parts: Vec<Part>,
}

/// Ops worth a launch of their own when their value repeats along an axis.
fn expensive(op: u8) -> bool {
    use Opcode::*;
    Opcode::from_code(op)
        .is_some_and(|o| !o.is_exact() || matches!(o, Sqrt | Rsqrt | Div | Rem | FloorDiv | Fmod))
}

/// The math type of an instruction's result.
fn result_class(i: Instr) -> Class {
    let class = Class::from_code(i.class).unwrap_or(Class::F32);
    match Opcode::from_code(i.op) {
        Some(op) if op.is_comparison() => Class::Bool,
        Some(Opcode::Narrow) => strided_apply_expr::ir::elem_of_code(i.arg)
            .and_then(Class::of)
            .unwrap_or(Class::F32),
        _ => class,
    }
}

/// The hoisted form of `p`, or `None` when nothing is worth hoisting. `invariant[k]`: the
/// output axes along which input `k` does not vary (size 1 or stride 0 after broadcasting
/// to `out_shape`). A subexpression is hoisted when it reads some input, holds an expensive
/// op, does not vary along some axis, its parent does vary along every axis, and its
/// temporary has at most half the output's elements; the whole program likewise (the main
/// program then reads its temporary only). The main program reads at most
/// `max_inputs` inputs (temporaries included): where every such subexpression would take
/// more, the ones hoisted are those that save the most expensive ops ([`hoist_parts`]).
pub(crate) fn hoist(
    p: &Program,
    invariant: &[u64],
    out_shape: &[usize],
    max_inputs: usize,
) -> Option<Hoisted> {
    let h = hoist_parts(p, invariant, out_shape, max_inputs)?;
    // Temporaries that take the program off its fast path (more than its eight inputs) make
    // it slower, not faster (`benches/NOTES.md`, "Expressions: the interpreter on the GPU").
    (p.fast == NOT_FAST || h.program.fast != NOT_FAST).then_some(h)
}

/// The number of expensive ops in instructions `s..=e`: what hoisting them saves per
/// element.
fn saving(code: &[Instr], (s, e): (usize, usize)) -> usize {
    code[s..=e].iter().filter(|i| expensive(i.op)).count()
}

/// Of the hoistable subexpressions `chosen` (disjoint instruction ranges), the ones to
/// hoist so that the main program reads at most `max_inputs` inputs: every one where they
/// fit, else the subset that saves the most expensive ops (fewer temporaries on a tie).
/// Empty when none fits.
fn fitting(
    code: &[Instr],
    chosen: &[(usize, usize, u64)],
    max_inputs: usize,
) -> Vec<(usize, usize, u64)> {
    // Inputs the main program reads with the parts in `mask` hoisted, temporaries included.
    let reads = |mask: u32| -> usize {
        let inside = |pc: usize| {
            chosen
                .iter()
                .enumerate()
                .any(|(j, &(s, e, _))| mask >> j & 1 != 0 && (s..=e).contains(&pc))
        };
        let loads = code
            .iter()
            .enumerate()
            .filter(|&(pc, i)| i.op == Opcode::Load as u8 && !inside(pc))
            .fold(0u8, |m, (_, i)| m | 1 << (i.arg as usize % MAX_INPUTS));
        loads.count_ones() as usize + mask.count_ones() as usize
    };
    // Subsets of at most eight candidates are searched (a program of `MAX_INSTRS`
    // instructions rarely has more); beyond that, all or nothing.
    let n = chosen.len();
    if n > 8 {
        return if reads((1 << n.min(31)) - 1) <= max_inputs {
            chosen.to_vec()
        } else {
            Vec::new()
        };
    }
    let best = (1u32..1 << n)
        .filter(|&mask| reads(mask) <= max_inputs)
        .max_by_key(|&mask| {
            let saved: usize = (0..n)
                .filter(|j| mask >> j & 1 != 0)
                .map(|j| saving(code, (chosen[j].0, chosen[j].1)))
                .sum();
            (
                saved,
                std::cmp::Reverse(mask.count_ones()),
                std::cmp::Reverse(mask),
            )
        });
    best.map_or_else(Vec::new, |mask| {
        (0..n)
            .filter(|j| mask >> j & 1 != 0)
            .map(|j| chosen[j])
            .collect()
    })
}

/// [`hoist`] without the fast-path condition: the transformation itself.
pub(crate) fn hoist_parts(
    p: &Program,
    invariant: &[u64],
    out_shape: &[usize],
    max_inputs: usize,
) -> Option<Hoisted> {
    let all: u64 = if out_shape.len() >= 64 {
        u64::MAX
    } else {
        (1u64 << out_shape.len()) - 1
    };
    let numel: usize = out_shape.iter().product();
    let temp_numel = |axes: u64| -> usize {
        out_shape
            .iter()
            .enumerate()
            .filter(|(d, _)| axes >> d & 1 == 0)
            .map(|(_, &n)| n)
            .product()
    };
    // Per stack entry: (first instruction, inputs read, expensive op inside).
    let mut stack: Vec<(usize, u8, bool)> = Vec::new();
    let mut chosen: Vec<(usize, usize, u64)> = Vec::new();
    let inv_of = |mask: u8| -> u64 {
        (0..MAX_INPUTS)
            .filter(|k| mask >> k & 1 != 0)
            .fold(all, |a, k| a & invariant.get(k).copied().unwrap_or(0))
    };
    for (pc, i) in p.code().iter().enumerate() {
        let arity = Opcode::arity_of(i.op);
        if stack.len() < arity {
            return None;
        }
        let children = stack.split_off(stack.len() - arity);
        let entry = match Opcode::from_code(i.op) {
            Some(Opcode::Load) => (pc, 1u8 << (i.arg as usize % MAX_INPUTS), false),
            Some(Opcode::Const) => (pc, 0, false),
            _ => children.iter().fold(
                (children.first().map_or(pc, |c| c.0), 0u8, expensive(i.op)),
                |(s, m, e), c| (s, m | c.1, e || c.2),
            ),
        };
        if arity > 0 && inv_of(entry.1) == 0 {
            // The parent varies along every axis: each child that does not, is worth it
            // and is more than a load is hoisted (its instructions end before `pc`).
            let mut ends = children
                .iter()
                .skip(1)
                .map(|c| c.0 - 1)
                .chain(std::iter::once(pc - 1));
            for c in &children {
                let end = ends.next().unwrap_or(pc - 1);
                let axes = inv_of(c.1);
                if c.1 != 0 && axes != 0 && c.2 && end > c.0 && 2 * temp_numel(axes) <= numel {
                    chosen.push((c.0, end, axes));
                }
            }
        }
        stack.push(entry);
    }
    // The whole program, where every input it reads is broadcast along some axes (`erf` of
    // a broadcast row): computed once per distinct index, the main program then only copies
    // the temporary out (nothing below the root varies along those axes, so nothing else
    // was chosen).
    let code = p.code();
    if let [root] = stack[..] {
        let axes = inv_of(root.1);
        if root.1 != 0 && axes != 0 && root.2 && code.len() > 1 && 2 * temp_numel(axes) <= numel {
            chosen.push((0, code.len() - 1, axes));
        }
    }
    let chosen = fitting(code, &chosen, max_inputs.min(MAX_INPUTS));
    if chosen.is_empty() {
        return None;
    }
    // The inputs the main program still reads, then the temporaries.
    let inside = |pc: usize| chosen.iter().any(|&(s, e, _)| (s..=e).contains(&pc));
    let mut main_inputs: Vec<usize> = Vec::new();
    for (pc, i) in code.iter().enumerate() {
        if i.op == Opcode::Load as u8 && !inside(pc) && !main_inputs.contains(&(i.arg as usize)) {
            main_inputs.push(i.arg as usize);
        }
    }
    let mut main = *p;
    main.instrs = [Instr::default(); strided_apply_expr::MAX_INSTRS];
    let mut parts = Vec::new();
    let mut n = 0;
    let mut pc = 0;
    while pc < code.len() {
        if let Some(&(s, e, axes)) = chosen.iter().find(|c| c.0 == pc) {
            let class = result_class(code[e]);
            let elem = class.elem();
            let part = extract(p, s, e, class)?;
            main.instrs[n] = Instr {
                op: Opcode::Load as u8,
                class: class as u8,
                depth: code[s].depth,
                arg: (main_inputs.len() + parts.len()) as u8,
            };
            parts.push(Part {
                program: part.0,
                inputs: part.1,
                axes,
                elem,
            });
            pc = e + 1;
        } else {
            let mut i = code[pc];
            if i.op == Opcode::Load as u8 {
                i.arg = main_inputs.iter().position(|&k| k == i.arg as usize)? as u8;
            }
            main.instrs[n] = i;
            pc += 1;
        }
        n += 1;
    }
    main.len = n as u8;
    main.inputs = [0; MAX_INPUTS];
    for (j, &k) in main_inputs.iter().enumerate() {
        main.inputs[j] = p.inputs[k];
    }
    for (j, part) in parts.iter().enumerate() {
        main.inputs[main_inputs.len() + j] = elem_code(part.elem)?;
    }
    main.n_inputs = (main_inputs.len() + parts.len()) as u8;
    main.max_depth = max_depth(&main);
    main.fast = fast_class(&main).map_or(NOT_FAST, |c| c as u8);
    Some(Hoisted {
        program: main,
        inputs: main_inputs,
        parts,
    })
}

/// Instructions `s..=e` of `p` (one subexpression) as a program of their own, whose result
/// is of math type `class` and is stored exactly in that type's element type; with the
/// original indices of the inputs it reads.
fn extract(p: &Program, s: usize, e: usize, class: Class) -> Option<(Program, Vec<usize>)> {
    let code = p.code();
    let base = code[s].depth;
    let mut q = *p;
    q.instrs = [Instr::default(); strided_apply_expr::MAX_INSTRS];
    let mut inputs: Vec<usize> = Vec::new();
    for (n, &i) in code[s..=e].iter().enumerate() {
        let mut i = i;
        i.depth = i.depth.checked_sub(base)?;
        if i.op == Opcode::Load as u8 {
            let k = i.arg as usize;
            let j = match inputs.iter().position(|&x| x == k) {
                Some(j) => j,
                None => {
                    inputs.push(k);
                    inputs.len() - 1
                }
            };
            i.arg = j as u8;
        }
        q.instrs[n] = i;
    }
    q.len = (e - s + 1) as u8;
    q.inputs = [0; MAX_INPUTS];
    for (j, &k) in inputs.iter().enumerate() {
        q.inputs[j] = p.inputs[k];
    }
    q.n_inputs = inputs.len() as u8;
    q.out = elem_code(class.elem())?;
    q.result = class as u8;
    q.max_depth = max_depth(&q);
    q.fast = fast_class(&q).map_or(NOT_FAST, |c| c as u8);
    Some((q, inputs))
}

/// The deepest the stack gets in `p`.
fn max_depth(p: &Program) -> u8 {
    p.code()
        .iter()
        .map(|i| i.depth as usize + 1 - Opcode::arity_of(i.op).min(i.depth as usize))
        .max()
        .unwrap_or(0) as u8
}
