//! Operands whose element type is known only at run time: [`RawTensor`] (a framework's
//! device memory) and, for the CPU twin of run-time dispatch and of expressions,
//! [`HostTensor`] and [`HostTensorMut`] (host bytes); their checks, the kernel launch that the
//! raw API and run-time dispatch share, and the lookup of a family named at run time.

use crate::alias::{check_aliasing, Region};
use crate::error::{Error, Operand, Result};
use crate::gpu::Gpu;
use crate::launch::launch_plan;
use crate::layout::Layout;
use crate::plan::{plan, Plan};
use cudarc::driver::sys::CUstream;
use gpu_kernels::elem::ElemType;
use gpu_kernels::KernelNames;
use std::ffi::c_void;

/// A strided tensor in caller-owned device memory.
#[derive(Clone, Copy, Debug)]
pub struct RawTensor<'a> {
    /// Device address of the element at multi-index `(0, …, 0)`.
    pub ptr: u64,
    pub elem: ElemType,
    pub shape: &'a [usize],
    /// In elements; negative and zero strides are allowed.
    pub strides: &'a [isize],
}

impl RawTensor<'_> {
    /// The tensor's layout, after checking its element type, shape, strides and pointer.
    pub(crate) fn check(&self, operand: Operand, expected: ElemType) -> Result<Layout> {
        if self.elem != expected {
            return Err(Error::type_mismatch(operand, expected, self.elem));
        }
        let layout = Layout::new(self.shape, self.strides, 0).map_err(|e| match e {
            Error::InvalidView { reason, .. } => Error::InvalidView { operand, reason },
            e => e,
        })?;
        let span = layout.span(operand)?;
        if span.is_some() {
            if self.ptr == 0 {
                return Err(Error::NullPointer { operand });
            }
            let align = expected.size();
            if !self.ptr.is_multiple_of(align as u64) {
                return Err(Error::Misaligned {
                    operand,
                    ptr: self.ptr,
                    align,
                });
            }
        }
        Ok(layout)
    }
}

/// Operand names in messages, output first.
pub(crate) const OPERANDS: [Operand; 4] = ["out", "a", "b", "c"];

/// Each raw tensor's layout after checking it against its element type in `types`
/// (output first).
pub(crate) fn checked_layouts<const N: usize>(
    types: &[ElemType],
    t: &[RawTensor<'_>; N],
    names: [Operand; N],
) -> Result<[Layout; N]> {
    let mut layouts: [Layout; N] = std::array::from_fn(|_| Layout::default());
    for k in 0..N {
        layouts[k] = t[k].check(names[k], types[k])?;
    }
    Ok(layouts)
}

/// The memory regions of raw tensors with their checked `layouts`.
pub(crate) fn raw_regions<'a, const N: usize>(
    types: &[ElemType],
    t: &[RawTensor<'_>; N],
    layouts: &'a [Layout; N],
    names: [Operand; N],
) -> [Region<'a>; N] {
    std::array::from_fn(|k| Region {
        operand: names[k],
        buffer: t[k].ptr,
        elem_size: types[k].size(),
        layout: &layouts[k],
    })
}

/// Raw tensors over host memory, ready for the CPU twin: their checked layouts, and the
/// address each layout counts from. An input that shares bytes with the output (the
/// aliasing rules allow it only at exactly the output's positions, `a = a + b`) is read
/// from a private copy of its bytes, so no input element is an output element.
pub(crate) struct HostOperands<const N: usize> {
    pub layouts: [Layout; N],
    pub data: [*mut u8; N],
    /// The copies `data` may point into (8-byte words: aligned for every element type).
    _copies: Vec<Vec<u64>>,
}

impl<const N: usize> HostOperands<N> {
    /// Checks `t` against `types` (output first; `names` in messages), checks the aliasing
    /// rules and copies the in-place inputs.
    ///
    /// # Safety
    /// Every tensor's `ptr` is a host address; every element its shape and strides reach
    /// from there is in one live allocation holding values of its element type.
    pub(crate) unsafe fn new(
        types: &[ElemType],
        t: &[RawTensor<'_>; N],
        names: [Operand; N],
    ) -> Result<Self> {
        let layouts = checked_layouts(types, t, names)?;
        let regions = raw_regions(types, t, &layouts, names);
        check_aliasing(&regions[0], &regions[1..])?;
        let mut data: [*mut u8; N] = t.map(|t| t.ptr as *mut u8);
        let mut copies: Vec<Vec<u64>> = Vec::new();
        if let Some((olo, ohi)) = regions[0].byte_span()? {
            for k in 1..N {
                let Some((lo, hi)) = regions[k].byte_span()? else {
                    continue;
                };
                if hi <= olo || ohi <= lo {
                    continue;
                }
                let bytes = (hi - lo) as usize;
                let mut copy = vec![0u64; bytes.div_ceil(8)];
                // SAFETY: `lo..hi` are the bytes input `k` reaches, in its live allocation
                // (the caller's contract); the copy is a new allocation of at least `bytes`.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        lo as *const u8,
                        copy.as_mut_ptr().cast::<u8>(),
                        bytes,
                    );
                }
                data[k] = copy
                    .as_mut_ptr()
                    .cast::<u8>()
                    .wrapping_add((t[k].ptr - lo) as usize);
                copies.push(copy);
            }
        }
        Ok(HostOperands {
            layouts,
            data,
            _copies: copies,
        })
    }
}

/// The kernel launch of the raw launch (`programs::launch_raw`, which the typed raw API and
/// run-time dispatch share): checks every tensor against its element type in `types`
/// (output first), plans, checks the aliasing rules and launches the kernels `names` with
/// the kernel argument `op`.
///
/// # Safety
/// The raw API's conditions 1–3 for every tensor and `stream`; `op` points to the `OpArg`
/// of the op whose kernels `names` names, for the element types `types`.
pub(crate) unsafe fn launch_kernels<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    names: &KernelNames,
    op: *const c_void,
    types: &[ElemType],
    t: [RawTensor<'_>; N],
) -> Result<()> {
    let operands: [Operand; N] = std::array::from_fn(|k| OPERANDS[k]);
    let layouts = checked_layouts(types, &t, operands)?;
    let plan: Plan<N> = plan(std::array::from_fn(|k| &layouts[k]), operands)?;
    let regions = raw_regions(types, &t, &layouts, operands);
    check_aliasing(&regions[0], &regions[1..])?;
    if plan.numel == 0 {
        return Ok(());
    }
    let sizes = std::array::from_fn(|k| types[k].size());
    // SAFETY: the caller vouches for the memory and the op argument; the checks above prove
    // the element types, the aliasing rules and that offsets do not overflow.
    unsafe { launch_plan(gpu, names, op, &plan, t.map(|t| t.ptr), sizes, stream) }
}

/// A strided tensor over host bytes, for the CPU twin of run-time dispatch: the bytes hold
/// elements of type `elem` (aligned for it), `layout` counts in elements from the start.
#[derive(Clone, Copy, Debug)]
pub struct HostTensor<'a> {
    pub data: &'a [u8],
    pub elem: ElemType,
    pub layout: &'a Layout,
}

/// The output of the CPU twin of run-time dispatch (see [`HostTensor`]).
#[derive(Debug)]
pub struct HostTensorMut<'a> {
    pub data: &'a mut [u8],
    pub elem: ElemType,
    pub layout: &'a Layout,
}

impl<'a> HostTensor<'a> {
    pub fn new(data: &'a [u8], elem: ElemType, layout: &'a Layout) -> Self {
        HostTensor { data, elem, layout }
    }

    pub(crate) fn check(&self, operand: Operand, expected: ElemType) -> Result<()> {
        if self.elem != expected {
            return Err(Error::type_mismatch(operand, expected, self.elem));
        }
        let size = self.elem.size();
        // Bounds first: a tensor without elements reads nothing, so its (possibly dangling,
        // as an empty Vec's) pointer need not be aligned.
        let reaches = self.layout.check_in(self.data.len() / size, operand)?;
        let ptr = self.data.as_ptr() as u64;
        if reaches.is_some() && !ptr.is_multiple_of(size as u64) {
            return Err(Error::Misaligned {
                operand,
                ptr,
                align: size,
            });
        }
        Ok(())
    }
}

impl<'a> HostTensorMut<'a> {
    pub fn new(data: &'a mut [u8], elem: ElemType, layout: &'a Layout) -> Self {
        HostTensorMut { data, elem, layout }
    }

    pub(crate) fn as_ref(&self) -> HostTensor<'_> {
        HostTensor {
            data: self.data,
            elem: self.elem,
            layout: self.layout,
        }
    }
}

#[cfg(feature = "dispatch")]
/// The one-type family of `op` over `elem` among `families` (stencils, reductions), whose
/// id and element type `key` reads; `UnknownOp` (listing the ids) or `NotInstantiated`
/// (listing the op's types) otherwise.
pub(crate) fn find_one_type<F: 'static>(
    families: impl Iterator<Item = &'static F>,
    op: &str,
    elem: ElemType,
    key: impl Fn(&F) -> (&'static str, ElemType),
) -> Result<&'static F> {
    let mut known: Vec<&str> = Vec::new();
    let mut available: Vec<&str> = Vec::new();
    for f in families {
        let (id, t) = key(f);
        known.push(id);
        if id == op {
            if t == elem {
                return Ok(f);
            }
            available.push(t.name());
        }
    }
    if available.is_empty() {
        known.sort_unstable();
        known.dedup();
        return Err(Error::UnknownOp {
            op: op.to_string(),
            known: known.join(", "),
        });
    }
    Err(Error::NotInstantiated {
        op: op.to_string(),
        types: format!("{} inputs", elem.name()),
        available: available.join(", "),
    })
}
