//! Run-time dispatch, for frameworks that know their op and element types only at run
//! time: name the op (`"add"`, `"cast"`, `"add_s"`, `"clamp"`, `"axpy"`, …) and the
//! operands' [`ElemType`]s, and the call goes to the instantiated kernels, through the same
//! checks, plan and launch site as the typed API, or to the CPU twin over byte slices.
//!
//! ```
//! # use host as strided_apply; // the examples name the root crate, which re-exports this one
//! use strided_apply::dispatch::{DynOp, HostTensor, HostTensorMut, Scalar};
//! use strided_apply::{ElemType, Layout};
//! // out = a + 2.5 (`add_s`: add a scalar on the right) on the CPU twin, over bytes.
//! let l = Layout::contiguous(&[4])?;
//! let a: Vec<u8> = bytemuck::cast_slice(&[1.0f32, 2.0, 3.0, 4.0]).to_vec();
//! let mut out = vec![0u8; 16];
//! let op = DynOp::new("add_s", &[ElemType::F32, ElemType::F32], &[Scalar::F64(2.5)])?;
//! op.run_cpu(
//!     HostTensorMut::new(&mut out, ElemType::F32, &l),
//!     &[HostTensor::new(&a, ElemType::F32, &l)],
//! )?;
//! assert_eq!(bytemuck::cast_slice::<u8, f32>(&out), [3.5, 4.5, 5.5, 6.5]);
//! # Ok::<(), strided_apply::Error>(())
//! ```
//!
//! On the GPU, the same [`DynOp`] launches over [`RawTensor`]s (`unsafe`: the caller
//! vouches for its memory, as for [`raw::apply3`](crate::raw::apply3)):
//! `unsafe { op.launch(&gpu, stream, out, &[a]) }`.
//!
//! - **What exists** is listed by [`instances`] (every `kernels!` line of every kernel crate
//!   linked in: op id, element types output first, module and family). An op id or a type
//!   combination that is not instantiated is a typed error that lists what is.
//! - **Other type combinations run as programs.** An elementwise op id of the library's
//!   list ([`program_ops`]: `add`, `sub`, …, `sqrt`, `where`, `clamp`, `axpy`, …) over
//!   element types no kernel is instantiated for (`add` of `bf16` and `f64` into `f64`,
//!   `sqrt` of `i32` into `f32`, `lt` of `u8` and `f16`) compiles the op's expression for
//!   those types and runs it on the expression interpreter, on the GPU and in the CPU twin
//!   ([`expr`](crate::expr)): the operands promote as `torch.result_type`
//!   ([`promote_types`](crate::expr::promote_types); scalars are weak, as Python numbers),
//!   and the result rounds once to the output's type. [`DynOp::instance`] is `None` for
//!   such an op; [`output_type`] gives the promoted default output type.
//! - **Op ids** are the first name part of the `kernels!` line (`docs/frameworks.md`,
//!   "Run-time dispatch"). Ops with scalars (`add_s`, `clamp`, `fill`, `axpy`, …) take them as
//!   [`Scalar`]s, converted to the op's element type (floats round, integers must be exact).
//! - **Cost**: [`DynOp::new`] finds the family (two FxHash lookups, skipped when this thread
//!   found the same op last) and builds the op value; keep the `DynOp` to launch it again.
//!   Neither allocates.

use crate::error::{Error, Result};
use crate::expr::Compiled;
use crate::gpu::Gpu;
use crate::layout::Layout;
use crate::operand::{HostOperands, RawTensor, OPERANDS};
pub use crate::operand::{HostTensor, HostTensorMut};
use crate::programs::{self, launch_raw};
use crate::twin::run_layouts;
use cudarc::driver::sys::CUstream;
pub use gpu_kernels::dispatch::{FromScalar, FromScalars, Instance, Scalar};
use gpu_kernels::dispatch::{OpValue, INSTANCES};
use gpu_kernels::elem::ElemType;
use rustc_hash::FxHashMap as HashMap;
use std::cell::Cell;
use std::sync::OnceLock;

/// Every instantiated family of every kernel crate linked into the program.
pub fn instances() -> impl Iterator<Item = &'static Instance> {
    INSTANCES.iter()
}

/// Element types as a hash key: count, then each type's discriminant.
type TypesKey = [u8; 5];

fn types_key(types: &[ElemType]) -> Option<TypesKey> {
    let mut key = [0u8; 5];
    if types.is_empty() || types.len() > 4 {
        return None;
    }
    key[0] = types.len() as u8;
    for (k, t) in key[1..].iter_mut().zip(types) {
        *k = *t as u8 + 1;
    }
    Some(key)
}

/// The instances of one op id, by element types; `Err` lists the modules of a combination
/// that two kernel crates both instantiate.
type ByTypes = HashMap<TypesKey, std::result::Result<&'static Instance, Vec<&'static str>>>;

fn index() -> &'static HashMap<&'static str, ByTypes> {
    static INDEX: OnceLock<HashMap<&'static str, ByTypes>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut index: HashMap<&'static str, ByTypes> = HashMap::default();
        for inst in INSTANCES.iter() {
            let Some(key) = types_key(inst.types) else {
                continue;
            };
            index
                .entry(inst.op())
                .or_default()
                .entry(key)
                .and_modify(|e| {
                    let mut modules = match e {
                        Ok(first) => vec![first.names.module],
                        Err(m) => std::mem::take(m),
                    };
                    modules.push(inst.names.module);
                    *e = Err(modules);
                })
                .or_insert(Ok(inst));
        }
        index
    })
}

fn type_list(types: &[ElemType]) -> String {
    let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
    format!("({})", names.join(", "))
}

thread_local! {
    /// This thread's last successful [`find`]: a framework that calls the same op again and
    /// again (the usual case) skips both hash lookups.
    static LAST_FOUND: Cell<Option<(TypesKey, &'static Instance)>> = const { Cell::new(None) };
}

/// The instance of op `op` over `types` (output first, one per operand).
pub fn find(op: &str, types: &[ElemType]) -> Result<&'static Instance> {
    let key = types_key(types);
    if let (Some(key), Some((last_key, inst))) = (key, LAST_FOUND.with(Cell::get)) {
        if key == last_key && inst.op() == op {
            return Ok(inst);
        }
    }
    let found = find_indexed(op, key, types);
    if let (Some(key), Ok(inst)) = (key, &found) {
        LAST_FOUND.with(|last| last.set(Some((key, *inst))));
    }
    found
}

/// [`find`] without its error: the instance where exactly one family takes `types`.
fn lookup(op: &str, types: &[ElemType]) -> Option<&'static Instance> {
    let key = types_key(types)?;
    if let Some((last_key, inst)) = LAST_FOUND.with(Cell::get) {
        if key == last_key && inst.op() == op {
            return Some(inst);
        }
    }
    let inst = *index().get(op)?.get(&key)?.as_ref().ok()?;
    LAST_FOUND.with(|last| last.set(Some((key, inst))));
    Some(inst)
}

fn find_indexed(op: &str, key: Option<TypesKey>, types: &[ElemType]) -> Result<&'static Instance> {
    let index = index();
    let Some(by_types) = index.get(op) else {
        let mut known: Vec<&str> = index.keys().copied().collect();
        known.sort_unstable();
        return Err(Error::UnknownOp {
            op: op.to_string(),
            known: known.join(", "),
        });
    };
    match key.and_then(|k| by_types.get(&k)) {
        Some(Ok(inst)) => Ok(inst),
        Some(Err(modules)) => Err(Error::AmbiguousOp {
            op: op.to_string(),
            types: type_list(types),
            modules: modules.join(", "),
        }),
        None => {
            let mut available: Vec<String> = by_types
                .values()
                .filter_map(|e| e.as_ref().ok())
                .map(|i| type_list(i.types))
                .collect();
            available.sort_unstable();
            Err(Error::NotInstantiated {
                op: op.to_string(),
                types: format!("{} (output first)", type_list(types)),
                available: available.join(", "),
            })
        }
    }
}

/// The op ids that run as expression programs over element types no kernel is
/// instantiated for (the module docs' "Other type combinations run as programs").
pub fn program_ops() -> impl Iterator<Item = &'static str> {
    programs::OPS.iter().map(|p| p.op)
}

/// An op id's inputs and scalar names where it has a program ([`program_ops`]): for the op
/// ids that run only as programs (`erf`, `gelu`, `bitwise_and`, …), what a caller passes.
pub fn program_signature(op: &str) -> Option<(usize, &'static [&'static str])> {
    programs::find(op).map(|p| (p.inputs, p.scalar_names))
}

/// The output type of op `op` over `inputs` (with `scalars`) when none is asked for: for an
/// op with an expression ([`program_ops`]) its type, as `torch.result_type` gives it (the
/// promoted type, scalars weak; `bool` for a comparison; the default float, `f32`, for a
/// float op of integers); for another op, the one output type of the families that take
/// these inputs.
pub fn output_type(op: &str, inputs: &[ElemType], scalars: &[Scalar]) -> Result<ElemType> {
    if let Some(p) = programs::find(op) {
        if p.op == "cast" {
            // A cast has no output type of its own: any type is one.
            return Err(Error::OutputTypeAmbiguous {
                op: op.to_string(),
                inputs: type_list(inputs),
                outputs: type_list(&crate::expr::ELEMS),
            });
        }
        return Ok(ProgramOp::compile(p, inputs, None, scalars)?.compiled.out());
    }
    let mut outs: Vec<ElemType> = INSTANCES
        .iter()
        .filter(|i| i.op() == op && &i.types[1..] == inputs)
        .map(|i| i.types[0])
        .collect();
    outs.sort_unstable_by_key(|&t| t as u8);
    outs.dedup();
    match outs[..] {
        [one] => Ok(one),
        [] => Err(match find_indexed(op, None, inputs) {
            Err(Error::NotInstantiated { op, available, .. }) => Error::NotInstantiated {
                op,
                types: format!("inputs {}", type_list(inputs)),
                available,
            },
            Err(e) => e,
            Ok(i) => return Ok(i.types[0]),
        }),
        _ => Err(Error::OutputTypeAmbiguous {
            op: op.to_string(),
            inputs: type_list(inputs),
            outputs: type_list(&outs),
        }),
    }
}

/// An op chosen at run time: its instantiated family and its op value, found and built once,
/// or the op's expression program compiled for its types.
#[derive(Clone, Debug)]
pub struct DynOp {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Kernel {
        instance: &'static Instance,
        value: OpValue,
    },
    Program(Box<ProgramOp>),
}

/// An op id's expression compiled for one type combination, its scalars bound.
#[derive(Clone, Debug)]
struct ProgramOp {
    /// The op's entry in the program list.
    entry: &'static programs::OpProgram,
    compiled: std::sync::Arc<Compiled>,
    /// Its scalars' values by name.
    scalars: Vec<(&'static str, Scalar)>,
}

impl ProgramOp {
    /// `p` compiled for `inputs` (the output `out`, or the expression's own type) and bound
    /// to `scalars`.
    fn compile(
        p: &'static programs::OpProgram,
        inputs: &[ElemType],
        out: Option<ElemType>,
        scalars: &[Scalar],
    ) -> Result<ProgramOp> {
        if inputs.len() != p.inputs {
            return Err(Error::InputCount {
                op: p.op,
                expected: p.inputs,
                got: inputs.len(),
            });
        }
        let compiled = programs::compiled(p, inputs, out, scalars)?;
        let named = programs::named(scalars);
        // Scalars that do not convert (an integer out of its type's range) fail here, once.
        compiled.bind(&named)?;
        Ok(ProgramOp {
            entry: p,
            compiled,
            scalars: named,
        })
    }

    /// The op's inputs (operands `a`, `b`, `c`) in the program's order (first appearance
    /// in its expression).
    fn ordered<T: Copy>(&self, inputs: &[T]) -> Vec<T> {
        let operand = |n: &String| programs::INPUTS.iter().position(|m| m == n).unwrap_or(0);
        self.compiled
            .inputs()
            .iter()
            .map(|n| inputs[operand(n)])
            .collect()
    }
}

impl DynOp {
    /// Op `op` over element types `types` (output first, one per operand), with its
    /// scalars (none for most ops). Where no kernel is instantiated for `types` and the op
    /// has an expression ([`program_ops`]), its program compiled for them.
    pub fn new(op: &str, types: &[ElemType], scalars: &[Scalar]) -> Result<DynOp> {
        let instance = match lookup(op, types) {
            Some(instance) => instance,
            None => {
                // No family for these types (nor two): the op's program where it has one,
                // without building `find`'s error, which lists the families.
                let listed = || {
                    let key = types_key(types);
                    key.is_some_and(|k| index().get(op).is_some_and(|b| b.contains_key(&k)))
                };
                if !types.is_empty() && programs::find(op).is_some() && !listed() {
                    return DynOp::new_program(op, types, scalars);
                }
                find(op, types)?
            }
        };
        let Some(builder) = (instance.builder)() else {
            return Err(Error::OpNotBuildable {
                op: instance.op(),
                family: instance.family(),
            });
        };
        let value = (builder.build)(scalars).ok_or_else(|| Error::BadScalars {
            op: instance.op(),
            types: type_list(instance.types),
            expected: format!("[{}]", builder.scalars.join(", ")),
            got: format!("{scalars:?}"),
        })?;
        Ok(DynOp {
            kind: Kind::Kernel { instance, value },
        })
    }

    /// Op `op`'s expression program compiled for `types` (output first), even where a
    /// kernel is instantiated for them: to compare the two, or to run the op without its
    /// kernels. An error for an op id with no program ([`program_ops`]).
    pub fn new_program(op: &str, types: &[ElemType], scalars: &[Scalar]) -> Result<DynOp> {
        let Some(p) = programs::find(op) else {
            return Err(Error::UnknownOp {
                op: op.to_string(),
                known: programs::OPS
                    .iter()
                    .map(|p| p.op)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let Some((&out, inputs)) = types.split_first() else {
            return Err(Error::InputCount {
                op: p.op,
                expected: p.inputs,
                got: 0,
            });
        };
        let program = ProgramOp::compile(p, inputs, Some(out), scalars)?;
        Ok(DynOp {
            kind: Kind::Program(Box::new(program)),
        })
    }

    /// The family this op launches; `None` for an op that runs as a program.
    pub fn instance(&self) -> Option<&'static Instance> {
        match &self.kind {
            Kind::Kernel { instance, .. } => Some(instance),
            Kind::Program(_) => None,
        }
    }

    /// The compiled expression of an op that runs as a program ([`program_ops`]).
    pub fn program(&self) -> Option<&Compiled> {
        match &self.kind {
            Kind::Kernel { .. } => None,
            Kind::Program(p) => Some(&p.compiled),
        }
    }

    /// The kernel family's element types, output first (empty for a program: only
    /// kernels reach the loops that read them).
    fn types(&self) -> &'static [ElemType] {
        match &self.kind {
            Kind::Kernel { instance, .. } => instance.types,
            Kind::Program(_) => &[],
        }
    }

    fn check_count(&self, inputs: usize) -> Result<()> {
        let (op, expected) = match &self.kind {
            Kind::Kernel { instance, .. } => (instance.op(), instance.inputs()),
            Kind::Program(p) => (p.entry.op, p.entry.inputs),
        };
        if inputs != expected {
            return Err(Error::InputCount {
                op,
                expected,
                got: inputs,
            });
        }
        Ok(())
    }

    /// Launches the op on `stream` (the `gpu`'s own when `None`): `out = op(inputs…)`, the
    /// inputs broadcast to `out`'s shape, with the checks and plan of
    /// [`raw::apply3`](crate::raw::apply3) and friends.
    ///
    /// # Safety
    /// As for [`raw::apply3`](crate::raw::apply3): every tensor's memory is one live
    /// allocation of this `gpu`'s context holding values of its element type, kept until
    /// the work queued on `stream` completes; `stream` is a live stream of that context.
    pub unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
    ) -> Result<()> {
        self.check_count(inputs.len())?;
        if let Kind::Program(p) = &self.kind {
            // SAFETY: forwarded contract.
            return unsafe {
                p.compiled
                    .launch(gpu, stream, out, &p.ordered(inputs), &p.scalars)
            };
        }
        let stream = stream.unwrap_or_else(|| gpu.stream().cu_stream());
        // SAFETY: forwarded contract.
        unsafe {
            match *inputs {
                [] => self.launch_n(gpu, stream, [out]),
                [a] => self.launch_n(gpu, stream, [out, a]),
                [a, b] => self.launch_n(gpu, stream, [out, a, b]),
                [a, b, c] => self.launch_n(gpu, stream, [out, a, b, c]),
                _ => unreachable!("instances have at most 3 inputs (check_count)"),
            }
        }
    }

    /// # Safety
    /// As [`launch`](Self::launch).
    unsafe fn launch_n<const N: usize>(
        &self,
        gpu: &Gpu,
        stream: CUstream,
        t: [RawTensor<'_>; N],
    ) -> Result<()> {
        let Kind::Kernel { instance, value } = &self.kind else {
            unreachable!("programs launch in `launch`")
        };
        let (names, types) = (&instance.names, instance.types);
        // An op that runs as a program reads the scalars of the op value (a kernel takes
        // the value itself).
        let mut scalars = gpu_kernels::dispatch::ScalarList::EMPTY;
        if names.program.is_some() {
            if let Some(b) = (instance.builder)() {
                // SAFETY: the op value was built by this instance's builder (`DynOp::new`).
                scalars = unsafe { (b.scalars_of)(value) };
            }
        }
        // SAFETY: the caller vouches for the memory; the op value was built by this
        // instance's builder, so it is the `OpArg` its kernels take.
        unsafe {
            launch_raw(
                gpu,
                stream,
                names,
                value.as_ptr().cast(),
                scalars.as_slice(),
                types,
                t,
            )
        }
    }

    /// The CPU twin over raw host pointers, for callers that hold addresses rather than
    /// slices (a Python module, a framework's host tensors): the checks, plan and aliasing
    /// rules of [`launch`](Self::launch), so an input may be the output element-wise in
    /// place (`a = a + b`); such an input is read from a copy taken before the run.
    ///
    /// # Safety
    /// Every tensor's `ptr` is a host address; every element its shape and strides reach
    /// from there is in one live allocation holding values of its element type, and nothing
    /// else accesses the output's elements during the call.
    pub unsafe fn run_cpu_raw(&self, out: RawTensor<'_>, inputs: &[RawTensor<'_>]) -> Result<()> {
        self.check_count(inputs.len())?;
        if let Kind::Program(p) = &self.kind {
            // SAFETY: forwarded contract.
            return unsafe { p.compiled.run_cpu_raw(out, &p.ordered(inputs), &p.scalars) };
        }
        // SAFETY: forwarded contract.
        unsafe {
            match *inputs {
                [] => self.run_raw_n([out]),
                [a] => self.run_raw_n([out, a]),
                [a, b] => self.run_raw_n([out, a, b]),
                [a, b, c] => self.run_raw_n([out, a, b, c]),
                _ => unreachable!("instances have at most 3 inputs (check_count)"),
            }
        }
    }

    /// # Safety
    /// As [`run_cpu_raw`](Self::run_cpu_raw).
    unsafe fn run_raw_n<const N: usize>(&self, t: [RawTensor<'_>; N]) -> Result<()> {
        // SAFETY: forwarded contract.
        let names = std::array::from_fn(|k| OPERANDS[k]);
        let host = unsafe { HostOperands::new(self.types(), &t, names)? };
        let layouts: [&Layout; N] = std::array::from_fn(|k| &host.layouts[k]);
        // SAFETY: the caller's contract for every address; inputs that shared bytes with the
        // output now point into private copies with the same relative layout.
        unsafe { self.run_rows(layouts, host.data) }
    }

    /// The CPU twin of [`launch`](Self::launch) over host byte slices: the same plan and
    /// the same op code.
    pub fn run_cpu(&self, out: HostTensorMut<'_>, inputs: &[HostTensor<'_>]) -> Result<()> {
        self.check_count(inputs.len())?;
        if let Kind::Program(p) = &self.kind {
            return p.compiled.run_cpu(out, &p.ordered(inputs), &p.scalars);
        }
        match inputs.len() {
            0 => self.run_n::<1>(out, inputs),
            1 => self.run_n::<2>(out, inputs),
            2 => self.run_n::<3>(out, inputs),
            3 => self.run_n::<4>(out, inputs),
            _ => unreachable!("instances have at most 3 inputs (check_count)"),
        }
    }

    /// [`run_cpu`](Self::run_cpu) with `N - 1 == inputs.len()` (checked by the caller).
    fn run_n<const N: usize>(
        &self,
        out: HostTensorMut<'_>,
        inputs: &[HostTensor<'_>],
    ) -> Result<()> {
        let types = self.types();
        out.as_ref().check(OPERANDS[0], types[0])?;
        for (k, t) in inputs.iter().enumerate() {
            t.check(OPERANDS[k + 1], types[k + 1])?;
        }
        let layouts: [&Layout; N] = std::array::from_fn(|k| {
            if k == 0 {
                out.layout
            } else {
                inputs[k - 1].layout
            }
        });
        let data: [*mut u8; N] = std::array::from_fn(|k| {
            if k == 0 {
                out.data.as_ptr().cast_mut()
            } else {
                inputs[k - 1].data.as_ptr().cast_mut()
            }
        });
        // SAFETY: `check` proved every offset of each layout inside its slice and the slices
        // aligned for their element types; the output (a unique borrow) cannot overlap the
        // inputs (shared borrows), which are only read.
        unsafe { self.run_rows(layouts, data) }
    }

    /// The CPU twin's loops of this op over `layouts` from `data` (output first).
    ///
    /// # Safety
    /// As [`run_layouts`]; the element types are this instance's (`value` was built for
    /// this instance, whose row function matches them).
    unsafe fn run_rows<const N: usize>(
        &self,
        layouts: [&Layout; N],
        data: [*mut u8; N],
    ) -> Result<()> {
        let Kind::Kernel { instance, value } = &self.kind else {
            unreachable!("programs run in `run_cpu` and `run_cpu_raw`")
        };
        let types = instance.types;
        let sizes: [usize; N] = std::array::from_fn(|k| types[k].size());
        let (row, value) = (instance.row, *value);
        // SAFETY: forwarded contract.
        unsafe {
            run_layouts(
                std::array::from_fn(|k| OPERANDS[k]),
                layouts,
                data,
                sizes,
                &|ptrs, steps, len| {
                    let mut p = [std::ptr::null_mut(); 4];
                    let mut s = [0isize; 4];
                    p[..N].copy_from_slice(&ptrs);
                    s[..N].copy_from_slice(&steps);
                    row(&value, len, p, s)
                },
            )
        }
    }
}

/// `out = op(inputs…)` on the GPU, the op named at run time: [`DynOp::new`] with the
/// tensors' element types, then [`DynOp::launch`].
///
/// # Safety
/// As [`DynOp::launch`].
pub unsafe fn apply(
    gpu: &Gpu,
    stream: Option<CUstream>,
    op: &str,
    scalars: &[Scalar],
    out: RawTensor<'_>,
    inputs: &[RawTensor<'_>],
) -> Result<()> {
    let op = DynOp::new(
        op,
        &elem_types(out.elem, inputs.iter().map(|t| t.elem))?,
        scalars,
    )?;
    // SAFETY: forwarded contract.
    unsafe { op.launch(gpu, stream, out, inputs) }
}

/// The CPU twin of [`apply`]: [`DynOp::new`] with the slices' element types, then
/// [`DynOp::run_cpu`].
pub fn apply_cpu(
    op: &str,
    scalars: &[Scalar],
    out: HostTensorMut<'_>,
    inputs: &[HostTensor<'_>],
) -> Result<()> {
    let op = DynOp::new(
        op,
        &elem_types(out.elem, inputs.iter().map(|t| t.elem))?,
        scalars,
    )?;
    op.run_cpu(out, inputs)
}

/// The element types of an output and its inputs, on the stack.
fn elem_types(out: ElemType, inputs: impl ExactSizeIterator<Item = ElemType>) -> Result<TypesBuf> {
    let n = inputs.len();
    if n > 3 {
        return Err(Error::InputCount {
            op: "(any)",
            expected: 3,
            got: n,
        });
    }
    let mut buf = TypesBuf {
        types: [out; 4],
        len: n + 1,
    };
    for (slot, t) in buf.types[1..].iter_mut().zip(inputs) {
        *slot = t;
    }
    Ok(buf)
}

struct TypesBuf {
    types: [ElemType; 4],
    len: usize,
}

impl std::ops::Deref for TypesBuf {
    type Target = [ElemType];
    fn deref(&self) -> &[ElemType] {
        &self.types[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_kernels::ops::{Add, Clamp};
    use ElemType::*;

    fn bytes<T: bytemuck::Pod>(v: &[T]) -> Vec<u8> {
        bytemuck::cast_slice(v).to_vec()
    }

    #[test]
    fn run_time_ops_match_the_typed_twin_on_strided_layouts() {
        let a: Vec<f32> = (0..12).map(|x| x as f32 * 0.5 - 2.0).collect();
        let la = Layout::contiguous(&[3, 4])
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        let b: Vec<f32> = vec![10.0, 20.0, 30.0];
        let lb = Layout::contiguous(&[3]).unwrap();
        let lo = Layout::contiguous(&[4, 3]).unwrap();

        let mut want = vec![0.0f32; 12];
        crate::cpu::apply3(Add, (&mut want, &lo), (&a, &la), (&b, &lb)).unwrap();
        let mut got = vec![0u8; 48];
        let (ab, bb) = (bytes(&a), bytes(&b));
        apply_cpu(
            "add",
            &[],
            HostTensorMut::new(&mut got, F32, &lo),
            &[
                HostTensor::new(&ab, F32, &la),
                HostTensor::new(&bb, F32, &lb),
            ],
        )
        .unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&got), want);

        let mut want = vec![0.0f32; 12];
        crate::cpu::apply2(
            Clamp {
                lo: -1.0f32,
                hi: 1.0,
            },
            (&mut want, &lo),
            (&a, &la),
        )
        .unwrap();
        let clamp = DynOp::new("clamp", &[F32, F32], &[Scalar::I64(-1), Scalar::F64(1.0)]).unwrap();
        clamp
            .run_cpu(
                HostTensorMut::new(&mut got, F32, &lo),
                &[HostTensor::new(&ab, F32, &la)],
            )
            .unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&got), want);
    }

    #[test]
    fn mixed_types_casts_and_in_place_ops_dispatch() {
        let a = [crate::bf16::from_f32(1.5), crate::bf16::from_f32(-2.0)];
        let b = [0.25f32, 4.0];
        let l = Layout::contiguous(&[2]).unwrap();
        let mut out = vec![0u8; 8];
        let (ab, bb) = (bytes(&a), bytes(&b));
        apply_cpu(
            "mul",
            &[],
            HostTensorMut::new(&mut out, F32, &l),
            &[
                HostTensor::new(&ab, BF16, &l),
                HostTensor::new(&bb, F32, &l),
            ],
        )
        .unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&out), [0.375, -8.0]);
        let mut o8 = vec![0u8; 2];
        apply_cpu(
            "cast",
            &[],
            HostTensorMut::new(&mut o8, U8, &l),
            &[HostTensor::new(&bb, F32, &l)],
        )
        .unwrap();
        assert_eq!(o8, [0, 4]);
        // apply1 in place with a scalar: x *= 3.
        let mut x = bytes(&[2i32, -5]);
        apply_cpu(
            "mul_assign_s",
            &[Scalar::I64(3)],
            HostTensorMut::new(&mut x, I32, &l),
            &[],
        )
        .unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, i32>(&x), [6, -15]);
    }

    #[test]
    fn bad_run_time_requests_are_typed_errors() {
        let err = |r: Result<DynOp>| r.expect_err("must fail").to_string();
        let e = err(DynOp::new("plus", &[F32, F32, F32], &[]));
        assert!(e.contains("`plus`") && e.contains("add"), "{e}");
        // An in-place op has no program: other types stay an error that lists what exists.
        let e = err(DynOp::new("add_assign", &[F32, I32], &[]));
        assert!(
            e.contains("(f32, i32)") && e.contains("(f32, f32)") && e.contains("not instantiated"),
            "{e}"
        );
        // `add` of other types runs as a program, which checks the input count.
        let e = err(DynOp::new("add", &[F32, F32], &[]));
        assert!(e.contains("`add`") && e.contains("2 input"), "{e}");
        let e = err(DynOp::new("add_s", &[U8, U8], &[Scalar::I64(300)]));
        assert!(e.contains("[scalar]") && e.contains("300"), "{e}");
        let e = err(DynOp::new("clamp", &[F32, F32], &[Scalar::F64(0.0)]));
        assert!(e.contains("[lo, hi]"), "{e}");
        let e = err(DynOp::new("add", &[], &[]));
        assert!(e.contains("()"), "{e}");

        let l = Layout::contiguous(&[2]).unwrap();
        let add = DynOp::new("add", &[F32, F32, F32], &[]).unwrap();
        let (a, mut o) = (vec![0u8; 8], vec![0u8; 8]);
        let e = add
            .run_cpu(
                HostTensorMut::new(&mut o, F32, &l),
                &[HostTensor::new(&a, F32, &l)],
            )
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::InputCount {
                    expected: 2,
                    got: 1,
                    ..
                }
            ),
            "{e}"
        );
        let e = add
            .run_cpu(
                HostTensorMut::new(&mut o, F32, &l),
                &[HostTensor::new(&a, F32, &l), HostTensor::new(&a, I32, &l)],
            )
            .unwrap_err();
        assert!(matches!(e, Error::TypeMismatch { operand: "b", .. }), "{e}");
        let short = Layout::contiguous(&[3]).unwrap();
        let e = add
            .run_cpu(
                HostTensorMut::new(&mut o, F32, &l),
                &[
                    HostTensor::new(&a, F32, &short),
                    HostTensor::new(&a, F32, &l),
                ],
            )
            .unwrap_err();
        assert!(matches!(e, Error::OutOfBounds { operand: "a", .. }), "{e}");
        // A heap buffer (aligned by the allocator), so that one byte in is misaligned.
        #[allow(clippy::useless_vec)]
        let odd = vec![0u8; 9];
        let e = add
            .run_cpu(
                HostTensorMut::new(&mut o, F32, &l),
                &[
                    HostTensor::new(&odd[1..], F32, &l),
                    HostTensor::new(&a, F32, &l),
                ],
            )
            .unwrap_err();
        assert!(matches!(e, Error::Misaligned { operand: "a", .. }), "{e}");
        // Empty tensors: an empty Vec's dangling pointer is fine (found on the GPU run).
        let none = Layout::contiguous(&[0]).unwrap();
        let (mut e0, e1): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
        add.run_cpu(
            HostTensorMut::new(&mut e0, F32, &none),
            &[
                HostTensor::new(&e1, F32, &none),
                HostTensor::new(&e1, F32, &none),
            ],
        )
        .unwrap();
    }

    /// `op` over `types` (output first) on the CPU twin, contiguous inputs of `len`
    /// elements from `data` (bytes per input).
    fn run_twin(op: &DynOp, types: &[ElemType], data: &[Vec<u8>], len: usize) -> Result<Vec<u8>> {
        let l = Layout::contiguous(&[len]).unwrap();
        let mut out = vec![0u8; len * types[0].size()];
        let ins: Vec<HostTensor<'_>> = data
            .iter()
            .zip(&types[1..])
            .map(|(d, &t)| HostTensor::new(d, t, &l))
            .collect();
        op.run_cpu(HostTensorMut::new(&mut out, types[0], &l), &ins)?;
        Ok(out)
    }

    #[test]
    fn other_type_combinations_run_as_programs() {
        let half = |v: &[f32]| {
            bytes(
                &v.iter()
                    .map(|&x| crate::f16::from_f32(x))
                    .collect::<Vec<_>>(),
            )
        };
        let brain = |v: &[f32]| {
            bytes(
                &v.iter()
                    .map(|&x| crate::bf16::from_f32(x))
                    .collect::<Vec<_>>(),
            )
        };
        // bf16 + f64 into f64: promoted to f64 (bf16 widens exactly).
        let add = DynOp::new("add", &[F64, BF16, F64], &[]).unwrap();
        assert!(add.instance().is_none() && add.program().is_some());
        let got = run_twin(
            &add,
            &[F64, BF16, F64],
            &[brain(&[1.5, -3.0]), bytes(&[0.1f64, 1e300])],
            2,
        )
        .unwrap();
        assert_eq!(
            bytemuck::cast_slice::<u8, f64>(&got),
            [1.5 + 0.1, -3.0 + 1e300]
        );
        // sqrt of i32 into f32 (an integer input of a float op: the default float).
        let sqrt = DynOp::new("sqrt", &[F32, I32], &[]).unwrap();
        let got = run_twin(&sqrt, &[F32, I32], &[bytes(&[4i32, 2, -1])], 3).unwrap();
        let got = bytemuck::cast_slice::<u8, f32>(&got);
        assert_eq!((got[0], got[1]), (2.0, 2.0f32.sqrt()));
        assert!(got[2].is_nan());
        // A comparison of u8 with f16, into bool.
        let lt = DynOp::new("lt", &[Bool, U8, F16], &[]).unwrap();
        let got = run_twin(
            &lt,
            &[Bool, U8, F16],
            &[vec![1, 200, 3], half(&[1.5, 199.0, 3.0])],
            3,
        )
        .unwrap();
        assert_eq!(got, [1, 0, 0]);
        // Operands in the op's order though the expression reads `c` before `b`:
        // lerp(a, b, w) = a + w * (b - a), f32 and f16 into f64.
        let lerp = DynOp::new("lerp", &[F64, F32, F16, F64], &[]).unwrap();
        let got = run_twin(
            &lerp,
            &[F64, F32, F16, F64],
            &[
                bytes(&[1.0f32, 10.0]),
                half(&[3.0, 20.0]),
                bytes(&[0.5f64, 0.25]),
            ],
            2,
        )
        .unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, f64>(&got), [2.0, 12.5]);
        // Scalars: clamp of f16 into f32; `add_s` of an i32 tensor and a float scalar
        // (weak: f32) into f32.
        let clamp = DynOp::new("clamp", &[F32, F16], &[Scalar::F64(-1.0), Scalar::I64(2)]).unwrap();
        let got = run_twin(&clamp, &[F32, F16], &[half(&[-5.0, 0.5, 7.0])], 3).unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&got), [-1.0, 0.5, 2.0]);
        let add_s = DynOp::new("add_s", &[F32, I32], &[Scalar::F64(0.5)]).unwrap();
        let got = run_twin(&add_s, &[F32, I32], &[bytes(&[1i32, -4])], 2).unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&got), [1.5, -3.5]);
        // The scalar count and an integer scalar that does not fit are typed errors.
        let e = DynOp::new("clamp", &[F32, F16], &[Scalar::F64(0.0)]).unwrap_err();
        assert!(matches!(e, Error::BadScalars { op: "clamp", .. }), "{e}");
        let e = DynOp::new("add_s", &[U32, U8], &[Scalar::I64(-300)]).unwrap_err();
        assert!(
            e.to_string().contains("-300") || e.to_string().contains("s0"),
            "{e}"
        );
        // A program compiled once per thread for its op, types and scalar kinds.
        let again = DynOp::new("add", &[F64, BF16, F64], &[]).unwrap();
        assert!(std::ptr::eq(
            add.program().unwrap(),
            again.program().unwrap()
        ));
        let int = DynOp::new("add_s", &[F32, I32], &[Scalar::I64(2)]).unwrap();
        assert!(!std::ptr::eq(
            add_s.program().unwrap(),
            int.program().unwrap()
        ));
        let got = run_twin(&int, &[F32, I32], &[bytes(&[1i32, -4])], 2).unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&got), [3.0, -2.0]);
        // Instantiated combinations keep their kernels.
        assert!(DynOp::new("add", &[F32, F32, F32], &[])
            .unwrap()
            .instance()
            .is_some());
    }

    #[test]
    fn output_types_follow_the_kernels_then_promotion() {
        let out = |op: &str, inputs: &[ElemType], s: &[Scalar]| output_type(op, inputs, s).unwrap();
        assert_eq!(out("add", &[F32, F32], &[]), F32);
        assert_eq!(out("add", &[BF16, F64], &[]), F64);
        assert_eq!(out("add", &[I32, F16], &[]), F16);
        assert_eq!(out("add", &[U8, I32], &[]), I32);
        assert_eq!(out("eq", &[U8, F16], &[]), Bool);
        assert_eq!(out("sqrt", &[I64], &[]), F32);
        assert_eq!(out("mul_s", &[I32], &[Scalar::F64(2.5)]), F32);
        assert_eq!(out("mul_s", &[U8], &[Scalar::I64(2)]), U8);
        assert_eq!(out("where", &[Bool, F16, BF16], &[]), F32);
        assert_eq!(out("add_assign", &[I32], &[]), I32);
        let e = output_type("add_assign", &[I32, I32], &[]).unwrap_err();
        assert!(e.to_string().contains("inputs (i32, i32)"), "{e}");
        let e = output_type("cast", &[F32], &[]).unwrap_err();
        assert!(matches!(e, Error::OutputTypeAmbiguous { .. }), "{e}");
    }

    /// Every family that runs as a program (`@program` lines) finds its program, compiled
    /// for its types, reading every operand once (`lerp`'s in another order).
    #[test]
    fn program_families_have_their_programs() {
        let mut n = 0;
        for inst in instances() {
            let Some(prog) = &inst.names.program else {
                assert!(!inst.names.dn.is_empty(), "{}", inst.family());
                continue;
            };
            assert_eq!(prog.types, inst.types, "{}", inst.family());
            assert_eq!(inst.family(), prog.family);
            assert!(inst.names.dn.is_empty() && inst.names.vec.is_empty());
            // The op value of sample scalars (`clamp`'s bounds, `axpy`'s `alpha`, …), and
            // the scalars the program reads back from it.
            let b = (inst.builder)().unwrap_or_else(|| panic!("{}: no builder", inst.family()));
            let sample = match inst.types[0] {
                F32 | F64 | F16 | BF16 => Scalar::F64(0.5),
                U32 | U8 => Scalar::U64(3),
                _ => Scalar::I64(3),
            };
            let value = (b.build)(&vec![sample; b.scalars.len()])
                .unwrap_or_else(|| panic!("{}: not built", inst.family()));
            // SAFETY: `value` was built by this builder.
            let scalars = unsafe { (b.scalars_of)(&value) };
            assert_eq!(
                scalars.as_slice(),
                vec![sample; b.scalars.len()],
                "{}",
                inst.family()
            );
            let (c, order) = programs::of(prog, scalars.as_slice())
                .unwrap_or_else(|e| panic!("{}: {e}", inst.family()));
            assert_eq!(c.inputs().len(), inst.inputs(), "{}", inst.family());
            let mut read: Vec<usize> = order[..inst.inputs()].to_vec();
            read.sort_unstable();
            assert_eq!(
                read,
                (0..inst.inputs()).collect::<Vec<_>>(),
                "{}",
                inst.family()
            );
            if inst.op() == "lerp" {
                assert_eq!(order, [0, 2, 1], "a + c * (b - a) reads a, c, b");
            }
            n += 1;
        }
        assert!(n > 0, "no family runs as a program");
    }

    #[test]
    fn programs_give_the_kernels_bits_on_the_twin() {
        // Every op with a program, over each instantiated combination of its kernels: the
        // program on the CPU twin gives the kernel's bits (one interpreter and op code).
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let len = 67;
        let mut checked = 0;
        for inst in instances() {
            let Some(p) = programs::find(inst.op()) else {
                continue;
            };
            if inst.types.len() != p.inputs + 1 {
                continue;
            }
            let scalars: Vec<Scalar> = (0..p.scalars)
                .map(|k| {
                    if k == 0 {
                        Scalar::I64(2)
                    } else {
                        Scalar::I64(5)
                    }
                })
                .collect();
            let data: Vec<Vec<u8>> = inst.types[1..]
                .iter()
                .map(|t| {
                    (0..len)
                        .flat_map(|_| {
                            let v = next();
                            // Small values of every type (exact in each), some negative.
                            let x = (v % 17) as i64 - 8;
                            let f = x as f64 * 0.75;
                            match t {
                                F32 => (f as f32).to_le_bytes().to_vec(),
                                F64 => f.to_le_bytes().to_vec(),
                                F16 => crate::f16::from_f64(f).to_le_bytes().to_vec(),
                                BF16 => crate::bf16::from_f64(f).to_le_bytes().to_vec(),
                                I32 => (x as i32).to_le_bytes().to_vec(),
                                I64 => x.to_le_bytes().to_vec(),
                                U32 => (x.unsigned_abs() as u32).to_le_bytes().to_vec(),
                                U8 => vec![x.unsigned_abs() as u8],
                                Bool => vec![(v >> 9) as u8 & 1],
                                other => panic!("no test values for {other:?}"),
                            }
                        })
                        .collect()
                })
                .collect();
            let kernel = DynOp::new(inst.op(), inst.types, &scalars).unwrap();
            let program = DynOp::new_program(inst.op(), inst.types, &scalars)
                .unwrap_or_else(|e| panic!("{} {:?}: {e}", inst.op(), inst.types));
            let want = run_twin(&kernel, inst.types, &data, len).unwrap();
            let got = run_twin(&program, inst.types, &data, len).unwrap();
            let same = if matches!(inst.types[0], F32 | F64 | F16 | BF16) {
                // NaN payloads may differ; every NaN counts as one value.
                let size = inst.types[0].size();
                want.chunks(size).zip(got.chunks(size)).all(|(w, g)| {
                    w == g || {
                        let nan = |b: &[u8]| match size {
                            2 if inst.types[0] == F16 => {
                                crate::f16::from_le_bytes([b[0], b[1]]).is_nan()
                            }
                            2 => crate::bf16::from_le_bytes([b[0], b[1]]).is_nan(),
                            4 => f32::from_le_bytes(b.try_into().unwrap()).is_nan(),
                            _ => f64::from_le_bytes(b.try_into().unwrap()).is_nan(),
                        };
                        nan(w) && nan(g)
                    }
                })
            } else {
                want == got
            };
            assert!(
                same,
                "{} {:?}: program {got:?} kernel {want:?}",
                inst.op(),
                inst.types
            );
            checked += 1;
        }
        assert!(checked >= 300, "{checked} combinations");
        // A program of an op id with kernels has their operand and scalar counts.
        let mut ids = std::collections::HashSet::new();
        for p in programs::OPS {
            assert!(ids.insert(p.op), "`{}` listed twice", p.op);
            if let Some(inst) = instances().find(|i| i.op() == p.op) {
                let scalars = (inst.builder)().map_or(0, |b| b.scalars.len());
                assert_eq!((inst.inputs(), scalars), (p.inputs, p.scalars), "{}", p.op);
            }
        }
    }

    #[test]
    fn gelu_tanh_is_pytorchs_formula_on_the_fast_path() {
        // The op's program swaps the operands of PyTorch's additions and products (the same
        // roundings, so the same bits) and fits the fast path's four slots.
        let op = DynOp::new("gelu_tanh", &[BF16, BF16], &[]).unwrap();
        let c = op.program().unwrap();
        assert_eq!(c.program().fast, strided_apply_expr::Class::F32 as u8);
        let torch = crate::expr::Expr::parse(
            "0.5 * a * (1 + tanh(0.7978845608028654 * (a + 0.044715 * (a * a * a))))",
        )
        .unwrap()
        .compile(&[("a", crate::expr::Arg::Tensor(BF16))], None)
        .unwrap();
        let n = 4096;
        let x: Vec<u16> = (0..n).map(|i| (i as u16).wrapping_mul(40503)).collect();
        let l = crate::layout::Layout::contiguous(&[n]).unwrap();
        let mut got = vec![0u16; n];
        let mut want = vec![0u16; n];
        let input = [crate::operand::HostTensor::new(
            bytemuck::cast_slice(&x),
            BF16,
            &l,
        )];
        op.run_cpu(
            crate::operand::HostTensorMut::new(bytemuck::cast_slice_mut(&mut got), BF16, &l),
            &input,
        )
        .unwrap();
        torch
            .run_cpu(
                crate::operand::HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), BF16, &l),
                &input,
                &[],
            )
            .unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let nan = |b: u16| b & 0x7f80 == 0x7f80 && b & 0x7f != 0;
            assert!(g == w || (nan(*g) && nan(*w)), "{:#x}: {g:#x} {w:#x}", x[i]);
        }
    }

    #[test]
    fn every_program_op_compiles_for_the_types_it_takes() {
        // Each op id over f32, f16, i32, i8 and bool inputs: it compiles (its text parses,
        // its names are its operands and scalars), or it is a type error naming the op's
        // operation (`bitwise_and` of floats), never another error. Float ops run.
        let mut ran = 0;
        for p in programs::OPS {
            let parsed = (p.expr)().unwrap_or_else(|e| panic!("`{}`: {e}", p.op));
            let mut names = parsed.names();
            names.sort_unstable();
            let mut want: Vec<&str> = programs::INPUTS[..p.inputs]
                .iter()
                .chain(&programs::SCALARS[..p.scalars])
                .copied()
                .collect();
            want.sort_unstable();
            assert_eq!(names, want, "`{}`", p.op);
            for t in [F32, F16, I32, I8, Bool] {
                let mut types = vec![t; p.inputs + 1];
                types[0] = match output_type(p.op, &types[1..], &vec![Scalar::I64(1); p.scalars]) {
                    Ok(o) => o,
                    // `cast` names its output.
                    Err(Error::OutputTypeAmbiguous { .. }) => I64,
                    Err(Error::ExprType { .. }) => continue,
                    Err(e) => panic!("`{}` over {t:?}: {e}", p.op),
                };
                let scalars = vec![Scalar::I64(1); p.scalars];
                let op = DynOp::new(p.op, &types, &scalars)
                    .unwrap_or_else(|e| panic!("`{}` over {t:?}: {e}", p.op));
                if t == F32 {
                    let n = 4;
                    let x: Vec<f32> = vec![0.25, -1.5, 3.0, 0.0];
                    let ins: Vec<Vec<u8>> = (0..p.inputs)
                        .map(|_| bytemuck::cast_slice(&x).to_vec())
                        .collect();
                    let mut out = vec![0u8; n * types[0].size()];
                    let l = crate::layout::Layout::contiguous(&[n]).unwrap();
                    let tensors: Vec<crate::operand::HostTensor> = ins
                        .iter()
                        .map(|b| crate::operand::HostTensor::new(b, F32, &l))
                        .collect();
                    op.run_cpu(
                        crate::operand::HostTensorMut::new(&mut out, types[0], &l),
                        &tensors,
                    )
                    .unwrap_or_else(|e| panic!("`{}`: {e}", p.op));
                    ran += 1;
                }
            }
        }
        assert!(ran >= 100, "{ran} ops ran");
    }

    #[test]
    fn every_instance_is_found_by_its_op_and_types() {
        let mut n = 0;
        for inst in instances() {
            let found = find(inst.op(), inst.types).unwrap();
            assert!(std::ptr::eq(found, inst), "{inst:?}");
            n += 1;
        }
        assert!(n >= 491, "{n} instances");
    }

    #[test]
    fn the_last_lookup_cache_never_answers_for_another_request() {
        // Each lookup twice in a row (the second from the cache), interleaved, and every
        // answer the op and types asked for.
        for inst in instances().step_by(7) {
            for _ in 0..2 {
                let found = find(inst.op(), inst.types).unwrap();
                assert!(std::ptr::eq(found, inst), "{inst:?}");
            }
        }
        let add = find("add", &[F32, F32, F32]).unwrap();
        assert_eq!(add.op(), "add");
        // Same types, another op; same op, other types; then failures after a hit.
        assert_eq!(find("mul", &[F32, F32, F32]).unwrap().op(), "mul");
        assert_eq!(
            find("add", &[F64, F64, F64]).unwrap().types,
            &[F64, F64, F64]
        );
        find("add", &[F32, F32, F32]).unwrap();
        assert!(find("add", &[F32, F32]).is_err());
        assert!(find("plus", &[F32, F32, F32]).is_err());
    }

    #[test]
    fn cpu_raw_pointers_run_in_place_and_refuse_partial_overlap() {
        let raw =
            |v: &mut [f32], shape: &'static [usize], strides: &'static [isize], off: usize| {
                RawTensor {
                    ptr: v.as_mut_ptr().wrapping_add(off) as u64,
                    elem: F32,
                    shape,
                    strides,
                }
            };
        let add = DynOp::new("add", &[F32, F32, F32], &[]).unwrap();
        // a = a + b[::-1] in place, b reversed (negative stride from its last element).
        let mut a: Vec<f32> = (0..6).map(|x| x as f32).collect();
        let mut b: Vec<f32> = (0..6).map(|x| 10.0 * x as f32).collect();
        let (pa, pb) = (raw(&mut a, &[6], &[1], 0), raw(&mut b, &[6], &[-1], 5));
        // SAFETY: host vectors live for the call; `a` is both the output and an input in place.
        unsafe { add.run_cpu_raw(pa, &[pa, pb]) }.unwrap();
        assert_eq!(a, [50.0, 41.0, 32.0, 23.0, 14.0, 5.0]);
        // Rows in place with a broadcast row of the same buffer: refused (partial overlap),
        // the output untouched.
        let mut m: Vec<f32> = (0..6).map(|x| x as f32).collect();
        let before = m.clone();
        let out = raw(&mut m, &[2, 3], &[3, 1], 0);
        let row = raw(&mut m, &[1, 3], &[0, 1], 0);
        // SAFETY: as above.
        let e = unsafe { add.run_cpu_raw(out, &[out, row]) }.unwrap_err();
        assert!(matches!(e, Error::PartialOverlap { operand: "b" }), "{e}");
        assert_eq!(m, before);
        // An output whose zero stride maps several indices to one element: refused.
        let out = raw(&mut m, &[2, 3], &[0, 1], 0);
        let mut c = vec![1.0f32; 6];
        let pc = raw(&mut c, &[2, 3], &[3, 1], 0);
        // SAFETY: as above.
        let e = unsafe { add.run_cpu_raw(out, &[pc, pc]) }.unwrap_err();
        assert!(matches!(e, Error::OverlappingOutput { .. }), "{e}");
        assert_eq!(m, before);
    }
}
