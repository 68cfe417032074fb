//! The CPU twin of a normalisation program: each stage [`Compiled::reduce_cpu`] into a
//! temporary of one value a row, then the result [`Compiled::run_cpu`] with the
//! temporaries broadcast back. This composition defines the program's bits; the GPU's
//! fused kernel computes the same.

use super::plan::Shapes;
use super::CompiledNorm;
use crate::error::Result;
use crate::expr::{Compiled, HostTensor, HostTensorMut, RawTensor, Scalar, NAMES};
use crate::layout::Layout;

/// Where a part's operand comes from.
pub(super) enum Source {
    /// Input tensor `k` of the call.
    Input(usize),
    /// Stage `k`'s temporary.
    Stage(usize),
}

/// The sources of `c`'s inputs, by name.
pub(super) fn sources(norm: &CompiledNorm, c: &Compiled) -> Vec<Source> {
    c.inputs()
        .iter()
        .map(|n| match n.strip_prefix('%').and_then(|k| k.parse().ok()) {
            Some(k) => Source::Stage(k),
            None => Source::Input(norm.inputs.iter().position(|m| m == n).unwrap_or(0)),
        })
        .collect()
}

impl CompiledNorm {
    /// Checks a call's operand count, scalars and shapes.
    pub(super) fn shapes(
        &self,
        n: usize,
        shapes: &[&[usize]],
        out: &[usize],
        scalars: &[(&str, Scalar)],
        axes: &[usize],
    ) -> Result<Shapes> {
        if n != self.inputs.len() {
            return Err(crate::error::Error::ExprBind {
                name: format!("({n} tensors)"),
                reason: format!(
                    "the program takes {} tensor input(s): {}",
                    self.inputs.len(),
                    self.inputs.join(", ")
                ),
            });
        }
        self.check_scalars(scalars)?;
        Shapes::new(shapes, out, axes, self.rowwise)
    }

    /// Runs the program on the CPU twin: `inputs` in the order of
    /// [`inputs`](Self::inputs), broadcast to one shape; `axes` the normalised axes of that
    /// shape; `out` of the output type, of that shape (or of the reduced shape for a
    /// program whose result reads no input tensor).
    pub fn run_cpu(
        &self,
        out: HostTensorMut<'_>,
        inputs: &[HostTensor<'_>],
        scalars: &[(&str, Scalar)],
        axes: &[usize],
    ) -> Result<()> {
        out.as_ref().check(NAMES[0], self.out)?;
        for (k, t) in inputs.iter().enumerate() {
            t.check(NAMES.get(k + 1).copied().unwrap_or("input"), t.elem)?;
        }
        // Raw tensors at each layout's first element (the layouts count from the slice).
        fn raw<'a>(data: *const u8, elem: crate::ElemType, l: &'a Layout) -> RawTensor<'a> {
            RawTensor {
                ptr: data.wrapping_add(l.offset() * elem.size()) as u64,
                elem,
                shape: l.shape(),
                strides: l.strides(),
            }
        }
        let o = raw(out.data.as_mut_ptr(), out.elem, out.layout);
        let ins: Vec<RawTensor<'_>> = inputs
            .iter()
            .map(|t| raw(t.data.as_ptr(), t.elem, t.layout))
            .collect();
        // SAFETY: every slice was checked to hold the elements its layout reaches, aligned;
        // the output is a unique borrow.
        unsafe { self.run_cpu_raw(o, &ins, scalars, axes) }
    }

    /// [`run_cpu`](Self::run_cpu) over raw host pointers (a Python module's, a framework's
    /// host tensors): the same checks of each part.
    ///
    /// # Safety
    /// As for [`Compiled::run_cpu_raw`]: every tensor's `ptr` is a host address and every
    /// element its shape and strides reach lies in one live allocation of its element type;
    /// nothing else writes the inputs or accesses the output during the call.
    pub unsafe fn run_cpu_raw(
        &self,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
        axes: &[usize],
    ) -> Result<()> {
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape).collect();
        let sh = self.shapes(inputs.len(), &shapes, out.shape, scalars, axes)?;
        let keep = crate::layout::contiguous_strides(&sh.keepdim).unwrap_or_default();
        let bst = full_strides(&sh, inputs);
        let inputs = &full_inputs(&sh, inputs, &bst)[..];
        let (fs, fst) = sh.temp_full();
        let (os, ost) = if self.rowwise {
            (fs.clone(), fst.clone())
        } else {
            sh.temp_as(out.shape)
        };
        // The stages' values: one temporary each, of its accumulator type.
        let mut temps: Vec<Vec<u64>> = self
            .accs
            .iter()
            .map(|a| vec![0u64; (sh.rows * a.size()).div_ceil(8)])
            .collect();
        for (k, (op, c)) in self.stages.iter().enumerate() {
            let ptrs: Vec<u64> = temps.iter().map(|t| t.as_ptr() as u64).collect();
            let ins = part_inputs(self, c, inputs, &ptrs, &fs, &fst);
            let t = RawTensor {
                ptr: temps[k].as_mut_ptr() as u64,
                elem: self.accs[k],
                shape: &sh.keepdim,
                strides: &keep,
            };
            // SAFETY: the caller's operands; the temporaries are live host buffers of their
            // types with one value a row, which the views reach; stage `k` writes only its
            // own, which no input of it is.
            unsafe { c.reduce_cpu_raw(*op, t, &ins, &Self::scalars_of(c, scalars), &sh.axes)? };
        }
        let c = &self.result;
        let ptrs: Vec<u64> = temps.iter().map(|t| t.as_ptr() as u64).collect();
        let ins = part_inputs(self, c, inputs, &ptrs, &os, &ost);
        // SAFETY: as above; the output is the caller's.
        unsafe { c.run_cpu_raw(out, &ins, &Self::scalars_of(c, scalars)) }
    }
}

/// Each input's strides over the call's broadcast shape (`Shapes::input_strides`).
pub(super) fn full_strides(sh: &Shapes, inputs: &[RawTensor<'_>]) -> Vec<Vec<isize>> {
    inputs
        .iter()
        .map(|t| sh.input_strides(t.shape, t.strides))
        .collect()
}

/// The inputs as views of the broadcast shape, with their strides `strides` over it.
pub(super) fn full_inputs<'a>(
    sh: &'a Shapes,
    inputs: &[RawTensor<'_>],
    strides: &'a [Vec<isize>],
) -> Vec<RawTensor<'a>> {
    inputs
        .iter()
        .zip(strides)
        .map(|(t, st)| RawTensor {
            ptr: t.ptr,
            elem: t.elem,
            shape: &sh.full,
            strides: st,
        })
        .collect()
}

/// `c`'s operands: the call's inputs (views of the broadcast shape, `full_inputs`), and the
/// stages' temporaries at `ptrs` as views of `shape` and `strides`.
pub(super) fn part_inputs<'a>(
    norm: &CompiledNorm,
    c: &Compiled,
    inputs: &[RawTensor<'a>],
    ptrs: &[u64],
    shape: &'a [usize],
    strides: &'a [isize],
) -> Vec<RawTensor<'a>> {
    sources(norm, c)
        .iter()
        .map(|s| match *s {
            Source::Input(i) => inputs[i],
            Source::Stage(j) => RawTensor {
                ptr: ptrs[j],
                elem: norm.accs[j],
                shape,
                strides,
            },
        })
        .collect()
}
