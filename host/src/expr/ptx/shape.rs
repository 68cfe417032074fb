//! The layouts a kernel is generated for ([`Shape`]).

use super::reduce::RedShape;

/// The layout a kernel is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    /// `lanes` elements per thread along dimension 0; operand `k` is broadcast along it
    /// where bit `k` of `bcast` is set (stride 0), else has unit stride and is aligned to
    /// `lanes` elements. `rows`: a second dimension of row strides, dimension 0 a multiple
    /// of `lanes`; otherwise one dimension, its last `n % lanes` elements one per thread.
    /// `per`: vectors per thread of one dimension (1 with `rows`), a block's `per` runs of
    /// `ntid` consecutive vectors, every load issued before the program runs
    /// (`tier1::vector_per`).
    Vector {
        lanes: u8,
        bcast: u16,
        rows: bool,
        per: u8,
    },
    /// One element per thread and step, `rank` collapsed dimensions of any strides.
    Strided { rank: u8 },
    /// One block of 32 × 8 threads per tile of [`tile_side`] × [`tile_side`] elements of
    /// axes 0 × 1 (`launch::tile_axes`: the output's unit-stride axis and a staged input's;
    /// three batch axes): the inputs of `staged` (bit `k`: operand `k`) are read along axis
    /// 1 into shared memory, the tile computed and stored along axis 0. `pair`: every
    /// operand has 2-byte elements and a full tile moves aligned pairs (two elements per
    /// 4-byte access, 2 × 2 blocks turned in registers): the staged inputs along axis 1,
    /// the output and the inputs of `words` along axis 0; otherwise one element per access.
    ///
    /// [`tile_side`]: super::tiled::tile_side
    Tiled { pair: bool, staged: u16, words: u16 },
    /// An expression reduction's group kernel ([`reduce`](super::reduce)).
    Reduce(RedShape),
}
