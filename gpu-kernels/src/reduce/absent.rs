//! The reduction kernels' bodies without the `reductions` feature: a `kernels!` `reduce`
//! line instantiates these, which fail the build with a message naming the feature.

use super::*;

struct Missing<T>(core::marker::PhantomData<T>);
impl<T> Missing<T> {
    const FEATURE: () = panic!(
        "`reduce` lines of `kernels!` need gpu-kernels' `reductions` feature \
         (`features = [\"reductions\"]` in the kernel crate's Cargo.toml)"
    );
}

/// Fails the build: see the module.
///
/// # Safety
/// Never compiled.
pub unsafe fn rows<S: Source<T, K>, T: Copy, const K: usize, const W: usize>(
    _: S,
    _: &ReduceGeometry,
    _: *mut OutOf<S, T, K>,
    _: [*const T; K],
    _: *mut AccOf<S, T, K>,
) {
    Missing::<T>::FEATURE
}

/// Fails the build: see the module.
///
/// # Safety
/// Never compiled.
pub unsafe fn cols<
    S: Source<T, K>,
    T: Copy,
    const K: usize,
    const W: usize,
    const V: usize,
    const E: usize,
>(
    _: S,
    _: &ReduceGeometry,
    _: *mut OutOf<S, T, K>,
    _: [*const T; K],
    _: *mut AccOf<S, T, K>,
) {
    Missing::<T>::FEATURE
}

/// Fails the build: see the module.
///
/// # Safety
/// Never compiled.
pub unsafe fn finals<S: Source<T, K>, T, const K: usize>(
    _: S,
    _: &ReduceGeometry,
    _: *mut OutOf<S, T, K>,
    _: *const AccOf<S, T, K>,
) {
    Missing::<T>::FEATURE
}
