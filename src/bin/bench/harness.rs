//! The device and the sizes every case group uses ([`Bench`]), and which groups run.

use super::cli::Args;
use super::groups::selected;
use super::timing::load_spin;
use strided_apply::{Gpu, Layout, Result};

/// The device and the sizes every case group uses.
pub(super) struct Bench {
    pub(super) gpu: Gpu,
    pub(super) quick: bool,
    pub(super) only: Option<String>,
    /// The side of the square matrices.
    pub(super) big: usize,
    /// A dense `big × big` layout.
    pub(super) sq: Layout,
}

impl Bench {
    /// Opens device 0 as `args` ask and says so on stderr.
    pub(super) fn open(args: &Args) -> Result<Bench> {
        // Families load on their first launch, inside each case's warm-up.
        let gpu = strided_apply::open(0)?;
        if args.release_pool {
            gpu.set_memory_cache_limit(0)?;
        }
        let queued = load_spin(&gpu)?;
        eprintln!(
            "bench: {} ({} SMs), pool {}, timing {}",
            gpu.name(),
            gpu.sm_count(),
            if args.release_pool {
                "releases"
            } else {
                "keeps"
            },
            if queued {
                "queued behind a spin"
            } else {
                "around each call"
            }
        );
        let big = if args.quick { 4096 } else { 16384 };
        Ok(Bench {
            gpu,
            quick: args.quick,
            only: args.only.clone(),
            big,
            sq: Layout::contiguous(&[big, big])?,
        })
    }

    /// Whether `--only` selects `group` (see [`GROUPS`]).
    ///
    /// [`GROUPS`]: super::groups::GROUPS
    pub(super) fn wants(&self, group: &str) -> bool {
        selected(self.only.as_deref(), group)
    }
}
