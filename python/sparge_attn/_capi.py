"""ctypes bindings of libsparge_attn (capi/include/sparge/attention.h): the structs, the functions, the library
search (SPARGE_ATTN_LIBRARY, the package's lib/ folder, the loader's path) and errors raised as SpargeAttnError."""

import ctypes
import os
import pathlib
import threading

ABI_MAJOR = 1  # the major version of the C API these bindings follow

# sparge_attn_status
OK = 0
STATUS_NAMES = {1: "invalid argument", 2: "unsupported", 3: "workspace", 4: "no device", 5: "cuda",
                6: "version", 7: "internal"}
# enums
FLOAT16, BFLOAT16 = 0, 1
NUMERICS = {"int8-fp8": 0, "int8-fp16": 1, "none": 2}
BACKEND_AUTO, BACKEND_CUDA, BACKEND_CPU = 0, 1, 2
LAYOUT_STRIDED = 2
SELECT_CDF, SELECT_TOPK = 0, 1
STATS = 5  # SPARGE_ATTN_STATS


class SpargeAttnError(RuntimeError):
    """A call into libsparge_attn failed; `status` is its sparge_attn_status, the text its message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Strides(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("head", ctypes.c_int64), ("token", ctypes.c_int64)]


class Problem(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("batch", ctypes.c_int32), ("heads_q", ctypes.c_int32),
                ("heads_kv", ctypes.c_int32), ("tokens_q", ctypes.c_int32), ("tokens_kv", ctypes.c_int32),
                ("head_dim", ctypes.c_int32), ("dtype", ctypes.c_int), ("numerics", ctypes.c_int),
                ("backend", ctypes.c_int), ("device", ctypes.c_int32), ("causal", ctypes.c_int32),
                ("window_left", ctypes.c_int64), ("window_right", ctypes.c_int64), ("block_q", ctypes.c_int32),
                ("block_k", ctypes.c_int32), ("scale", ctypes.c_double), ("smooth_k", ctypes.c_int32),
                ("attention_sink", ctypes.c_int32), ("diagonal", ctypes.c_int32), ("cpu_threads", ctypes.c_int32),
                ("layout", ctypes.c_int), ("q_strides", Strides), ("k_strides", Strides), ("v_strides", Strides),
                ("o_strides", Strides)]


class HeadParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("heads", ctypes.c_int32), ("select", ctypes.c_int),
                ("simthreshd1", ctypes.POINTER(ctypes.c_double)), ("cdfthreshd", ctypes.POINTER(ctypes.c_double)),
                ("topk", ctypes.POINTER(ctypes.c_double)), ("pvthreshd", ctypes.POINTER(ctypes.c_double)),
                ("dense", ctypes.POINTER(ctypes.c_uint8)), ("exact", ctypes.POINTER(ctypes.c_uint8))]


class Outputs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("block_mask", ctypes.c_void_p), ("lut", ctypes.c_void_p),
                ("lut_count", ctypes.c_void_p), ("pv_skipped", ctypes.c_void_p), ("head_stats", ctypes.c_void_p)]


_lock = threading.Lock()
_lib = None


def _candidates():
    env = os.environ.get("SPARGE_ATTN_LIBRARY")
    if env:
        return [env], f"SPARGE_ATTN_LIBRARY={env}"
    here = pathlib.Path(__file__).resolve().parent / "lib"
    found = sorted(here.glob("libsparge_attn.so*"))
    return [str(p) for p in found] + ["libsparge_attn.so.1"], f"{here}/ and the loader's search path"


def _load(paths, searched):
    """The first of `paths` that loads, checked for the C API's major version; SpargeAttnError otherwise."""
    errors = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            errors.append(f"{path}: {e}")
    else:
        raise SpargeAttnError(7, "libsparge_attn not found (searched " + searched + "): build it (cmake --build "
                              "build --target sparge_attn), then set SPARGE_ATTN_LIBRARY to the .so or install it "
                              "(cmake --install build --component sparge_attn). Tried: " + "; ".join(errors))
    _declare(lib)
    major = lib.sparge_attn_version() // 10000
    if major != ABI_MAJOR:
        raise SpargeAttnError(6, f"libsparge_attn {lib.sparge_attn_version_string().decode()} has C API major "
                              f"version {major}; this package needs {ABI_MAJOR}")
    return lib


def library():
    """The loaded libsparge_attn (loaded on first use); raises SpargeAttnError with what was searched."""
    global _lib
    with _lock:
        if _lib is None:
            _lib = _load(*_candidates())
        return _lib


def _declare(lib):
    c = ctypes
    status = c.c_int
    sigs = {
        "sparge_attn_version": (c.c_int32, []),
        "sparge_attn_version_string": (c.c_char_p, []),
        "sparge_attn_last_error": (c.c_char_p, []),
        "sparge_attn_cuda_device_count": (c.c_int32, []),
        "sparge_attn_problem_init": (status, [c.POINTER(Problem)]),
        "sparge_attn_plan_create": (status, [c.POINTER(Problem), c.POINTER(c.c_void_p)]),
        "sparge_attn_plan_destroy": (None, [c.c_void_p]),
        "sparge_attn_plan_workspace_size": (status, [c.c_void_p, c.POINTER(c.c_size_t)]),
        "sparge_attn_plan_grid": (status, [c.c_void_p] + [c.POINTER(c.c_int32)] * 4),
        "sparge_attn_plan_backend": (status, [c.c_void_p, c.POINTER(c.c_int)]),
        "sparge_attn_run": (status, [c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p,
                                     c.POINTER(HeadParams), c.POINTER(Outputs), c.c_void_p, c.c_size_t, c.c_void_p]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def check(status):
    """Raises SpargeAttnError with the library's message for a failed status."""
    if status != OK:
        message = library().sparge_attn_last_error().decode("utf-8", "replace")
        raise SpargeAttnError(status, f"{message} [{STATUS_NAMES.get(status, status)}]")


def version():
    """The library's version text, e.g. '1.0.0 (cuda)'."""
    return library().sparge_attn_version_string().decode()


class Plan:
    """An owned sparge_attn_plan: its grid, backend and workspace size, read once."""

    def __init__(self, problem):
        lib = library()
        handle = ctypes.c_void_p()
        check(lib.sparge_attn_plan_create(ctypes.byref(problem), ctypes.byref(handle)))
        self.handle = handle
        self._destroy = lib.sparge_attn_plan_destroy
        size = ctypes.c_size_t()
        check(lib.sparge_attn_plan_workspace_size(handle, ctypes.byref(size)))
        self.workspace_bytes = size.value
        nq, nk, bq, bk = (ctypes.c_int32() for _ in range(4))
        check(lib.sparge_attn_plan_grid(handle, ctypes.byref(nq), ctypes.byref(nk), ctypes.byref(bq), ctypes.byref(bk)))
        self.nq, self.nk, self.block_q, self.block_k = nq.value, nk.value, bq.value, bk.value
        backend = ctypes.c_int()
        check(lib.sparge_attn_plan_backend(handle, ctypes.byref(backend)))
        self.backend = backend.value

    def __del__(self):
        if getattr(self, "handle", None):
            self._destroy(self.handle)
            self.handle = None
