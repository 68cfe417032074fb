//! [`ndarray`] on the CPU twin (feature `ndarray`): `nd::apply1` … `nd::apply4` over
//! arrays and views of any strides, ndarray's own negative strides included, with the same
//! plan (broadcasting the inputs to the output's shape) and the same op code as
//! [`cpu`](crate::cpu) and the GPU; and [`DeviceTensor::from_ndarray`] /
//! [`DeviceTensor::to_ndarray`].
//!
//! ```
//! # use host as strided_apply; // the examples name the root crate, which re-exports this one
//! use ndarray::{array, s, Array2};
//! use strided_apply::{nd, ops};
//! let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! let b = array![10.0f32, 20.0, 30.0];
//! let mut c = Array2::<f32>::zeros((3, 2));
//! // c = aᵀ reversed along its rows, plus b broadcast along the columns.
//! nd::apply3(ops::Add, &mut c, &a.t().slice(s![..;-1, ..]), &b.slice(s![.., ndarray::NewAxis]))?;
//! assert_eq!(c, array![[13.0, 16.0], [22.0, 25.0], [31.0, 34.0]]);
//! # Ok::<(), strided_apply::Error>(())
//! ```

use crate::error::{Error, Operand, Result};
use crate::gpu::Gpu;
use crate::layout::Layout;
use crate::tensor::DeviceTensor;
use crate::twin::{apply1_raw, apply2_raw, apply3_raw, apply4_raw};
use gpu_kernels::ops::{Op1, Op2, Op3, Op4};
use gpu_kernels::Elem;
use ndarray::{ArrayBase, ArrayD, Data, DataMut, Dimension, IxDyn, ShapeBuilder};

/// The lowest-addressed element of an ndarray view and its layout from there: ndarray's
/// pointer is the element at index 0, and negative strides reach below it.
fn nd_layout<T>(
    ptr: *const T,
    shape: &[usize],
    strides: &[isize],
    operand: Operand,
) -> Result<(*const T, Layout)> {
    let (layout, _) = Layout::from_first_element(shape, strides, operand)?;
    Ok((ptr.wrapping_sub(layout.offset()), layout))
}

macro_rules! nd_apply {
    ($(#[$doc:meta])* $fn:ident, $raw:ident, $trait:ident, out: $o:ident,
     [$($x:ident: $t:ident / $s:ident / $d:ident),*]) => {
        $(#[$doc])*
        pub fn $fn<Op, $o, S0, D0 $(, $t, $s, $d)*>(
            op: Op,
            out: &mut ArrayBase<S0, D0>,
            $($x: &ArrayBase<$s, $d>),*
        ) -> Result<()>
        where
            Op: $trait<$o $(, $t)*>,
            $o: Elem,
            S0: DataMut<Elem = $o>,
            D0: Dimension,
            $($t: Elem, $s: Data<Elem = $t>, $d: Dimension,)*
        {
            let (shape, strides) = (out.shape().to_vec(), out.strides().to_vec());
            let (po, lo) = nd_layout(out.as_mut_ptr().cast_const(), &shape, &strides, "out")?;
            $( let $x = nd_layout($x.as_ptr(), $x.shape(), $x.strides(), stringify!($x))?; )*
            // SAFETY: ndarray guarantees every element a view's shape and strides reach from
            // its pointer lies in its one allocation; `nd_layout` moved the pointer to the
            // lowest of them, which is where the layout's offsets count from. The output is
            // a unique borrow, so no input reaches its elements and nothing else accesses
            // them during the call.
            unsafe { $raw(op, (po.cast_mut(), &lo) $(, ($x.0, &$x.1))*) }
        }
    };
}

nd_apply!(
    /// CPU twin of [`apply1`](crate::api::apply1) on an ndarray: `op(&mut x[i])`.
    apply1, apply1_raw, Op1, out: T, []
);
nd_apply!(
    /// CPU twin of [`apply2`](crate::api::apply2) on ndarrays: `op(&mut out[i], a[i])`,
    /// `a` broadcast to `out`'s shape.
    apply2, apply2_raw, Op2, out: O, [a: A / SA / DA]
);
nd_apply!(
    /// CPU twin of [`apply3`](crate::api::apply3) on ndarrays, the inputs broadcast to
    /// `out`'s shape.
    apply3, apply3_raw, Op3, out: O, [a: A / SA / DA, b: B / SB / DB]
);
nd_apply!(
    /// CPU twin of [`apply4`](crate::api::apply4) on ndarrays, the inputs broadcast to
    /// `out`'s shape.
    apply4, apply4_raw, Op4, out: O, [a: A / SA / DA, b: B / SB / DB, c: C / SC / DC]
);

impl<T: Elem> DeviceTensor<T> {
    /// Uploads an ndarray. An array that is contiguous in memory in any axis order (a
    /// transposed or reversed view of a dense array included) is uploaded as it lies and
    /// keeps its strides; any other (a strided slice) is uploaded in row-major order.
    pub fn from_ndarray<S: Data<Elem = T>, D: Dimension>(
        gpu: &Gpu,
        a: &ArrayBase<S, D>,
    ) -> Result<Self> {
        let Some(mem) = a.as_slice_memory_order() else {
            let dense: Vec<T> = a.iter().copied().collect();
            return DeviceTensor::from_slice(gpu, &dense, a.shape());
        };
        let whole = DeviceTensor::from_slice(gpu, mem, &[mem.len()])?;
        // The element at index 0 is `offset` elements into the memory-order slice.
        let offset = (a.as_ptr() as usize - mem.as_ptr() as usize) / size_of::<T>().max(1);
        whole.with_layout(Layout::new(a.shape(), a.strides(), offset)?)
    }

    /// Downloads the tensor as an ndarray of its shape. A tensor that covers its whole
    /// buffer with non-negative strides (a transposed view of a dense tensor) keeps its
    /// strides; any other comes back in row-major order.
    pub fn to_ndarray(&self, gpu: &Gpu) -> Result<ArrayD<T>>
    where
        gpu_kernels::ops::Cast: gpu_kernels::Kernels2<T, T>,
    {
        let l = self.layout();
        let mismatch = |len| Error::LengthMismatch {
            operand: "ndarray",
            len,
            shape: l.shape().to_vec(),
            expected: l.numel(),
        };
        let whole = l.offset() == 0
            && l.numel() == self.buffer().len()
            && l.strides().iter().all(|&s| s >= 0)
            && !l.has_internal_overlap();
        if whole {
            let data = self.buffer_to_vec(gpu)?;
            let len = data.len();
            let strides: Vec<usize> = l.strides().iter().map(|&s| s as usize).collect();
            return ArrayD::from_shape_vec(IxDyn(l.shape()).strides(IxDyn(&strides)), data)
                .map_err(|_| mismatch(len));
        }
        let data = self.to_vec(gpu)?;
        let len = data.len();
        ArrayD::from_shape_vec(IxDyn(l.shape()), data).map_err(|_| mismatch(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_kernels::ops::{Add, Fill, Fma, Mul, Sub};
    use ndarray::{s, Array, Array2, Array3, Axis};

    fn values(shape: (usize, usize, usize)) -> Array3<f64> {
        Array::from_shape_fn(shape, |(i, j, k)| (i * 100 + j * 10 + k) as f64 * 0.5 - 7.0)
    }

    #[test]
    fn negative_strides_permutations_and_broadcasts_match_ndarray() {
        let a = values((4, 5, 6));
        let b = values((6, 5, 4));
        // a reversed on two axes, b permuted to a's shape, a row of b broadcast.
        let ar = a.slice(s![..;-1, .., ..;-2]);
        let bp = b.view().permuted_axes([2, 1, 0]);
        let bp = bp.slice(s![.., .., ..;2]);
        let row = a.slice(s![1, 2, ..;-2]);
        let want = &ar + &bp;
        let mut got = Array3::<f64>::zeros((4, 5, 3));
        apply3(Add, &mut got, &ar, &bp).unwrap();
        assert_eq!(got, want);
        let want = &ar * &row;
        apply3(Mul, &mut got, &ar, &row).unwrap();
        assert_eq!(got, want);
        // An output with negative strides, written through a view of a larger array.
        let mut big = Array3::<f64>::from_elem((4, 5, 7), -1.0);
        {
            let mut out = big.slice_mut(s![..;-1, .., 1..;2]);
            apply3(Sub, &mut out, &ar, &bp).unwrap();
        }
        let want = &ar - &bp;
        assert_eq!(big.slice(s![..;-1, .., 1..;2]), want);
        assert!(
            big.slice(s![.., .., ..;2]).iter().all(|&x| x == -1.0),
            "gaps untouched"
        );
        // apply4 and apply1.
        let mut out = Array3::<f64>::zeros((4, 5, 3));
        apply4(Fma, &mut out, &ar, &bp, &row).unwrap();
        let want = ndarray::Zip::from(&ar)
            .and(&bp)
            .and_broadcast(&row)
            .map_collect(|&x, &y, &z| x.mul_add(y, z));
        assert_eq!(out, want);
        let mut col = out.index_axis_mut(Axis(2), 1);
        apply1(Fill(2.5), &mut col).unwrap();
        assert!(out.index_axis(Axis(2), 1).iter().all(|&x| x == 2.5));
    }

    #[test]
    fn bad_shapes_are_typed_errors() {
        let a = Array2::<f32>::zeros((3, 4));
        let mut out = Array2::<f32>::zeros((3, 5));
        let e = apply3(Add, &mut out, &a, &a).unwrap_err();
        assert!(matches!(e, Error::Broadcast { operand: "a", .. }), "{e}");
        let mut empty = Array2::<f32>::zeros((0, 4));
        apply3(
            Add,
            &mut empty,
            &a.slice(s![..0, ..]),
            &a.slice(s![..0;-1, ..;-1]),
        )
        .unwrap();
    }
}
