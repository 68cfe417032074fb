//! Reading a torch tensor without Python calls: libtorch's stable C shim.
//!
//! `torch/csrc/inductor/aoti_torch/c/shim.h` is the C ABI that AOTInductor's compiled models
//! call, and torch keeps it stable across releases (a changed function gets a `_v2` beside
//! it). Its getters take an `AtenTensorHandle`, which is an `at::Tensor*`; an `at::Tensor` is
//! one pointer to its `TensorImpl` (an `intrusive_ptr`), and `Tensor._cdata` gives that
//! pointer. So a handle is the address of a local word holding `_cdata`, and the getters read
//! the layout, device, dtype, sizes, strides and data pointer in C, a few nanoseconds each,
//! where the same reads through Python take 0.1–0.3 µs each (`get_device`, `dtype`,
//! `data_ptr()`, `shape`, `stride()`; measured on an H200 host, torch 2.11).
//!
//! The shim is resolved in the libtorch that the user's `import torch` loaded (this module
//! never links torch), and it is used only after a self-check: a probe tensor with an offset
//! and strides of its own must read the same through the shim as through Python, and every
//! dtype's code is read off a tensor of that dtype. Where a library, a symbol or the check
//! fails, the Python reads are used, and `_native._torch_reader()` says why.
//!
//! Two more reads are calibrated on probes, and each is used only where its calibration
//! held (else the Python attribute or call it replaces): the `TensorImpl` pointer is read
//! at its offset in the tensor object (the word that equals `_cdata` in every probe, inside
//! `torch.Tensor.__basicsize__`), and the negative bit by `at::native::is_neg` (a C++
//! function of libtorch taking `const at::Tensor&`, which reads the tensor's key set and
//! cannot throw), checked on plain, `_neg_view` and `conj().imag` probes. The shim has no
//! getter for the negative bit, and `Tensor.is_neg()` from Python costs ~0.2 µs (it
//! releases and retakes the GIL).

use pyo3::prelude::*;
use std::ffi::c_void;
use strided_apply::ElemType;

/// `AtenTensorHandle`: the address of an `at::Tensor`.
type Handle = *const *mut c_void;
type GetI32 = unsafe extern "C" fn(Handle, *mut i32) -> i32;
type GetI64 = unsafe extern "C" fn(Handle, *mut i64) -> i32;
type GetArray = unsafe extern "C" fn(Handle, *mut *mut i64) -> i32;
type GetPtr = unsafe extern "C" fn(Handle, *mut *mut c_void) -> i32;
type Constant = unsafe extern "C" fn() -> i32;
type CurrentStream = unsafe extern "C" fn(i32, *mut *mut c_void) -> i32;
/// `bool at::native::is_neg(const at::Tensor&)`: a reference is passed as a pointer.
type IsNeg = unsafe extern "C" fn(Handle) -> bool;
/// Its Itanium-mangled name.
const NATIVE_IS_NEG: &str = "_ZN2at6native6is_negERKNS_6TensorE";

/// What the shim reads of one tensor, unfiltered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Read {
    pub layout: i32,
    pub device_type: i32,
    pub device_index: i32,
    pub dtype: i32,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    /// The first element's address (the storage's plus the storage offset).
    pub ptr: u64,
}

/// A strided CUDA tensor of an element type of this library: its [`Read`] (`device_index`
/// is the CUDA ordinal), the element type of its dtype, and torch's negative bit where
/// `at::native::is_neg` read it (else the caller asks Python).
pub(crate) struct CudaTensor {
    pub read: Read,
    pub elem: ElemType,
    pub neg: Option<bool>,
}

pub(crate) struct Shim {
    layout: GetI32,
    device_type: GetI32,
    device_index: GetI32,
    dtype: GetI32,
    dim: GetI64,
    sizes: GetArray,
    strides: GetArray,
    data_ptr: GetPtr,
    /// `aoti_torch_get_current_cuda_stream` of libtorch_cuda (absent in a CPU-only torch).
    stream: Option<CurrentStream>,
    strided: i32,
    cuda: i32,
    cpu: i32,
    /// torch's dtype code of each element type (filled by the self-check).
    dtypes: Vec<(i32, ElemType)>,
    /// Offset of the `TensorImpl` pointer in a `torch.Tensor` object, where calibrated.
    cdata_offset: Option<usize>,
    /// `at::native::is_neg`, where found and calibrated.
    native_is_neg: Option<IsNeg>,
    /// What `_torch_reader()` reports: the reads in use, and why a calibrated one is not.
    pub(crate) describe: String,
    /// The libraries stay open (and so every function above valid) for the process.
    _libs: Vec<libloading::Library>,
}

/// Opens a library that `import torch` already loaded (another reference to it); one that
/// is not loaded is not loaded now (`RTLD_NOLOAD`): an error.
fn open(dir: &std::path::Path, name: &str) -> Result<libloading::Library, String> {
    let path = dir.join(name);
    // SAFETY: with RTLD_NOLOAD, dlopen only takes another reference to a library already in
    // the process (torch's own, loaded by `import torch`); it runs no initialisers.
    unsafe { libloading::os::unix::Library::open(Some(&path), libc::RTLD_LAZY | libc::RTLD_NOLOAD) }
        .map(libloading::Library::from)
        .map_err(|e| format!("{name} (not loaded by this torch): {e}"))
}

/// The function `name` of `lib` as type `F`.
///
/// # Safety
/// `F` is the C signature that torch's `shim.h` declares for `name`.
unsafe fn symbol<F: Copy>(lib: &libloading::Library, name: &str) -> Result<F, String> {
    // SAFETY: forwarded (the signature); the pointer is used only while `lib` stays open
    // (`Shim::_libs`).
    unsafe { lib.get::<F>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{name}: {e}"))
}

/// The offset of the `TensorImpl` pointer in `torch.Tensor` and `Parameter` objects: the
/// one aligned word after the object header, within `torch.Tensor.__basicsize__`, that
/// equals `_cdata` in each of three probes (two tensors and a `Parameter`).
fn calibrate_cdata(torch: &Bound<'_, PyAny>) -> Result<usize, String> {
    let probe_err = |e: PyErr| format!("probe: {e}");
    let basic: usize = torch
        .getattr("Tensor")
        .and_then(|t| t.getattr("__basicsize__"))
        .and_then(|b| b.extract())
        .map_err(probe_err)?;
    let probes = (|| -> PyResult<Vec<(Bound<'_, PyAny>, usize)>> {
        let a = torch.call_method1("empty", (3,))?;
        let b = torch.call_method1("empty", (2, 2))?.call_method0("t")?;
        let c = torch
            .getattr("nn")?
            .getattr("Parameter")?
            .call1((torch.call_method1("empty", (1,))?,))?;
        [a, b, c]
            .into_iter()
            .map(|p| {
                let imp: usize = p.getattr("_cdata")?.extract()?;
                Ok((p, imp))
            })
            .collect()
    })()
    .map_err(probe_err)?;
    let word = std::mem::size_of::<usize>();
    // PyObject_HEAD (reference count and type) comes first.
    let found: Vec<usize> = (2 * word..basic.saturating_sub(word - 1))
        .step_by(word)
        .filter(|&off| {
            probes.iter().all(|(p, imp)| {
                // SAFETY: `off + word <= __basicsize__` of `torch.Tensor`, which every probe
                // (a `torch.Tensor` or a subclass of it) has at least; objects are aligned
                // to the word, and `off` is a multiple of it; each probe is held here.
                let w = unsafe { p.as_ptr().cast::<u8>().add(off).cast::<usize>().read() };
                w == *imp
            })
        })
        .collect();
    match found[..] {
        [off] => Ok(off),
        [] => Err("no word of the object equals _cdata".to_string()),
        _ => Err(format!("several words equal _cdata: {found:?}")),
    }
}

impl Shim {
    /// The shim of the imported `torch`, checked against Python's reads, or why not.
    /// With `calibrated`, also the two calibrated reads (each where its calibration holds).
    pub(crate) fn load(
        py: Python<'_>,
        torch: &Bound<'_, PyAny>,
        dtypes: &[(Py<PyAny>, ElemType)],
        calibrated: bool,
    ) -> Result<Shim, String> {
        let py_err = |e: PyErr| format!("probe: {e}");
        let file: String = torch
            .getattr("__file__")
            .and_then(|f| f.extract())
            .map_err(py_err)?;
        let dir = std::path::Path::new(&file)
            .parent()
            .ok_or("torch.__file__ has no directory")?
            .join("lib");
        let cpu_lib = open(&dir, "libtorch_cpu.so")?;
        let cuda_lib = open(&dir, "libtorch_cuda.so").ok();
        // SAFETY: each type is the declaration in torch's shim.h:
        // `AOTITorchError f(AtenTensorHandle, T* ret)` with `AOTITorchError` an int32_t,
        // `int32_t f(void)` for the constants, and
        // `AOTITorchError aoti_torch_get_current_cuda_stream(int32_t, void**)`.
        let mut shim = unsafe {
            Shim {
                layout: symbol(&cpu_lib, "aoti_torch_get_layout")?,
                device_type: symbol(&cpu_lib, "aoti_torch_get_device_type")?,
                device_index: symbol(&cpu_lib, "aoti_torch_get_device_index")?,
                dtype: symbol(&cpu_lib, "aoti_torch_get_dtype")?,
                dim: symbol(&cpu_lib, "aoti_torch_get_dim")?,
                sizes: symbol(&cpu_lib, "aoti_torch_get_sizes")?,
                strides: symbol(&cpu_lib, "aoti_torch_get_strides")?,
                data_ptr: symbol(&cpu_lib, "aoti_torch_get_data_ptr")?,
                stream: cuda_lib.as_ref().and_then(|l| {
                    symbol::<CurrentStream>(l, "aoti_torch_get_current_cuda_stream").ok()
                }),
                strided: symbol::<Constant>(&cpu_lib, "aoti_torch_layout_strided")?(),
                cuda: symbol::<Constant>(&cpu_lib, "aoti_torch_device_type_cuda")?(),
                cpu: symbol::<Constant>(&cpu_lib, "aoti_torch_device_type_cpu")?(),
                dtypes: Vec::new(),
                cdata_offset: None,
                native_is_neg: None,
                describe: String::new(),
                _libs: Vec::new(),
            }
        };
        let native_is_neg = calibrated
            // SAFETY: `at::native::is_neg` is `bool (const at::Tensor&)` (checked on probes
            // below before any use).
            .then(|| unsafe { symbol::<IsNeg>(&cpu_lib, NATIVE_IS_NEG) });
        shim._libs.push(cpu_lib);
        shim._libs.extend(cuda_lib);

        // Every dtype's code, read off a CPU tensor of it.
        let empty = torch.getattr("empty").map_err(py_err)?;
        for (dtype, elem) in dtypes {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("dtype", dtype.bind(py)).map_err(py_err)?;
            let t = empty.call((0,), Some(&kwargs)).map_err(py_err)?;
            let read = shim
                .read_any(&t)
                .ok_or("probe: the shim refused a tensor")?;
            shim.dtypes.push((read.dtype, *elem));
        }
        // A probe with an offset and strides of its own: float16 storage of 24 elements,
        // the view [3:] as_strided to (2, 3) with strides (5, 2) from element 4.
        let probe = (|| -> PyResult<(Bound<'_, PyAny>, Read)> {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("dtype", torch.getattr("float16")?)?;
            let base = empty.call((24,), Some(&kwargs))?;
            let view = base
                .get_item(pyo3::types::PySlice::new(py, 3, 24, 1))?
                .call_method1("as_strided", ((2, 3), (5, 2), 4))?;
            let expect = Read {
                layout: shim.strided,
                device_type: shim.cpu,
                device_index: -1,
                dtype: shim.code(ElemType::F16).unwrap_or(-1),
                shape: view.getattr("shape")?.extract()?,
                strides: view.call_method0("stride")?.extract()?,
                ptr: view.call_method0("data_ptr")?.extract()?,
            };
            Ok((view, expect))
        })()
        .map_err(py_err)?;
        let (view, expect) = probe;
        let got = shim
            .read_any(&view)
            .ok_or("probe: the shim refused the probe")?;
        // A CPU tensor's device index is -1 in torch; accept what the shim says there.
        let got = Read {
            device_index: -1,
            ..got
        };
        if got != expect || expect.shape != [2, 3] || expect.strides != [5, 2] {
            return Err(format!(
                "probe: the shim read {got:?} where Python reads {expect:?}"
            ));
        }
        let mut notes = vec!["shim".to_string()];
        if calibrated {
            match calibrate_cdata(torch) {
                Ok(off) => {
                    shim.cdata_offset = Some(off);
                    notes.push(format!("TensorImpl pointer at offset {off}"));
                }
                Err(why) => notes.push(format!("_cdata by attribute ({why})")),
            }
            match native_is_neg.map(|f| f.and_then(|f| shim.calibrate_is_neg(torch, f))) {
                Some(Ok(f)) => {
                    shim.native_is_neg = Some(f);
                    notes.push("at::native::is_neg".to_string());
                }
                Some(Err(why)) => notes.push(format!("is_neg() by Python ({why})")),
                None => {}
            }
        } else {
            notes.push(
                "_cdata by attribute, is_neg() by Python (STRIDED_APPLY_TORCH_READER=shim)"
                    .to_string(),
            );
        }
        shim.describe = notes.join(", ");
        Ok(shim)
    }

    /// `f` if it reads the negative bit of plain, `_neg_view` and `conj().imag` probes as
    /// Python's `is_neg()` does.
    fn calibrate_is_neg(&self, torch: &Bound<'_, PyAny>, f: IsNeg) -> Result<IsNeg, String> {
        let probes = (|| -> PyResult<Vec<Bound<'_, PyAny>>> {
            let plain = torch.call_method1("ones", (2, 3))?;
            let neg = torch.call_method1("_neg_view", (&plain,))?;
            let z = torch.call_method1("complex", (&plain, &plain))?;
            let conj_imag = z.call_method0("conj")?.getattr("imag")?;
            let t = plain.call_method0("t")?;
            Ok(vec![plain, neg, conj_imag, t])
        })()
        .map_err(|e| format!("probe: {e}"))?;
        let mut seen = [false; 2];
        for p in &probes {
            let want: bool = p
                .call_method0("is_neg")
                .and_then(|v| v.extract())
                .map_err(|e| format!("probe: {e}"))?;
            let imp = self.impl_of(p).ok_or("probe: no _cdata")?;
            let tensor: *mut c_void = imp as *mut c_void;
            // SAFETY: `&tensor` is the address of an `at::Tensor` (its one `TensorImpl`
            // pointer) of a probe held here; `is_neg` only reads its key set.
            let got = unsafe { f(&tensor) };
            if got != want {
                return Err(format!("it read {got} where is_neg() is {want}"));
            }
            seen[usize::from(want)] = true;
        }
        if seen != [true, true] {
            return Err("the probes did not cover both values".to_string());
        }
        Ok(f)
    }

    /// The `TensorImpl` pointer of `t` (exactly a `torch.Tensor` or `Parameter`: the caller
    /// checks the type).
    fn impl_of(&self, t: &Bound<'_, PyAny>) -> Option<usize> {
        match self.cdata_offset {
            // SAFETY: `t` is an instance of exactly the types calibrated (`calibrate_cdata`),
            // alive (a bound reference), and `off + 8` is within their `__basicsize__`, so
            // the aligned word at `off` is the object's own memory: the `TensorImpl`
            // pointer that `_cdata` returns, as on every probe.
            Some(off) => Some(unsafe { t.as_ptr().cast::<u8>().add(off).cast::<usize>().read() }),
            None => t
                .getattr(pyo3::intern!(t.py(), "_cdata"))
                .ok()?
                .extract()
                .ok(),
        }
    }

    fn code(&self, elem: ElemType) -> Option<i32> {
        self.dtypes
            .iter()
            .find(|(_, e)| *e == elem)
            .map(|(c, _)| *c)
    }

    /// Everything the shim reads of `t` (a `torch.Tensor` or `torch.nn.Parameter`, exactly:
    /// the caller checks the type), or `None` when a getter fails.
    pub(crate) fn read_any(&self, t: &Bound<'_, PyAny>) -> Option<Read> {
        self.read_impl(self.impl_of(t)?)
    }

    /// [`read_any`](Self::read_any) of the tensor whose `TensorImpl` is at `imp`, which the
    /// caller holds.
    fn read_impl(&self, imp: usize) -> Option<Read> {
        let tensor: *mut c_void = imp as *mut c_void;
        let h: Handle = &tensor;
        let (mut layout, mut device_type, mut device_index, mut dtype) = (0, 0, 0, 0);
        let mut dim = 0i64;
        let mut sizes: *mut i64 = std::ptr::null_mut();
        let mut strides: *mut i64 = std::ptr::null_mut();
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `h` is the address of an `at::Tensor` (one `TensorImpl` pointer, `_cdata` of
        // a tensor the caller holds, so alive for this call); these getters only read it.
        // The sizes and strides arrays are the tensor's own, `dim` long, and are copied
        // before anything can change the tensor (the GIL is held throughout).
        unsafe {
            if (self.layout)(h, &mut layout) != 0 || layout != self.strided {
                return None;
            }
            if (self.device_type)(h, &mut device_type) != 0
                || (self.device_index)(h, &mut device_index) != 0
                || (self.dtype)(h, &mut dtype) != 0
                || (self.dim)(h, &mut dim) != 0
                || (self.sizes)(h, &mut sizes) != 0
                || (self.strides)(h, &mut strides) != 0
                || (self.data_ptr)(h, &mut ptr) != 0
            {
                return None;
            }
            let dim = usize::try_from(dim).ok()?;
            let (sizes, strides) = if dim == 0 {
                (&[][..], &[][..])
            } else if sizes.is_null() || strides.is_null() {
                return None;
            } else {
                (
                    std::slice::from_raw_parts(sizes, dim),
                    std::slice::from_raw_parts(strides, dim),
                )
            };
            Some(Read {
                layout,
                device_type,
                device_index,
                dtype,
                shape: sizes
                    .iter()
                    .map(|&s| usize::try_from(s).ok())
                    .collect::<Option<_>>()?,
                strides: strides
                    .iter()
                    .map(|&s| isize::try_from(s).ok())
                    .collect::<Option<_>>()?,
                ptr: ptr as u64,
            })
        }
    }

    /// `t` read by the shim when it is a strided CUDA tensor of an element type here;
    /// `None` sends the caller to the Python reads (which name what is wrong, if anything).
    pub(crate) fn read_cuda(&self, t: &Bound<'_, PyAny>) -> Option<CudaTensor> {
        let imp = self.impl_of(t)?;
        let r = self.read_impl(imp)?;
        if r.device_type != self.cuda || r.device_index < 0 {
            return None;
        }
        let elem = self
            .dtypes
            .iter()
            .find(|(c, _)| *c == r.dtype)
            .map(|(_, e)| *e)?;
        let tensor: *mut c_void = imp as *mut c_void;
        // SAFETY: as in `read_impl`; `is_neg` reads the key set only (calibrated on probes).
        let neg = self.native_is_neg.map(|f| unsafe { f(&tensor) });
        Some(CudaTensor { read: r, elem, neg })
    }

    /// torch's current stream of `device` (`torch.cuda.current_stream(device)`), or `None`
    /// without libtorch_cuda's getter or when it fails.
    pub(crate) fn current_stream(&self, device: i32) -> Option<usize> {
        let f = self.stream?;
        let mut s: *mut c_void = std::ptr::null_mut();
        // SAFETY: the getter writes one pointer to `s`.
        (unsafe { f(device, &mut s) } == 0).then_some(s as usize)
    }
}
