"""The single-pass moment kernel: one read of the rows for every weighting statistic.

:func:`accumulate` reads the reward, the logging propensity and the target propensities of
``P`` candidates once, block by block, and accumulates, per candidate ``j`` (and per group when
an integer group code is given per row), the statistics that IPS, clipped IPS, SNIPS, the
logging value, their paired comparisons and the weight diagnostics are read from:

* the means of ``a = w (r - c)`` and ``b = w`` for the raw weights ``w = t / p`` and for the
  clipped weights ``min(w, max_weight)``, about a reward shift ``c``;
* their centred co-moments ``sum (a - abar)^2``, ``sum (a - abar)(b - bbar)``,
  ``sum (b - bbar)^2`` and the cross-moments with the reward, ``sum (a - abar)(r - rbar)`` and
  ``sum (b - bbar)(r - rbar)`` (so that the standard error of a candidate minus the logging
  policy needs no second pass);
* the reward's mean and centred sum of squares, the largest weight, the number of clipped rows,
  and the smallest/largest reward, logging and target propensity (the input checks ride on the
  same pass);
* with sampling (Horvitz-Thompson) weights ``s``, as extra accumulators of the same pass
  (:class:`Weighted`): the means and centred sums of ``s`` and ``s (r - c)``, and per candidate
  and raw/clipped weights the means of ``s w (r - c)`` and ``s w`` with their centred co-moments
  among themselves and with ``s`` (what the Hajek ratios and their linearized standard errors
  read), merged by the same update. They are in real units (not rescaled), and an ungrouped pass
  that needs only them (``plain=False``) skips the unweighted co-moments.

Each block (:data:`BLOCK_ROWS` rows) is held in cache while it is centred exactly (its means,
then the centred sums), and blocks merge by the pairwise update of Chan, Golub & LeVeque, so no
variance is ever formed as a difference of raw sums of squares, and statistics of record
batches or Dask partitions merge into those of the union (:func:`merge`).

**Scale.** Every statistic is kept in units of powers of two chosen from the data: the reward in
units of ``2**r_exp``, the weights of candidate ``j`` in units of ``2**w_exp[s, j]``. Values in
``[2**-200, 2**200]`` (any reward or weight that arises in practice) are left unscaled, so the
numbers are those of plain float64 arithmetic; a block with a larger reward (up to 1.8e308) or
a smaller propensity (weights up to :data:`ope._validation.MAX_FINITE_WEIGHT`) is rescaled before
anything is summed or squared, and merging brings both sides to the larger unit. Scaling by a
power of two is exact, so rescaled results equal the unscaled ones wherever those are finite.

**Backends.** The loops are compiled with numba when it is installed (the optional extra
``fast``; imported on first use, compiled functions cached on disk next to this module or, for a
read-only install, in numba's user cache, else compiled per process). Without numba, or with the
environment variable ``OPE_KERNEL=numpy`` (or :func:`set_backend`), a vectorized numpy
implementation of the same algorithm runs in larger blocks; both give the same numbers to about
1e-13 relative (summation order differs).

References
----------
.. [1] T. F. Chan, G. H. Golub and R. J. LeVeque, "Updating formulae and a pairwise algorithm for
   computing sample variances", COMPSTAT 1982.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final

import numpy as np

__all__ = [
    "BLOCK_ROWS",
    "NUMPY_BLOCK_ROWS",
    "SAFE_EXPONENT",
    "KERNEL_ENV",
    "Moments",
    "Weighted",
    "Checks",
    "N_WHEAD",
    "N_COMOMENTS",
    "MOMENT_FIELDS",
    "empty_weighted",
    "accumulate",
    "accumulate_outcomes",
    "merge",
    "empty",
    "backend",
    "set_backend",
    "numba_available",
    "compiled_loops",
    "THREADS_ENV",
    "PARALLEL_MIN_ROWS",
    "threads",
    "caller_threads",
    "set_threads",
    "row_ranges",
    "run_threads",
    "column_access",
    "column_addresses",
    "key_range",
]

#: Rows per block of the compiled kernel: the (P, rows) float64 weight block of 8 candidates is
#: 512 KB, so it stays in a 1 MB L2 cache between the pass that forms it and the pass that
#: centres it, and the per-block work (scales, the merge) is spread over many rows (8192 rows
#: made the pass 5-15 % faster than 2048 on a 2-core AMD EPYC, at one and at 8 candidates).
#: Fixed, not divided by P, so that a candidate's numbers do not depend on how many others are
#: evaluated with it; the result does not depend on it beyond rounding.
BLOCK_ROWS: Final = 8192

#: Rows per block of the numpy fallback, whose per-block cost is a few dozen numpy calls: with
#: 2**15 rows that overhead is under 5 % of the arithmetic, and the (8, rows) blocks (2 MB each)
#: still fit the L2/L3 caches. Fixed, not divided by P, so a candidate's numbers do not depend on
#: how many others are evaluated with it.
NUMPY_BLOCK_ROWS: Final = 1 << 15

#: Values whose magnitude lies in [2**-SAFE_EXPONENT, 2**SAFE_EXPONENT] are used unscaled:
#: products of two of them, squared and summed over 2**33 rows, stay below 2**900 (and above the
#: subnormal range), far from overflow.
SAFE_EXPONENT: Final = 200

#: Environment variable that forces a backend: ``numpy`` (the fallback) or ``numba``.
KERNEL_ENV: Final = "OPE_KERNEL"

#: Environment variable that sets the compiled pass's number of threads (see :func:`threads`).
THREADS_ENV: Final = "OPE_KERNEL_THREADS"

#: Fewest rows per thread of the compiled pass: below ``2 * PARALLEL_MIN_ROWS`` rows the pass
#: runs on one thread (starting a thread costs about 0.1 ms; 2**17 rows take about 3 ms).
PARALLEL_MIN_ROWS: Final = 1 << 17

#: Largest power of two the logging propensities of a block are multiplied by: p * 2**1020 is
#: finite for every p <= 1.
_P_SCALE_MAX: Final = 1020

#: Range of the scale exponents: 2**-e stays a normal float64 for e in [-1000, 1022] (a
#: subnormal value below 2**-1000 is scaled up by 2**1000 only, which keeps it finite).
_EXP_MIN: Final = -1000
_EXP_MAX: Final = 1022

_SAFE_HIGH: Final = math.ldexp(1.0, SAFE_EXPONENT)
_SAFE_LOW: Final = math.ldexp(1.0, -SAFE_EXPONENT)
_FLOAT_MAX: Final = float(np.finfo(np.float64).max)

#: Number of co-moments per (weights, candidate): aa, ab, bb, ar, br (with sampling weights
#: also aa, ab, bb, a s, b s of the weighted components).
N_COMOMENTS: Final = 5

#: Entries of the policy-free head of the sampling-weighted statistics: the means of ``s`` and
#: ``s (r - shift)`` and their centred sums ``ss``, ``s u``, ``u u``.
N_WHEAD: Final = 5


# ============================================================================================
# results
# ============================================================================================
@dataclass(frozen=True, eq=False)
class Moments:
    """Scaled, centred statistics of ``G`` groups of rows (``G = 1`` without group codes).

    With ``u_r = 2**r_exp[g]`` and ``u_w = 2**w_exp[g, s, j]`` (``s = 0`` raw weights, ``1``
    clipped), ``a = w (r - shift[g])`` is held in units of ``u_w u_r`` and ``b = w`` in units of
    ``u_w``; the reward deviations ``r - shift`` in units of ``u_r``.

    Attributes
    ----------
    n : (G,) float64
        Rows per group.
    shift : (G,) float64
        The reward shift ``c`` (real units).
    r_exp : (G,) float64
        Exponent of the reward unit (an integer).
    r_mean, r_m2 : (G,) float64
        Mean and centred sum of squares of ``(r - shift) / u_r``.
    w_exp : (G, 2, P) float64
        Exponents of the weight units (integers).
    mean : (G, 2, 2, P) float64
        ``mean[g, s, 0, j]``: mean of ``a / (u_w u_r)``; ``mean[g, s, 1, j]``: of ``b / u_w``.
    com : (G, 2, 5, P) float64
        Centred sums ``aa, ab, bb, ar, br`` (``r`` the reward deviation), each in its units.
    max_w : (G, P) float64
        Largest raw weight (real units).
    n_clipped : (G, P) float64
        Rows whose weight exceeds ``max_weight``.
    """

    n: np.ndarray
    shift: np.ndarray
    r_exp: np.ndarray
    r_mean: np.ndarray
    r_m2: np.ndarray
    w_exp: np.ndarray
    mean: np.ndarray
    com: np.ndarray
    max_w: np.ndarray
    n_clipped: np.ndarray
    #: the sampling-weighted statistics (only when the pass was given sampling weights)
    weighted: Weighted | None = None

    @property
    def n_groups(self) -> int:
        return int(self.n.shape[0])

    @property
    def n_policies(self) -> int:
        return int(self.mean.shape[-1])

    def group(self, g: int) -> Moments:
        """The statistics of group ``g`` alone (as a one-group Moments; views)."""
        sl = slice(g, g + 1)
        wt = self.weighted
        return Moments(
            self.n[sl],
            self.shift[sl],
            self.r_exp[sl],
            self.r_mean[sl],
            self.r_m2[sl],
            self.w_exp[sl],
            self.mean[sl],
            self.com[sl],
            self.max_w[sl],
            self.n_clipped[sl],
            None if wt is None else Weighted(wt.head[sl], wt.mean[sl], wt.com[sl], wt.s_range[sl]),
        )


@dataclass(frozen=True, eq=False)
class Weighted:
    """The sampling-weighted statistics of ``G`` groups of rows, in real units (not rescaled).

    For rows with sampling weights ``s`` and reward deviations ``r - shift`` (the shift of the
    :class:`Moments` they belong to), the components ``u0 = s``, ``u1 = s (r - shift)`` and, per
    candidate ``j`` and ``k = 0`` (raw weights ``w``) or ``1`` (clipped ``min(w, max_weight)``),
    ``a = s w (r - shift)`` and ``b = s w``.

    Attributes
    ----------
    head : (G, 5) float64
        Means of ``u0`` and ``u1``, then the centred sums ``u0 u0``, ``u0 u1``, ``u1 u1``.
    mean : (G, 2, 2, P) float64
        ``mean[g, k, 0, j]``: mean of ``a``; ``mean[g, k, 1, j]``: of ``b``.
    com : (G, 2, 5, P) float64
        Centred sums ``aa, ab, bb, a u0, b u0``.
    s_range : (G, 2) float64
        Smallest and largest sampling weight.
    """

    head: np.ndarray
    mean: np.ndarray
    com: np.ndarray
    s_range: np.ndarray


#: The fields of :class:`Moments` that hold statistics (all but ``weighted``), in order.
MOMENT_FIELDS: Final = tuple(f.name for f in fields(Moments) if f.name != "weighted")


def empty_weighted(n_pol: int, n_groups: int = 1) -> Weighted:
    """Sampling-weighted statistics of no rows."""
    g, p = n_groups, n_pol
    return Weighted(
        np.zeros((g, N_WHEAD)),
        np.zeros((g, 2, 2, p)),
        np.zeros((g, 2, N_COMOMENTS, p)),
        np.column_stack([np.full(g, np.inf), np.full(g, -np.inf)]),
    )


#: The sampling-weighted arrays of a pass without sampling weights (no groups, no policies:
#: nothing is read or written), shared by every such call.
_NO_WEIGHTED: Final = empty_weighted(0, 0)


@dataclass(frozen=True)
class Checks:
    """What the pass saw of its inputs (for the validation done after it).

    ``finite`` is False when any reward, propensity or weight was NaN or infinite (the sums then
    are); ``r_min``/``r_max`` are the reward's range, ``p_min``/``p_max`` the logging
    propensities', ``t_min``/``t_max`` (P,) the target propensities' (NaN-blind: NaN shows in
    ``finite``).
    """

    finite: bool
    r_min: float
    r_max: float
    p_min: float
    p_max: float
    t_min: np.ndarray
    t_max: np.ndarray


def empty(n_pol: int, n_groups: int = 1, *, weighted: bool = False) -> Moments:
    """Statistics of no rows (with empty sampling-weighted ones when ``weighted``)."""
    g, p = n_groups, n_pol
    return Moments(
        np.zeros(g),
        np.zeros(g),
        np.zeros(g),
        np.zeros(g),
        np.zeros(g),
        np.zeros((g, 2, p)),
        np.zeros((g, 2, 2, p)),
        np.zeros((g, 2, N_COMOMENTS, p)),
        _filled((g, p), -np.inf),
        np.zeros((g, p)),
        empty_weighted(p, g) if weighted else None,
    )


def _filled(shape: tuple[int, ...], value: float, dtype: Any = np.float64) -> np.ndarray:
    """``np.full(shape, value)``, by two C calls: the kernel's per-call set-up touches as little
    code as it can (a call after other work has emptied the caches pays for every function it
    touches, about a microsecond warm but tens cold)."""
    out = np.empty(shape, dtype=dtype)
    out.fill(value)
    return out


# ============================================================================================
# backend selection
# ============================================================================================
_state: dict[str, Any] = {"forced": None, "numba": None, "failed": None, "threads": None}


def numba_available() -> bool:
    """True when numba is installed (the optional extra ``fast``); nothing is imported."""
    import importlib.util

    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


def set_backend(name: str | None) -> None:
    """Force the ``"numba"`` or ``"numpy"`` backend for this process; ``None``: automatic.

    Raises
    ------
    ope.ParameterError
        An unknown name, or ``"numba"`` when numba is not installed.
    """
    from ope.exceptions import ParameterError

    if name not in (None, "numba", "numpy"):
        raise ParameterError(f"kernel backend must be 'numba', 'numpy' or None; got {name!r}.")
    if name == "numba" and not numba_available():
        raise ParameterError("the numba backend needs numba: pip install 'ope-toolkit[fast]'.")
    _state["forced"] = name


def backend() -> str:
    """The backend the next call uses: ``"numba"`` or ``"numpy"``.

    Order: :func:`set_backend`, then the environment variable ``OPE_KERNEL``, then numba when
    it imports and compiles, else numpy.
    """
    forced = _state["forced"] or os.environ.get(KERNEL_ENV, "").strip().lower() or None
    if forced == "numpy":
        return "numpy"
    if forced not in (None, "numba"):
        return "numpy"
    return "numba" if _compiled() is not None else "numpy"


def set_threads(n: int | None) -> None:
    """Use ``n`` threads for the compiled pass in this process; ``None``: automatic.

    Raises
    ------
    ope.ParameterError
        ``n`` is not a positive integer.
    """
    from ope.exceptions import ParameterError

    if n is not None and (isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1):
        raise ParameterError(f"kernel threads must be a positive integer or None; got {n!r}.")
    _state["threads"] = None if n is None else int(n)


def threads() -> int:
    """The number of threads a large compiled pass uses.

    Order: :func:`set_threads`, then the environment variable ``OPE_KERNEL_THREADS`` (a
    positive integer), then the CPUs this process may run on. The rows are split into that many
    contiguous ranges of whole blocks, each accumulated on its own thread and merged in row
    order, so the numbers equal the one-thread pass's to rounding (about 1e-15 relative). Only
    calls from the main thread split: a call from another thread (Dask's threaded workers, a
    caller's own pool) already shares the cores and runs on one thread, and so does a pass of
    fewer than ``2 * PARALLEL_MIN_ROWS`` rows.
    """
    forced = _state.get("threads")
    if forced is not None:
        return int(forced)
    env = os.environ.get(THREADS_ENV, "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def caller_threads() -> int:
    """The threads a call made from this thread may use: :func:`threads` from the main thread;
    1 from any other (Dask's threaded workers, a caller's own pool: they already share the
    cores)."""
    if threading.current_thread() is not threading.main_thread():
        return 1
    return threads()


def _threads_for(n: int) -> int:
    return max(1, min(caller_threads(), n // PARALLEL_MIN_ROWS))


def _compiled() -> Any:
    """The compiled functions (compiled on first use), or None without numba."""
    if _state["numba"] is not None:
        return _state["numba"]
    if _state["failed"] is not None:
        return None
    # one thread compiles; the others (Dask's threaded workers call the kernel at once) wait
    # for it instead of compiling the already compiled globals a second time
    with _COMPILE_LOCK:
        if _state["numba"] is not None:
            return _state["numba"]
        if _state["failed"] is not None:
            return None
        try:
            numba = _import_numba()
        except ImportError as exc:
            _state["failed"] = str(exc)
            return None
        _state["numba"] = _jit(numba)
    return _state["numba"]


_COMPILE_LOCK: Final = threading.Lock()


def _import_numba() -> Any:
    """``import numba``, with a module that only shares the name ``coverage`` (a script on
    ``sys.path``, e.g. ``benchmarks/coverage.py``) hidden: numba imports ``coverage`` and fails
    on anything but coverage.py itself (a package)."""
    import importlib.util
    import sys

    missing = object()
    shadow = sys.modules.get("coverage", missing)
    if shadow is missing:
        try:
            spec = importlib.util.find_spec("coverage")
        except (ImportError, ValueError):
            spec = None
        fake = spec is not None and spec.submodule_search_locations is None
    else:
        fake = shadow is not None and not hasattr(shadow, "types")
    if fake:
        sys.modules["coverage"] = None  # type: ignore[assignment]  # `import coverage` fails
    try:
        import numba
        import numba.misc.coverage_support  # noqa: F401
    finally:
        if fake:
            if shadow is missing:
                del sys.modules["coverage"]
            else:
                sys.modules["coverage"] = shadow  # type: ignore[assignment]
    return numba


def _jit(numba: Any) -> dict[str, Any]:
    """Compile the loop functions below with numba, replacing their module globals (the
    compiled functions call each other through them)."""
    # The row loops (_FAST_FUNCTIONS) use every fast-math flag, which lets their sums, minima and
    # maxima vectorize; NaN or infinite inputs still propagate into the sums (the hardware does
    # that whatever the compiler assumes), and the finiteness of the merged statistics is checked
    # in Python after the pass. The others keep IEEE semantics (no 'nnan'/'ninf'), so their NaN
    # tests hold, and none uses 'arcp': t / p stays a division.
    exact = {"reassoc", "contract", "nsz"}
    g = globals()
    _make_access(numba)  # under the compile lock, held by the caller
    g["_nb_pointer"], g["_nb_carray"] = _ACCESS["as_pointer"], _ACCESS["carray"]
    g["_nb_bits"] = _ACCESS["as_bits"]
    out = {}
    for name in _NUMBA_FUNCTIONS:
        opts = {
            "nogil": True,
            "error_model": "numpy",  # x / 0 is inf, not an exception: lets the division vectorize
            "fastmath": True if name in _FAST_FUNCTIONS else exact,
        }
        jitted = _njit(numba, g[name], opts)
        g[name] = jitted
        out[name] = jitted
    return out


def column_access() -> tuple[Any, Any]:
    """``(as_pointer, carray)``: the compiled function turning an int64 address into a
    ``void *`` and ``numba.carray``, through which compiled loops read float64 columns passed
    as addresses (a typed list of arrays would be compiled in every process). The caller keeps
    the columns alive while a loop reads them. Needs numba (:func:`numba_available`)."""
    if "as_pointer" not in _ACCESS:
        with _COMPILE_LOCK:
            _make_access(_import_numba())
    return _ACCESS["as_pointer"], _ACCESS["carray"]


def column_addresses(columns: Sequence[np.ndarray]) -> np.ndarray:
    """The data addresses (int64) of arrays, for :func:`column_access` (the caller keeps the
    arrays alive while a loop reads them). Read off ``__array_interface__``: ``ndarray.ctypes``
    builds a helper object per array, tens of microseconds per call when the caches are cold.

    >>> import numpy as np
    >>> a = np.zeros(3)
    >>> int(column_addresses([a])[0]) == a.ctypes.data
    True
    """
    return np.array([c.__array_interface__["data"][0] for c in columns], dtype=np.int64)


def _make_access(numba: Any) -> None:
    """Fill :data:`_ACCESS` once (the caller holds the compile lock)."""
    if "as_pointer" not in _ACCESS:
        _ACCESS["as_pointer"] = _pointer_intrinsic(numba)
        _ACCESS["carray"] = numba.carray
        _ACCESS["as_bits"] = _bits_intrinsic(numba)


#: The pair :func:`column_access` returns, made once per process.
_ACCESS: dict[str, Any] = {}


def _pointer_intrinsic(numba: Any) -> Any:
    """A compiled function turning an int64 address into a ``void *`` (for ``numba.carray``):
    the columns reach the pass as addresses, not as a typed list."""
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def as_pointer(typingctx: Any, address: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.inttoptr(args[0], cgutils.voidptr_t)

        return types.voidptr(address), codegen

    return as_pointer


def _bits_intrinsic(numba: Any) -> Any:
    """A compiled function giving a float64's IEEE bit pattern as an int64 (a bit cast: no
    rounding). A loop's largest weight taken as the largest of these patterns (which order as
    the floats for w >= 0) vectorizes; a float maximum, with its NaN rules, does not (2.7
    against 0.75 ns per row in cache, measured)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def as_bits(typingctx: Any, x: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.bitcast(args[0], ir.IntType(64))

        return types.int64(types.float64), codegen

    return as_bits


def _njit(numba: Any, function: Callable[..., Any], opts: dict[str, Any]) -> Any:
    """``numba.njit(**opts)`` of a loop with the one cache policy: cached on disk next to its
    module (or in numba's user cache), compiled per process when no cache folder is writable."""
    py = getattr(function, "py_func", function)  # the Python function, even if compiled
    try:
        jitted = numba.njit(cache=True, **opts)(py)
        # a locator may be chosen without checking that its folder can be created (a
        # zipped install): check it now rather than fail at the first call
        locator = getattr(getattr(jitted._cache, "_impl", None), "locator", None)
        if locator is not None:
            locator.ensure_cache_path()
    except (RuntimeError, OSError):  # no writable cache location (read-only install)
        jitted = numba.njit(cache=False, **opts)(py)
    return jitted


#: The compiled loops of other modules (:func:`compiled_loops`), by owner.
_LOOPS: dict[str, dict[str, Any]] = {}


def compiled_loops(owner: str, functions: Sequence[Callable[..., Any]]) -> dict[str, Any] | None:
    """The compiled twins of another module's loops, by function name, or None when the
    :func:`backend` is numpy.

    The one registry of compiled code: the loops of ``owner`` (a module name) are compiled once
    per process, under the lock that serializes the kernel's own compilation (threads that ask
    at once wait for the first), with the kernel's cache policy and the options ``nogil``,
    ``error_model="numpy"`` and every fast-math flag (the loops must take finite inputs only).
    """
    if backend() != "numba":
        return None
    done = _LOOPS.get(owner)
    if done is not None:
        return done
    with _COMPILE_LOCK:
        done = _LOOPS.get(owner)
        if done is None:
            numba = _import_numba()  # backend() compiled the kernel, so numba imports
            opts = {"nogil": True, "fastmath": True, "error_model": "numpy"}
            done = {f.__name__: _njit(numba, f, opts) for f in functions}
            _LOOPS[owner] = done
    return done


# ============================================================================================
# the compiled loops (plain Python until _jit compiles them; never run uncompiled)
# ============================================================================================
#: Set by _jit before it compiles: an address as a ``void *``, ``numba.carray``, and a
#: float64's bit pattern as an int64.
_nb_pointer: Any = None
_nb_carray: Any = None
_nb_bits: Any = None


def _nb_scale_exponent(x):
    """0 when x (>= 0) needs no scaling, else the exponent e with x / 2**e in [0.5, 1)."""
    if x == 0.0 or (x >= _SAFE_LOW and x <= _SAFE_HIGH) or not (x <= _FLOAT_MAX):
        return 0
    e = math.frexp(x)[1]
    return max(min(e, _EXP_MAX), _EXP_MIN)


def _nb_units(rmax, pmin):
    """``(e_r, u_r, kp, 2**kp)`` of a block: the rewards' unit ``u_r = 2**-e_r`` from their
    largest magnitude (:func:`_nb_scale_exponent`) and the propensities' scale ``2**kp`` when the
    smallest is below the safe range."""
    er = _nb_scale_exponent(rmax)
    kp = 0
    if pmin > 0.0 and pmin < _SAFE_LOW:
        kp = min(-math.frexp(pmin)[1], _P_SCALE_MAX)
    return er, math.ldexp(1.0, -er), kp, math.ldexp(1.0, kp)


def _nb_scaled_sum(x, k, u):
    """sum x * u over the block (the rewards' sum when they need scaling)."""
    tot = 0.0
    for i in range(k):
        tot += x[i] * u
    return tot


def _nb_key_range(x):
    """Smallest and largest order key of the float64 bit patterns ``x`` (int64): ``v`` for
    ``v >= 0``, its magnitude's bits flipped below, so that keys order as the floats do and a
    NaN lies beyond the infinities (integer arithmetic: fast-math changes nothing)."""
    lo = np.int64(0x7FFFFFFFFFFFFFFF)
    hi = np.int64(-0x7FFFFFFFFFFFFFFF - 1)
    for i in range(x.shape[0]):
        v = x[i]
        key = v ^ ((v >> 63) & 0x7FFFFFFFFFFFFFFF)
        lo = min(lo, key)
        hi = max(hi, key)
    return lo, hi


def _nb_prepare(r, p, start, k, rb, drb, pb, hdr, chk, bits, fbits):
    """Pass over the block's rewards and propensities: scales, shift, reward deviations.

    Writes rb = r / u_r - c', drb = rb - mean(rb), pb = p * 2**kp and hdr = [c (real), e_r,
    mean(rb), sum drb^2, kp]. The ranges are reduced on the IEEE bit patterns (integer
    reductions vectorize, and NaN, signs and infinities stay visible whatever the fast-math
    flags): chk = [min and max of the reward's order key, min and max of p's order key]. The
    order key of a float's bits v is ``v ^ ((v >> 63) & 0x7FF...F)``: integers in the order of
    the floats (-0.0 just below +0.0), NaN beyond the infinities.
    ``bits``/``fbits`` are an int64 scratch array and its float64 view.
    """
    rs_ = r[start : start + k]
    ps_ = p[start : start + k]
    ri = rs_.view(np.int64)
    pi = ps_.view(np.int64)
    amax = np.int64(0)
    kmin = chk[0]
    kmax = chk[1]
    pmn = np.int64(0x7FFFFFFFFFFFFFFF)
    pmx = chk[3]
    tot = 0.0
    for i in range(k):
        v = ri[i]
        av = v & 0x7FFFFFFFFFFFFFFF
        amax = max(amax, av)
        key = v ^ ((v >> 63) & 0x7FFFFFFFFFFFFFFF)
        kmin = min(kmin, key)
        kmax = max(kmax, key)
        q = pi[i]
        q = q ^ ((q >> 63) & 0x7FFFFFFFFFFFFFFF)
        pmn = min(pmn, q)
        pmx = max(pmx, q)
        tot += rs_[i]
    chk[0] = kmin
    chk[1] = kmax
    chk[2] = min(chk[2], pmn)
    chk[3] = pmx
    bits[0] = amax
    bits[1] = pmn ^ ((pmn >> 63) & 0x7FFFFFFFFFFFFFFF)
    er, ur, kp, up = _nb_units(fbits[0], fbits[1])
    if er != 0:
        tot = _nb_scaled_sum(rs_, k, ur)
    c = tot / k
    tot = 0.0
    for i in range(k):
        v = rs_[i] * ur - c
        rb[i] = v
        tot += v
        pb[i] = ps_[i] * up
    rm = tot / k
    m2 = 0.0
    for i in range(k):
        d = rb[i] - rm
        drb[i] = d
        m2 += d * d
    hdr[0] = math.ldexp(c, er)
    hdr[1] = er
    hdr[2] = rm
    hdr[3] = m2
    hdr[4] = kp


def _nb_load(ts, ti, k, row, pb, j, tlo, thi):
    """row = ts / pb (the block's scaled weights of one policy); the range of ts's order keys."""
    lo = tlo[j]
    hi = thi[j]
    for i in range(k):
        v = ti[i]
        v = v ^ ((v >> 63) & 0x7FFFFFFFFFFFFFFF)
        lo = min(lo, v)
        hi = max(hi, v)
        row[i] = ts[i] / pb[i]
    tlo[j] = lo
    thi[j] = hi


#: Rows per tile of :func:`_nb_transpose`: a tile of a row-major (n, P) block (256 rows of
#: P = 8 float64: 16 KB) stays in the L1 cache while its P columns are read out of it.
_TRANSPOSE_TILE: Final = 256


def _nb_transpose(mat, start, k, wb):
    """wb[j, i] = mat[start + i, j]: the block of a C-ordered (n, P) matrix, one policy per
    row (strided reads, contiguous writes: faster than the other way round), tile by tile of
    _TRANSPOSE_TILE rows (each column read from a tile in L1, not from the whole block in L2:
    10M x 8 in ``estimate_many``, 1.9x -> 1.2x the column-major matrix)."""
    blk = mat[start : start + k]
    for lo in range(0, k, _TRANSPOSE_TILE):
        hi = min(lo + _TRANSPOSE_TILE, k)
        tile = blk[lo:hi]
        for j in range(blk.shape[1]):
            row = wb[j, lo:hi]
            col = tile[:, j]
            for i in range(hi - lo):
                row[i] = col[i]


def _nb_sums(row, rowi, k, rb, mw):
    """sum w rb, sum w, the largest w (from its bits: w >= 0) and the count above mw."""
    sa = 0.0
    sb = 0.0
    cnt = 0
    mx = np.int64(0)
    for i in range(k):
        w = row[i]
        sa += w * rb[i]
        sb += w
        cnt += 1 if w > mw else 0
        mx = max(mx, rowi[i])
    return sa, sb, mx, cnt


def _nb_clipped_sums(row, k, rb, mw):
    """sum min(w, mw) rb and sum min(w, mw)."""
    sa = 0.0
    sb = 0.0
    for i in range(k):
        w = min(row[i], mw)
        sa += w * rb[i]
        sb += w
    return sa, sb


def _nb_centre(row, k, rb, drb, mw, ma, mb, scale, out, s, j):
    """Centred co-moments of (min(w, mw) rb, min(w, mw)) over the block (pass 2)."""
    caa = 0.0
    cab = 0.0
    cbb = 0.0
    car = 0.0
    cbr = 0.0
    if scale == 1.0:
        for i in range(k):
            w = min(row[i], mw)
            da = w * rb[i] - ma
            db = w - mb
            dr = drb[i]
            caa += da * da
            cab += da * db
            cbb += db * db
            car += da * dr
            cbr += db * dr
    else:
        for i in range(k):
            w = min(row[i], mw)
            da = (w * rb[i] - ma) * scale
            db = (w - mb) * scale
            dr = drb[i]
            caa += da * da
            cab += da * db
            cbb += db * db
            car += da * dr
            cbr += db * dr
    out[s, 0, j] = caa
    out[s, 1, j] = cab
    out[s, 2, j] = cbb
    out[s, 3, j] = car
    out[s, 4, j] = cbr


def _nb_block(wb, wbi, k, rb, drb, kp, mw, has_clip, bm, bc, bexp, bmax, bclip, fbits, bits, plain):
    """Means and centred co-moments of every policy's raw and clipped weights in one block.

    ``wb`` holds the block's scaled weights t / (p 2**kp), one policy per row (``wbi``: its
    int64 view); ``mw`` is the clip level in those units (inf without clipping). Without
    ``plain`` only the largest weight and the clipped count are formed (the means and
    co-moments are left 0: a pass that needs only the sampling-weighted statistics).
    """
    n_pol = wb.shape[0]
    for j in range(n_pol):
        row = wb[j]
        sa, sb, mxb, cnt = _nb_sums(row, wbi[j], k, rb, mw)
        bits[2] = mxb
        mx = fbits[2]
        bmax[j] = math.ldexp(mx, kp)
        if not plain:
            bclip[j] = cnt if has_clip else 0.0
            for s in range(2):
                bm[s, 0, j] = 0.0
                bm[s, 1, j] = 0.0
                bexp[s, j] = 0.0
                for q in range(N_COMOMENTS):
                    bc[s, q, j] = 0.0
            continue
        ma = sa / k
        mb = sb / k
        ej = _nb_scale_exponent(mx)
        scale = math.ldexp(1.0, -ej)
        bm[0, 0, j] = ma * scale
        bm[0, 1, j] = mb * scale
        bexp[0, j] = kp + ej
        _nb_centre(row, k, rb, drb, np.inf, ma, mb, scale, bc, 0, j)
        if has_clip and cnt > 0:
            csa, csb = _nb_clipped_sums(row, k, rb, mw)
            cma = csa / k
            cmb = csb / k
            ejc = _nb_scale_exponent(mw)
            cscale = math.ldexp(1.0, -ejc)
            bm[1, 0, j] = cma * cscale
            bm[1, 1, j] = cmb * cscale
            bexp[1, j] = kp + ejc
            bclip[j] = cnt
            _nb_centre(row, k, rb, drb, mw, cma, cmb, cscale, bc, 1, j)
        else:
            bm[1, 0, j] = bm[0, 0, j]
            bm[1, 1, j] = bm[0, 1, j]
            bexp[1, j] = bexp[0, j]
            bclip[j] = 0.0
            for q in range(N_COMOMENTS):
                bc[1, q, j] = bc[0, q, j]


def _nb_single_keys(rs_, ri, pi, ti, k, chk, tlo, thi, bits):
    """Loop 1 of :func:`_nb_single`: the order-key ranges of the rewards, propensities and the
    candidate's propensities (as in :func:`_nb_prepare` and :func:`_nb_load`), the rewards' largest
    magnitude and smallest propensity (into ``bits``); returns the block's sum of rewards.

    It repeats :func:`_nb_prepare`'s first loop with the target's keys added, on purpose: that
    loop shared, with the target's keys taken in the weights' loop instead, made one candidate's
    pass 5-15 % slower (measured in one process, alternating)."""
    amax = np.int64(0)
    kmin = chk[0]
    kmax = chk[1]
    pmn = np.int64(0x7FFFFFFFFFFFFFFF)
    pmx = chk[3]
    lo = tlo[0]
    hi = thi[0]
    tot = 0.0
    for i in range(k):
        v = ri[i]
        av = v & 0x7FFFFFFFFFFFFFFF
        amax = max(amax, av)
        key = v ^ ((v >> 63) & 0x7FFFFFFFFFFFFFFF)
        kmin = min(kmin, key)
        kmax = max(kmax, key)
        q = pi[i]
        q = q ^ ((q >> 63) & 0x7FFFFFFFFFFFFFFF)
        pmn = min(pmn, q)
        pmx = max(pmx, q)
        u = ti[i]
        u = u ^ ((u >> 63) & 0x7FFFFFFFFFFFFFFF)
        lo = min(lo, u)
        hi = max(hi, u)
        tot += rs_[i]
    chk[0] = kmin
    chk[1] = kmax
    chk[2] = min(chk[2], pmn)
    chk[3] = pmx
    tlo[0] = lo
    thi[0] = hi
    bits[0] = amax
    bits[1] = pmn ^ ((pmn >> 63) & 0x7FFFFFFFFFFFFFFF)
    return tot


def _nb_single_load(rs_, ps_, ts, k, ur, c, up, rb, wb):
    """Loop 2 of :func:`_nb_single`: rb = r / u_r - c and the weights wb = t / (p 2**kp) (the
    arithmetic of :func:`_nb_prepare` and :func:`_nb_load`); returns the sum of rb."""
    tot = 0.0
    for i in range(k):
        v = rs_[i] * ur - c
        rb[i] = v
        tot += v
        wb[i] = ts[i] / (ps_[i] * up)
    return tot


def _nb_single_centre(row, k, rb, rm, mw, ma, mb, scale, out, s):
    """Loop 3 of :func:`_nb_single`: :func:`_nb_centre` with the reward deviations formed on the
    fly (rb - mean(rb), not stored); returns their sum of squares."""
    m2 = 0.0
    caa = 0.0
    cab = 0.0
    cbb = 0.0
    car = 0.0
    cbr = 0.0
    for i in range(k):
        w = min(row[i], mw)
        dr = rb[i] - rm
        m2 += dr * dr
        da = (w * rb[i] - ma) * scale
        db = (w - mb) * scale
        caa += da * da
        cab += da * db
        cbb += db * db
        car += da * dr
        cbr += db * dr
    out[s, 0, 0] = caa
    out[s, 1, 0] = cab
    out[s, 2, 0] = cbb
    out[s, 3, 0] = car
    out[s, 4, 0] = cbr
    return m2


#: Rows whose mean of ``w (r - r_0)`` shifts that term in :func:`_nb_single_sums`.
_PILOT_ROWS: Final = 16

#: How much larger a shifted sum of squares of :func:`_nb_single_sums` may be than the centred
#: one it gives (``S_xx / (S_xx - S_x**2 / k)``) before the block is redone by the two-pass
#: loops: the centred sum then keeps its relative error within about ``2**8`` times that of
#: the block's sums (about 2**8 machine epsilons, 6e-14), far inside the 1e-12 the paths
#: agree to.
_SHIFT_RATIO_MAX: Final = 256.0


def _nb_single_sums(rs_, ri, ps_, pi, ts, ti, k, kr, ka, kb, chk, tlo, thi, bits, out):
    """One read of a block of one candidate: the order-key ranges (as in
    :func:`_nb_single_keys`), the largest weight's bits (``bits[2]``), and the shifted sums
    ``out`` = [S_r, S_rr, S_a, S_b, S_aa, S_ab, S_bb, S_ar, S_br] of ``dr = r - kr``,
    ``da = w dr - ka`` and ``db = w - kb`` (w = t / p): sums of squares and products about
    shifts, from which :func:`_nb_single` forms the centred co-moments without a second loop."""
    amax = np.int64(0)
    kmin = chk[0]
    kmax = chk[1]
    pmn = np.int64(0x7FFFFFFFFFFFFFFF)
    pmx = chk[3]
    lo = tlo[0]
    hi = thi[0]
    mx = np.int64(0)
    s_r = 0.0
    s_rr = 0.0
    s_a = 0.0
    s_b = 0.0
    s_aa = 0.0
    s_ab = 0.0
    s_bb = 0.0
    s_ar = 0.0
    s_br = 0.0
    for i in range(k):
        v = ri[i]
        amax = max(amax, v & 0x7FFFFFFFFFFFFFFF)
        key = v ^ ((v >> 63) & 0x7FFFFFFFFFFFFFFF)
        kmin = min(kmin, key)
        kmax = max(kmax, key)
        q = pi[i]
        q = q ^ ((q >> 63) & 0x7FFFFFFFFFFFFFFF)
        pmn = min(pmn, q)
        pmx = max(pmx, q)
        u = ti[i]
        u = u ^ ((u >> 63) & 0x7FFFFFFFFFFFFFFF)
        lo = min(lo, u)
        hi = max(hi, u)
        w = ts[i] / ps_[i]
        mx = max(mx, _nb_bits(w))
        dr = rs_[i] - kr
        da = w * dr - ka
        db = w - kb
        s_r += dr
        s_rr += dr * dr
        s_a += da
        s_b += db
        s_aa += da * da
        s_ab += da * db
        s_bb += db * db
        s_ar += da * dr
        s_br += db * dr
    chk[0] = kmin
    chk[1] = kmax
    chk[2] = min(chk[2], pmn)
    chk[3] = pmx
    tlo[0] = lo
    thi[0] = hi
    bits[0] = amax
    bits[1] = pmn ^ ((pmn >> 63) & 0x7FFFFFFFFFFFFFFF)
    bits[2] = mx
    out[0] = s_r
    out[1] = s_rr
    out[2] = s_a
    out[3] = s_b
    out[4] = s_aa
    out[5] = s_ab
    out[6] = s_bb
    out[7] = s_ar
    out[8] = s_br


def _nb_single_clipped(rs_, ps_, ts, k, kr, ka, kb, mw, out):
    """The clipped twin of :func:`_nb_single_sums`, on a block in cache: the shifted sums
    ``out[2:]`` = [S_a, S_b, S_aa, S_ab, S_bb, S_ar, S_br] of ``da = min(w, mw) dr - ka`` and
    ``db = min(w, mw) - kb`` (``dr = r - kr``); returns the count of weights above ``mw``."""
    cnt = 0
    s_a = 0.0
    s_b = 0.0
    s_aa = 0.0
    s_ab = 0.0
    s_bb = 0.0
    s_ar = 0.0
    s_br = 0.0
    for i in range(k):
        w = ts[i] / ps_[i]
        cnt += 1 if w > mw else 0
        c = min(w, mw)
        dr = rs_[i] - kr
        da = c * dr - ka
        db = c - kb
        s_a += da
        s_b += db
        s_aa += da * da
        s_ab += da * db
        s_bb += db * db
        s_ar += da * dr
        s_br += db * dr
    out[2] = s_a
    out[3] = s_b
    out[4] = s_aa
    out[5] = s_ab
    out[6] = s_bb
    out[7] = s_ar
    out[8] = s_br
    return cnt


def _nb_single(
    r,
    p,
    ts,
    start,
    k,
    max_weight,
    has_clip,
    rb,
    wb,
    wbi,
    hdr,
    chk,
    tlo,
    thi,
    bits,
    fbits,
    bm,
    bc,
    bexp,
    bmax,
    bclip,
    sums,
):
    """One candidate's block (given as a column, no groups, no sampling weights): the
    statistics of :func:`_nb_prepare`, :func:`_nb_load` and :func:`_nb_block`.

    One read of the block (:func:`_nb_single_sums`) gives sums about shifts (the first row's
    reward and weight, and the mean of ``w (r - r_0)`` over the first :data:`_PILOT_ROWS`
    rows), turned into the centred co-moments by ``S_xy - S_x S_y / k``. That loop runs at the
    speed of reading the three columns: one candidate, 1M rows, caches cold, one thread, the
    whole pass 1.65 ms against 2.35 ms for the two-pass loops, where ``np.sum`` of the three
    columns takes 1.0 ms (medians of 15 calls, 2026-12-07). With a clip level, the clipped
    sums come from a second loop over the block while it is in cache
    (:func:`_nb_single_clipped`), so that the raw statistics are the same with or without a
    clip level.

    The block is redone by the two-pass loops (:func:`_nb_single_exact`) when the rewards or
    propensities need scaling, when the largest weight is beyond the safe range, and when a
    shift lies so far from its mean that the subtraction would cost more than a factor
    :data:`_SHIFT_RATIO_MAX` in accuracy; the clipped statistics alone are redone in two
    passes about the same shift when theirs would. Every block keeps the accuracy of the
    two-pass loops to about 1e-13. Inputs that the range checks reject after the pass (NaN,
    infinite, a zero propensity) may take either path: the fast-math sums promise nothing for
    them, and the checks refuse them whatever the sums are. The rewards' shift is the
    first reward instead of their mean: the merge takes any shift, only the rounding differs.
    """
    rs_ = r[start : start + k]
    ps_ = p[start : start + k]
    kr = rs_[0]
    m = min(k, _PILOT_ROWS)
    kb = ts[0] / ps_[0]
    ka = 0.0
    for i in range(m):
        ka += ts[i] / ps_[i] * (rs_[i] - kr)
    ka /= m
    _nb_single_sums(
        rs_,
        rs_.view(np.int64),
        ps_,
        ps_.view(np.int64),
        ts,
        ts.view(np.int64),
        k,
        kr,
        ka,
        kb,
        chk,
        tlo,
        thi,
        bits,
        sums,
    )
    er, _, kp, _ = _nb_units(fbits[0], fbits[1])
    mx = fbits[2]
    lim = _SHIFT_RATIO_MAX
    s_r, s_rr, s_a, s_b = sums[0], sums[1], sums[2], sums[3]
    s_aa, s_ab, s_bb, s_ar, s_br = sums[4], sums[5], sums[6], sums[7], sums[8]
    m2 = s_rr - s_r * s_r / k
    caa = s_aa - s_a * s_a / k
    cbb = s_bb - s_b * s_b / k
    if (
        er == 0
        and kp == 0
        and _nb_scale_exponent(mx) == 0
        and s_rr <= lim * m2
        and s_aa <= lim * caa
        and s_bb <= lim * cbb
    ):
        rm = s_r / k
        hdr[0] = kr
        hdr[1] = 0.0
        hdr[2] = rm
        hdr[3] = m2
        hdr[4] = 0.0
        bmax[0] = mx
        bm[0, 0, 0] = ka + s_a / k
        bm[0, 1, 0] = kb + s_b / k
        bexp[0, 0] = 0.0
        bc[0, 0, 0] = caa
        bc[0, 1, 0] = s_ab - s_a * s_b / k
        bc[0, 2, 0] = cbb
        bc[0, 3, 0] = s_ar - s_a * s_r / k
        bc[0, 4, 0] = s_br - s_b * s_r / k
        cnt = 0
        if has_clip and mx > max_weight:
            kbc = min(kb, max_weight)
            kac = 0.0
            for i in range(m):
                kac += min(ts[i] / ps_[i], max_weight) * (rs_[i] - kr)
            kac /= m
            cnt = _nb_single_clipped(rs_, ps_, ts, k, kr, kac, kbc, max_weight, sums)
        if cnt == 0:  # nothing clipped: the clipped statistics are the raw ones
            bm[1, 0, 0] = bm[0, 0, 0]
            bm[1, 1, 0] = bm[0, 1, 0]
            bexp[1, 0] = 0.0
            bclip[0] = 0.0
            for q in range(N_COMOMENTS):
                bc[1, q, 0] = bc[0, q, 0]
            return
        bclip[0] = cnt
        c_a, c_b = sums[2], sums[3]
        c_aa, c_ab, c_bb, c_ar, c_br = sums[4], sums[5], sums[6], sums[7], sums[8]
        ccaa = c_aa - c_a * c_a / k
        ccbb = c_bb - c_b * c_b / k
        if _nb_scale_exponent(max_weight) == 0 and c_aa <= lim * ccaa and c_bb <= lim * ccbb:
            bm[1, 0, 0] = kac + c_a / k
            bm[1, 1, 0] = kbc + c_b / k
            bexp[1, 0] = 0.0
            bc[1, 0, 0] = ccaa
            bc[1, 1, 0] = c_ab - c_a * c_b / k
            bc[1, 2, 0] = ccbb
            bc[1, 3, 0] = c_ar - c_a * s_r / k
            bc[1, 4, 0] = c_br - c_b * s_r / k
            return
        # the clipped statistics in two passes about the same shift (the raw ones stay)
        _nb_single_load(rs_, ps_, ts, k, 1.0, kr, 1.0, rb, wb)
        _nb_single_clipped_centre(wb, k, rb, rm, max_weight, 0, bm, bc, bexp)
        return
    _nb_single_exact(
        r,
        p,
        ts,
        start,
        k,
        max_weight,
        has_clip,
        rb,
        wb,
        wbi,
        hdr,
        chk,
        tlo,
        thi,
        bits,
        fbits,
        bm,
        bc,
        bexp,
        bmax,
        bclip,
    )


def _nb_single_clipped_centre(wb, k, rb, rm, mw, kp, bm, bc, bexp):
    """The clipped statistics of one candidate's block in two passes over its weights ``wb``
    and reward deviations ``rb`` (in cache): means, scale and centred co-moments."""
    csa, csb = _nb_clipped_sums(wb, k, rb, mw)
    cma = csa / k
    cmb = csb / k
    ejc = _nb_scale_exponent(mw)
    cscale = math.ldexp(1.0, -ejc)
    bm[1, 0, 0] = cma * cscale
    bm[1, 1, 0] = cmb * cscale
    bexp[1, 0] = kp + ejc
    _nb_single_centre(wb, k, rb, rm, mw, cma, cmb, cscale, bc, 1)


def _nb_single_exact(
    r,
    p,
    ts,
    start,
    k,
    max_weight,
    has_clip,
    rb,
    wb,
    wbi,
    hdr,
    chk,
    tlo,
    thi,
    bits,
    fbits,
    bm,
    bc,
    bexp,
    bmax,
    bclip,
):
    """:func:`_nb_prepare`, :func:`_nb_load` and :func:`_nb_block` of one candidate in four
    loops over the block instead of six, and two block buffers instead of four (the same
    statistics, units and row order of every sum): (1) the order-key ranges and the sum of the
    rewards, (2) the scaled centred rewards and the weights, (3) the weights' sums, (4) the
    centred co-moments with the reward deviations formed on the fly. With several candidates
    the shared preparation pays off; with one (a block :func:`_nb_single` cannot take in one
    read) it is the cost.
    """
    rs_ = r[start : start + k]
    ps_ = p[start : start + k]
    tot = _nb_single_keys(
        rs_, rs_.view(np.int64), ps_.view(np.int64), ts.view(np.int64), k, chk, tlo, thi, bits
    )
    er, ur, kp, up = _nb_units(fbits[0], fbits[1])
    mw = math.ldexp(max_weight, -kp) if has_clip else np.inf
    if er != 0:
        tot = _nb_scaled_sum(rs_, k, ur)
    c = tot / k
    rm = _nb_single_load(rs_, ps_, ts, k, ur, c, up, rb, wb) / k
    sa, sb, mxb, cnt = _nb_sums(wb, wbi, k, rb, mw)
    bits[2] = mxb
    mx = fbits[2]
    hdr[0] = math.ldexp(c, er)
    hdr[1] = er
    hdr[2] = rm
    hdr[4] = kp
    bmax[0] = math.ldexp(mx, kp)
    ma = sa / k
    mb = sb / k
    ej = _nb_scale_exponent(mx)
    scale = math.ldexp(1.0, -ej)
    bm[0, 0, 0] = ma * scale
    bm[0, 1, 0] = mb * scale
    bexp[0, 0] = kp + ej
    hdr[3] = _nb_single_centre(wb, k, rb, rm, np.inf, ma, mb, scale, bc, 0)
    if has_clip and cnt > 0:
        bclip[0] = cnt
        _nb_single_clipped_centre(wb, k, rb, rm, mw, kp, bm, bc, bexp)
    else:
        bm[1, 0, 0] = bm[0, 0, 0]
        bm[1, 1, 0] = bm[0, 1, 0]
        bexp[1, 0] = bexp[0, 0]
        bclip[0] = 0.0
        for q in range(N_COMOMENTS):
            bc[1, q, 0] = bc[0, q, 0]


def _nb_merge(an, ahdr, aexp, am, ac, amax, aclip, g, bn, bhdr, bexp, bm, bc, bmax, bclip):
    """Merge one block's (or group's) statistics into group ``g`` of the accumulator.

    ``ahdr[g]``/``bhdr`` = [shift (real), r_exp, r_mean, r_m2]. Both sides are brought to the
    larger units (exact powers of two), the block is re-expressed about the accumulator's shift
    (a -> a + d b), then Chan et al.'s pairwise update adds the co-moments.
    """
    n_pol = am.shape[-1]
    na = an[g]
    if bn == 0.0:
        return
    if na == 0.0:
        an[g] = bn
        for q in range(4):
            ahdr[g, q] = bhdr[q]
        for s in range(2):
            for j in range(n_pol):
                aexp[g, s, j] = bexp[s, j]
                am[g, s, 0, j] = bm[s, 0, j]
                am[g, s, 1, j] = bm[s, 1, j]
                for q in range(N_COMOMENTS):
                    ac[g, s, q, j] = bc[s, q, j]
        for j in range(n_pol):
            amax[g, j] = bmax[j]
            aclip[g, j] = bclip[j]
        return
    ea = ahdr[g, 1]
    eb = bhdr[1]
    e = ea if ea > eb else eb
    fa = math.ldexp(1.0, int(ea - e))
    fb = math.ldexp(1.0, int(eb - e))
    ue = math.ldexp(1.0, -int(e))
    d = bhdr[0] * ue - ahdr[g, 0] * ue
    n = na + bn
    frac = bn / n
    cross = na * bn / n
    ra = ahdr[g, 2] * fa
    rb = bhdr[2] * fb + d
    dr = rb - ra
    ahdr[g, 2] = ra + dr * frac
    ahdr[g, 3] = ahdr[g, 3] * fa * fa + bhdr[3] * fb * fb + dr * dr * cross
    ahdr[g, 1] = e
    for s in range(2):
        for j in range(n_pol):
            wa = aexp[g, s, j]
            wb_ = bexp[s, j]
            w = wa if wa > wb_ else wb_
            ga = math.ldexp(1.0, int(wa - w))
            gb = math.ldexp(1.0, int(wb_ - w))
            xa = fa * ga
            xb = fb * gb
            ma_a = am[g, s, 0, j] * xa
            mb_a = am[g, s, 1, j] * ga
            ma_b = bm[s, 0, j] * xb
            mb_b = bm[s, 1, j] * gb
            caa_a = ac[g, s, 0, j] * xa * xa
            cab_a = ac[g, s, 1, j] * xa * ga
            cbb_a = ac[g, s, 2, j] * ga * ga
            car_a = ac[g, s, 3, j] * xa * fa
            cbr_a = ac[g, s, 4, j] * ga * fa
            caa_b = bc[s, 0, j] * xb * xb
            cab_b = bc[s, 1, j] * xb * gb
            cbb_b = bc[s, 2, j] * gb * gb
            car_b = bc[s, 3, j] * xb * fb
            cbr_b = bc[s, 4, j] * gb * fb
            # the block about the accumulator's shift: a_b + d b_b
            ma_b = ma_b + d * mb_b
            caa_b = caa_b + 2.0 * d * cab_b + d * d * cbb_b
            cab_b = cab_b + d * cbb_b
            car_b = car_b + d * cbr_b
            da = ma_b - ma_a
            db = mb_b - mb_a
            am[g, s, 0, j] = ma_a + da * frac
            am[g, s, 1, j] = mb_a + db * frac
            ac[g, s, 0, j] = caa_a + caa_b + da * da * cross
            ac[g, s, 1, j] = cab_a + cab_b + da * db * cross
            ac[g, s, 2, j] = cbb_a + cbb_b + db * db * cross
            ac[g, s, 3, j] = car_a + car_b + da * dr * cross
            ac[g, s, 4, j] = cbr_a + cbr_b + db * dr * cross
            aexp[g, s, j] = w
    for j in range(n_pol):
        amax[g, j] = amax[g, j] if amax[g, j] > bmax[j] else bmax[j]
        aclip[g, j] += bclip[j]
    an[g] = n


def _nb_merge_parts(an, ahdr, aexp, am, ac, amax, aclip, bn, bhdr, bexp, bm, bc, bmax, bclip):
    """Merge the statistics of a second range of rows into the first, group by group
    (:func:`_nb_merge`; the compiled form of :func:`merge` without sampling weights)."""
    for g in range(an.shape[0]):
        _nb_merge(
            an,
            ahdr,
            aexp,
            am,
            ac,
            amax,
            aclip,
            g,
            bn[g],
            bhdr[g],
            bexp[g],
            bm[g],
            bc[g],
            bmax[g],
            bclip[g],
        )


def _nb_grouped_block(
    wb,
    k,
    codes,
    start,
    rb,
    kp,
    mw,
    has_clip,
    present,
    gcnt,
    gsr,
    gm2,
    gsa,
    gsb,
    gmx,
    gcsa,
    gcsb,
    gcnt_clip,
    gcom,
    drb,
    an,
    ahdr,
    aexp,
    am,
    ac,
    amax,
    aclip,
    c_real,
    er,
    bm,
    bc,
    bexp,
    bmax,
    bclip,
    bhdr,
):
    """One block with a group code per row: per-group means, centred sums, merged per group."""
    n_pol = wb.shape[0]
    n_present = 0
    for i in range(k):
        g = codes[start + i]
        if gcnt[g] == 0.0:
            present[n_present] = g
            n_present += 1
        gcnt[g] += 1.0
        gsr[g] += rb[i]
    for i in range(k):
        g = codes[start + i]
        d = rb[i] - gsr[g] / gcnt[g]
        drb[i] = d
        gm2[g] += d * d
    for j in range(n_pol):
        for i in range(k):
            g = codes[start + i]
            w = wb[j, i]
            gsa[g, j] += w * rb[i]
            gsb[g, j] += w
            gmx[g, j] = w if w > gmx[g, j] else gmx[g, j]
            if has_clip:
                gcnt_clip[g, j] += 1.0 if w > mw else 0.0
                w = w if w < mw else mw
                gcsa[g, j] += w * rb[i]
                gcsb[g, j] += w
    # pass 2: deviations from the group means, scaled per group by the largest (clipped) weight
    for j in range(n_pol):
        for i in range(k):
            g = codes[start + i]
            cnt = gcnt[g]
            sr = math.ldexp(1.0, -_nb_scale_exponent(gmx[g, j]))
            w = wb[j, i]
            da = (w * rb[i] - gsa[g, j] / cnt) * sr
            db = (w - gsb[g, j] / cnt) * sr
            dr = drb[i]
            gcom[g, 0, 0, j] += da * da
            gcom[g, 0, 1, j] += da * db
            gcom[g, 0, 2, j] += db * db
            gcom[g, 0, 3, j] += da * dr
            gcom[g, 0, 4, j] += db * dr
            if has_clip:
                top = gmx[g, j] if gmx[g, j] < mw else mw
                sc = math.ldexp(1.0, -_nb_scale_exponent(top))
                w = w if w < mw else mw
                da = (w * rb[i] - gcsa[g, j] / cnt) * sc
                db = (w - gcsb[g, j] / cnt) * sc
                gcom[g, 1, 0, j] += da * da
                gcom[g, 1, 1, j] += da * db
                gcom[g, 1, 2, j] += db * db
                gcom[g, 1, 3, j] += da * dr
                gcom[g, 1, 4, j] += db * dr
    for q in range(n_present):
        g = present[q]
        cnt = gcnt[g]
        bhdr[0] = c_real
        bhdr[1] = er
        bhdr[2] = gsr[g] / cnt
        bhdr[3] = gm2[g]
        for j in range(n_pol):
            mx = gmx[g, j]
            e0 = _nb_scale_exponent(mx)
            s0 = math.ldexp(1.0, -e0)
            bm[0, 0, j] = gsa[g, j] / cnt * s0
            bm[0, 1, j] = gsb[g, j] / cnt * s0
            bexp[0, j] = kp + e0
            bmax[j] = math.ldexp(mx, kp)
            for c in range(N_COMOMENTS):
                bc[0, c, j] = gcom[g, 0, c, j]
            if has_clip:
                top = mx if mx < mw else mw
                e1 = _nb_scale_exponent(top)
                s1 = math.ldexp(1.0, -e1)
                bm[1, 0, j] = gcsa[g, j] / cnt * s1
                bm[1, 1, j] = gcsb[g, j] / cnt * s1
                bexp[1, j] = kp + e1
                bclip[j] = gcnt_clip[g, j]
                for c in range(N_COMOMENTS):
                    bc[1, c, j] = gcom[g, 1, c, j]
            else:
                bm[1, 0, j] = bm[0, 0, j]
                bm[1, 1, j] = bm[0, 1, j]
                bexp[1, j] = bexp[0, j]
                bclip[j] = 0.0
                for c in range(N_COMOMENTS):
                    bc[1, c, j] = bc[0, c, j]
        _nb_merge(an, ahdr, aexp, am, ac, amax, aclip, g, cnt, bhdr, bexp, bm, bc, bmax, bclip)
        # reset this group's scratch for the next block
        gcnt[g] = 0.0
        gsr[g] = 0.0
        gm2[g] = 0.0
        for j in range(n_pol):
            gsa[g, j] = 0.0
            gsb[g, j] = 0.0
            gmx[g, j] = 0.0
            gcsa[g, j] = 0.0
            gcsb[g, j] = 0.0
            gcnt_clip[g, j] = 0.0
            for s in range(2):
                for c in range(N_COMOMENTS):
                    gcom[g, s, c, j] = 0.0


def _nb_wcentre(row, k, sr, ssw, dsb, mw, ma, mb, out, s, j):
    """Centred co-moments of the weighted components ``a = min(w, mw) sr`` and
    ``b = min(w, mw) ssw`` with each other and with ``s`` (deviations ``dsb``)."""
    caa = 0.0
    cab = 0.0
    cbb = 0.0
    cas = 0.0
    cbs = 0.0
    for i in range(k):
        w = min(row[i], mw)
        da = w * sr[i] - ma
        db = w * ssw[i] - mb
        ds = dsb[i]
        caa += da * da
        cab += da * db
        cbb += db * db
        cas += da * ds
        cbs += db * ds
    out[s, 0, j] = caa
    out[s, 1, j] = cab
    out[s, 2, j] = cbb
    out[s, 3, j] = cas
    out[s, 4, j] = cbs


def _nb_wsums(row, rowi, k, sr, ssw, mw):
    """sum w sr, sum w ssw, the largest w (from its bits, ``rowi``: w >= 0, as in
    :func:`_nb_sums`, which vectorizes) and the count above mw."""
    sa = 0.0
    sb = 0.0
    cnt = 0
    mx = np.int64(0)
    for i in range(k):
        w = row[i]
        sa += w * sr[i]
        sb += w * ssw[i]
        cnt += 1 if w > mw else 0
        mx = max(mx, rowi[i])
    return sa, sb, mx, cnt


def _nb_wclipped_sums(row, k, sr, ssw, mw):
    """sum min(w, mw) sr and sum min(w, mw) ssw."""
    sa = 0.0
    sb = 0.0
    for i in range(k):
        w = min(row[i], mw)
        sa += w * sr[i]
        sb += w * ssw[i]
    return sa, sb


def _nb_wstats(s, rb, fr, w2d, k, fw, mw, has_clip, su, sr, ssw, dsb, bwh, bwm, bwc, bsr, bwx):
    """The sampling-weighted statistics of ``k`` rows (real units, about the block's shift).

    ``s`` the sampling weights, ``rb`` the reward deviations in units ``fr = 2**e_r``, ``w2d``
    (P, >= k) the scaled weights (real weight = ``w2d * fw``), ``mw`` the clip level in those
    units; ``su``, ``sr``, ``ssw``, ``dsb`` are scratch. Writes ``bwh`` (5,), ``bwm`` (2, 2, P),
    ``bwc`` (2, 5, P), the range of ``s`` into ``bsr`` (2,) and, per policy, the largest
    scaled weight and the number of rows above ``mw`` into ``bwx`` (2, P).
    """
    t0 = 0.0
    t1 = 0.0
    lo = np.inf
    hi = -np.inf
    for i in range(k):
        si = s[i]
        u = si * (rb[i] * fr)
        su[i] = u
        sr[i] = u * fw
        ssw[i] = si * fw
        t0 += si
        t1 += u
        lo = min(lo, si)
        hi = max(hi, si)
    m0 = t0 / k
    m1 = t1 / k
    c00 = 0.0
    c01 = 0.0
    c11 = 0.0
    for i in range(k):
        d0 = s[i] - m0
        d1 = su[i] - m1
        dsb[i] = d0
        c00 += d0 * d0
        c01 += d0 * d1
        c11 += d1 * d1
    bwh[0] = m0
    bwh[1] = m1
    bwh[2] = c00
    bwh[3] = c01
    bwh[4] = c11
    bsr[0] = lo
    bsr[1] = hi
    xbits = np.zeros(1, dtype=np.int64)
    xfloat = xbits.view(np.float64)
    for j in range(w2d.shape[0]):
        row = w2d[j]
        sa, sb, mxb, cnt = _nb_wsums(row, row.view(np.int64), k, sr, ssw, mw)
        xbits[0] = mxb
        bwx[0, j] = xfloat[0]
        bwx[1, j] = cnt
        ma = sa / k
        mb = sb / k
        bwm[0, 0, j] = ma
        bwm[0, 1, j] = mb
        _nb_wcentre(row, k, sr, ssw, dsb, np.inf, ma, mb, bwc, 0, j)
        if has_clip and cnt > 0:
            sa, sb = _nb_wclipped_sums(row, k, sr, ssw, mw)
            ma = sa / k
            mb = sb / k
            bwm[1, 0, j] = ma
            bwm[1, 1, j] = mb
            _nb_wcentre(row, k, sr, ssw, dsb, mw, ma, mb, bwc, 1, j)
        else:
            bwm[1, 0, j] = bwm[0, 0, j]
            bwm[1, 1, j] = bwm[0, 1, j]
            for q in range(N_COMOMENTS):
                bwc[1, q, j] = bwc[0, q, j]


def _nb_wmerge(an, ahdr, g, bn, bshift, bwh, bwm, bwc, bsr, awh, awm, awc, asr):
    """Merge a block's sampling-weighted statistics into group ``g`` (call it before
    :func:`_nb_merge`, which updates ``an`` and the shift): the block is re-expressed about the
    group's shift (``u1 -> u1 + d u0``, ``a -> a + d b``), then Chan et al.'s update."""
    n_pol = awm.shape[-1]
    na = an[g]
    if bn == 0.0:
        return
    asr[g, 0] = min(asr[g, 0], bsr[0])
    asr[g, 1] = max(asr[g, 1], bsr[1])
    if na == 0.0:
        for q in range(N_WHEAD):
            awh[g, q] = bwh[q]
        for s in range(2):
            for j in range(n_pol):
                awm[g, s, 0, j] = bwm[s, 0, j]
                awm[g, s, 1, j] = bwm[s, 1, j]
                for q in range(N_COMOMENTS):
                    awc[g, s, q, j] = bwc[s, q, j]
        return
    d = bshift - ahdr[g, 0]
    n = na + bn
    frac = bn / n
    cross = na * bn / n
    m0 = bwh[0]
    m1 = bwh[1] + d * m0
    c00 = bwh[2]
    c01 = bwh[3] + d * c00
    c11 = bwh[4] + 2.0 * d * bwh[3] + d * d * c00
    d0 = m0 - awh[g, 0]
    d1 = m1 - awh[g, 1]
    awh[g, 0] += d0 * frac
    awh[g, 1] += d1 * frac
    awh[g, 2] += c00 + d0 * d0 * cross
    awh[g, 3] += c01 + d0 * d1 * cross
    awh[g, 4] += c11 + d1 * d1 * cross
    for s in range(2):
        for j in range(n_pol):
            mb = bwm[s, 1, j]
            ma = bwm[s, 0, j] + d * mb
            caa = bwc[s, 0, j]
            cab = bwc[s, 1, j]
            cbb = bwc[s, 2, j]
            cas = bwc[s, 3, j]
            cbs = bwc[s, 4, j]
            caa = caa + 2.0 * d * cab + d * d * cbb
            cab = cab + d * cbb
            cas = cas + d * cbs
            da = ma - awm[g, s, 0, j]
            db = mb - awm[g, s, 1, j]
            awm[g, s, 0, j] += da * frac
            awm[g, s, 1, j] += db * frac
            awc[g, s, 0, j] += caa + da * da * cross
            awc[g, s, 1, j] += cab + da * db * cross
            awc[g, s, 2, j] += cbb + db * db * cross
            awc[g, s, 3, j] += cas + da * d0 * cross
            awc[g, s, 4, j] += cbs + db * d0 * cross


def _nb_grouped_wblock(
    wb,
    k,
    codes,
    start,
    s,
    rb,
    fr,
    fw,
    mw,
    has_clip,
    bshift,
    an,
    ahdr,
    awh,
    awm,
    awc,
    asr,
    gcount,
    goff,
    perm,
    gs,
    grb,
    gw,
    su,
    sr,
    ssw,
    dsb,
    bwh,
    bwm,
    bwc,
    bsr,
    bwx,
):
    """The sampling-weighted statistics of one block with a group code per row: the rows are
    sorted by group (a counting sort in the block), each group's gathered and merged into it
    (before :func:`_nb_grouped_block` merges the unweighted ones)."""
    n_pol = wb.shape[0]
    n_present = 0
    for i in range(k):
        g = codes[start + i]
        if gcount[g] == 0:
            gs[n_present] = g  # the present groups, first-seen order (gs is free here)
            n_present += 1
        gcount[g] += 1
    present = np.empty(n_present, dtype=np.int64)
    pos = 0
    for q in range(n_present):
        g = int(gs[q])
        present[q] = g
        goff[g] = pos
        pos += gcount[g]
    for i in range(k):
        g = codes[start + i]
        perm[goff[g]] = i
        goff[g] += 1
    for q in range(n_present):
        g = present[q]
        kg = gcount[g]
        lo = goff[g] - kg
        for i in range(kg):
            src = perm[lo + i]
            gs[i] = s[start + src]
            grb[i] = rb[src]
        for j in range(n_pol):
            for i in range(kg):
                gw[j, i] = wb[j, perm[lo + i]]
        _nb_wstats(gs, grb, fr, gw, kg, fw, mw, has_clip, su, sr, ssw, dsb, bwh, bwm, bwc, bsr, bwx)
        _nb_wmerge(an, ahdr, g, float(kg), bshift, bwh, bwm, bwc, bsr, awh, awm, awc, asr)
        gcount[g] = 0


def _nb_run(
    r,
    p,
    cols,
    mat,
    use_mat,
    codes,
    n_groups,
    max_weight,
    has_clip,
    block,
    an,
    ahdr,
    aexp,
    am,
    ac,
    amax,
    aclip,
    tlo,
    thi,
    chk,
    sw,
    awh,
    awm,
    awc,
    asr,
    plain,
    lo,
    hi,
):
    """The pass over rows ``[lo, hi)``: blocks of ``block`` rows, each prepared, weighted,
    centred and merged.

    ``cols`` (int64, P: the addresses of contiguous float64 columns, which the caller keeps
    alive; a typed list would be compiled in every process) or ``mat`` (a C-ordered (n, P)
    float64 array) holds the target propensities; ``codes`` (int64, empty when ungrouped) the
    group of each row. ``tlo``/``thi`` (int64, P) and ``chk`` (int64, 4) collect the bit-pattern
    ranges of the inputs. ``sw`` (float64, empty without sampling weights) holds the rows'
    sampling weights, and ``awh``, ``awm``, ``awc``, ``asr`` the sampling-weighted statistics
    (:class:`Weighted`'s arrays) they accumulate into; without ``plain`` (ungrouped passes with
    sampling weights only) the unweighted means and co-moments are not formed. Row indices are
    absolute (``codes`` and ``sw`` are the whole arrays), so that several threads can run
    disjoint ranges of the same arrays into their own accumulators.
    """
    n = hi - lo
    n_pol = tlo.shape[0]
    rows = block if n > block else max(n, 1)
    wb = np.empty((n_pol, rows))
    wbi = wb.view(np.int64)
    tb = np.empty((n_pol if use_mat else 0, rows))
    tbi = tb.view(np.int64)
    rb = np.empty(rows)
    drb = np.empty(rows)
    pb = np.empty(rows)
    hdr = np.empty(5)
    sums = np.empty(9)
    bits = np.zeros(4, dtype=np.int64)
    fbits = bits.view(np.float64)
    bm = np.empty((2, 2, n_pol))
    bc = np.empty((2, N_COMOMENTS, n_pol))
    bexp = np.empty((2, n_pol))
    bmax = np.empty(n_pol)
    bclip = np.empty(n_pol)
    grouped = codes.shape[0] > 0
    gsize = n_groups if grouped else 1
    present = np.empty(rows, dtype=np.int64)
    gcnt = np.zeros(gsize)
    gsr = np.zeros(gsize)
    gm2 = np.zeros(gsize)
    gsa = np.zeros((gsize, n_pol))
    gsb = np.zeros((gsize, n_pol))
    gmx = np.zeros((gsize, n_pol))
    gcsa = np.zeros((gsize, n_pol))
    gcsb = np.zeros((gsize, n_pol))
    gcc = np.zeros((gsize, n_pol))
    gcom = np.zeros((gsize, 2, N_COMOMENTS, n_pol))
    gdrb = np.empty(rows)
    bhdr = np.empty(4)
    weighted = sw.shape[0] > 0
    wrows = rows if weighted else 0
    su = np.empty(wrows)
    sr = np.empty(wrows)
    ssw = np.empty(wrows)
    dsb = np.empty(wrows)
    bwh = np.empty(N_WHEAD)
    bwm = np.empty((2, 2, n_pol))
    bwc = np.empty((2, N_COMOMENTS, n_pol))
    bsr = np.empty(2)
    bwx = np.empty((2, n_pol))
    wg = wrows if grouped else 0
    gcount = np.zeros(gsize if weighted and grouped else 0, dtype=np.int64)
    goff = np.zeros(gsize if weighted and grouped else 0, dtype=np.int64)
    perm = np.empty(wg, dtype=np.int64)
    gs = np.empty(wg)
    grb = np.empty(wg)
    gw = np.empty((n_pol, wg))
    # one candidate given as a column, no groups, no sampling weights: the fused block
    single = n_pol == 1 and not use_mat and not grouped and not weighted and plain
    for start in range(lo, hi, rows):
        k = min(rows, hi - start)
        if single:
            ts = _nb_carray(_nb_pointer(cols[0] + 8 * start), k, np.float64)
            _nb_single(
                r,
                p,
                ts,
                start,
                k,
                max_weight,
                has_clip,
                rb,
                wb[0],
                wbi[0],
                hdr,
                chk,
                tlo,
                thi,
                bits,
                fbits,
                bm,
                bc,
                bexp,
                bmax,
                bclip,
                sums,
            )
            for q in range(4):
                bhdr[q] = hdr[q]
            _nb_merge(
                an, ahdr, aexp, am, ac, amax, aclip, 0, float(k), bhdr, bexp, bm, bc, bmax, bclip
            )
            continue
        _nb_prepare(r, p, start, k, rb, drb, pb, hdr, chk, bits, fbits)
        kp = int(hdr[4])
        mw = math.ldexp(max_weight, -kp) if has_clip else np.inf
        if use_mat:  # the block's rows are contiguous: transpose them in cache, then divide
            # (into a separate buffer: divided in place, the load loop would not vectorize)
            _nb_transpose(mat, start, k, tb)
            for j in range(n_pol):
                _nb_load(tb[j], tbi[j], k, wb[j], pb, j, tlo, thi)
        else:
            for j in range(n_pol):
                ts = _nb_carray(_nb_pointer(cols[j] + 8 * start), k, np.float64)
                _nb_load(ts, ts.view(np.int64), k, wb[j], pb, j, tlo, thi)
        if weighted:
            fr = math.ldexp(1.0, int(hdr[1]))
            fw = math.ldexp(1.0, kp)
            if grouped:
                _nb_grouped_wblock(
                    wb,
                    k,
                    codes,
                    start,
                    sw,
                    rb,
                    fr,
                    fw,
                    mw,
                    has_clip,
                    hdr[0],
                    an,
                    ahdr,
                    awh,
                    awm,
                    awc,
                    asr,
                    gcount,
                    goff,
                    perm,
                    gs,
                    grb,
                    gw,
                    su,
                    sr,
                    ssw,
                    dsb,
                    bwh,
                    bwm,
                    bwc,
                    bsr,
                    bwx,
                )
            else:
                _nb_wstats(
                    sw[start : start + k],
                    rb,
                    fr,
                    wb,
                    k,
                    fw,
                    mw,
                    has_clip,
                    su,
                    sr,
                    ssw,
                    dsb,
                    bwh,
                    bwm,
                    bwc,
                    bsr,
                    bwx,
                )
                _nb_wmerge(an, ahdr, 0, float(k), hdr[0], bwh, bwm, bwc, bsr, awh, awm, awc, asr)
        if grouped:
            _nb_grouped_block(
                wb,
                k,
                codes,
                start,
                rb,
                kp,
                mw,
                has_clip,
                present,
                gcnt,
                gsr,
                gm2,
                gsa,
                gsb,
                gmx,
                gcsa,
                gcsb,
                gcc,
                gcom,
                gdrb,
                an,
                ahdr,
                aexp,
                am,
                ac,
                amax,
                aclip,
                hdr[0],
                hdr[1],
                bm,
                bc,
                bexp,
                bmax,
                bclip,
                bhdr,
            )
        else:
            if plain:
                _nb_block(
                    wb,
                    wbi,
                    k,
                    rb,
                    drb,
                    kp,
                    mw,
                    has_clip,
                    bm,
                    bc,
                    bexp,
                    bmax,
                    bclip,
                    fbits,
                    bits,
                    plain,
                )
            else:  # the weighted pass found the largest weights and the clipped counts
                for j in range(n_pol):
                    bmax[j] = math.ldexp(bwx[0, j], kp)
                    bclip[j] = bwx[1, j] if has_clip else 0.0
                    for s in range(2):
                        bm[s, 0, j] = 0.0
                        bm[s, 1, j] = 0.0
                        bexp[s, j] = 0.0
                        for q in range(N_COMOMENTS):
                            bc[s, q, j] = 0.0
            for q in range(4):
                bhdr[q] = hdr[q]
            _nb_merge(
                an, ahdr, aexp, am, ac, amax, aclip, 0, float(k), bhdr, bexp, bm, bc, bmax, bclip
            )


def _nb_run_outcomes(
    rs,
    n_rows,
    p,
    cols,
    mat,
    use_mat,
    max_weight,
    has_clip,
    block,
    an,
    ahdr,
    aexp,
    am,
    ac,
    amax,
    aclip,
    tlo,
    thi,
    chk,
    lo,
    hi,
):
    """The pass of :func:`_nb_run` (ungrouped, without sampling weights) for ``L`` outcomes on
    the same weights: ``rs`` (int64, L) holds the addresses of the outcomes' contiguous float64
    columns of ``n_rows`` values (the caller keeps them alive), and every accumulator has a
    leading axis of length ``L`` (``an`` (L, 1), ``ahdr`` (L, 1, 4), ..., ``chk`` (L, 4)).

    Each block's weights are formed once (the targets are read once) and each outcome's
    statistics are then those :func:`_nb_run` forms for that outcome alone: the same blocks,
    the same operations in the same order, so the same numbers.
    """
    n = hi - lo
    n_out = rs.shape[0]
    n_pol = tlo.shape[0]
    rows = block if n > block else max(n, 1)
    wb = np.empty((n_pol, rows))
    wbi = wb.view(np.int64)
    tb = np.empty((n_pol if use_mat else 0, rows))
    tbi = tb.view(np.int64)
    rb = np.empty((n_out, rows))
    drb = np.empty((n_out, rows))
    pb = np.empty(rows)
    hdr = np.empty((n_out, 5))
    bits = np.zeros(4, dtype=np.int64)
    fbits = bits.view(np.float64)
    bm = np.empty((2, 2, n_pol))
    bc = np.empty((2, N_COMOMENTS, n_pol))
    bexp = np.empty((2, n_pol))
    bmax = np.empty(n_pol)
    bclip = np.empty(n_pol)
    bhdr = np.empty(4)
    for start in range(lo, hi, rows):
        k = min(rows, hi - start)
        for o in range(n_out):  # the same propensities: every outcome's pb and kp are equal
            r = _nb_carray(_nb_pointer(rs[o]), n_rows, np.float64)
            _nb_prepare(r, p, start, k, rb[o], drb[o], pb, hdr[o], chk[o], bits, fbits)
        kp = int(hdr[0, 4])
        mw = math.ldexp(max_weight, -kp) if has_clip else np.inf
        if use_mat:
            _nb_transpose(mat, start, k, tb)
            for j in range(n_pol):
                _nb_load(tb[j], tbi[j], k, wb[j], pb, j, tlo, thi)
        else:
            for j in range(n_pol):
                ts = _nb_carray(_nb_pointer(cols[j] + 8 * start), k, np.float64)
                _nb_load(ts, ts.view(np.int64), k, wb[j], pb, j, tlo, thi)
        for o in range(n_out):
            _nb_block(
                wb,
                wbi,
                k,
                rb[o],
                drb[o],
                kp,
                mw,
                has_clip,
                bm,
                bc,
                bexp,
                bmax,
                bclip,
                fbits,
                bits,
                True,
            )
            for q in range(4):
                bhdr[q] = hdr[o, q]
            _nb_merge(
                an[o],
                ahdr[o],
                aexp[o],
                am[o],
                ac[o],
                amax[o],
                aclip[o],
                0,
                float(k),
                bhdr,
                bexp,
                bm,
                bc,
                bmax,
                bclip,
            )


_NUMBA_FUNCTIONS: Final = (
    "_nb_scale_exponent",
    "_nb_key_range",
    "_nb_units",
    "_nb_prepare",
    "_nb_load",
    "_nb_transpose",
    "_nb_sums",
    "_nb_clipped_sums",
    "_nb_centre",
    "_nb_block",
    "_nb_scaled_sum",
    "_nb_single_keys",
    "_nb_single_load",
    "_nb_single_centre",
    "_nb_single_sums",
    "_nb_single_clipped",
    "_nb_single_clipped_centre",
    "_nb_single_exact",
    "_nb_single",
    "_nb_merge",
    "_nb_merge_parts",
    "_nb_grouped_block",
    "_nb_wcentre",
    "_nb_wsums",
    "_nb_wclipped_sums",
    "_nb_wstats",
    "_nb_wmerge",
    "_nb_grouped_wblock",
    "_nb_run",
    "_nb_run_outcomes",
)
#: The row loops, compiled with every fast-math flag (see _jit).
_FAST_FUNCTIONS: Final = frozenset(
    {
        "_nb_key_range",
        "_nb_prepare",
        "_nb_single_keys",
        "_nb_single_load",
        "_nb_single_centre",
        "_nb_single_sums",
        "_nb_single_clipped",
        "_nb_scaled_sum",
        "_nb_load",
        "_nb_transpose",
        "_nb_sums",
        "_nb_clipped_sums",
        "_nb_centre",
        "_nb_wcentre",
        "_nb_wsums",
        "_nb_wclipped_sums",
        "_nb_wstats",
    }
)


# ============================================================================================
# the numpy fallback: the same algorithm, vectorized over (P, rows) blocks
# ============================================================================================
def _np_scale_exponents(x: np.ndarray) -> np.ndarray:
    """Elementwise :func:`_nb_scale_exponent` (float64 exponents)."""
    x = np.asarray(x, dtype=np.float64)
    safe = (x == 0.0) | ((x >= _SAFE_LOW) & (x <= _SAFE_HIGH)) | ~(x <= _FLOAT_MAX)
    e = np.clip(np.frexp(x)[1], _EXP_MIN, _EXP_MAX).astype(np.float64)
    return np.where(safe, 0.0, e)


def _np_block(
    r: np.ndarray,
    p: np.ndarray,
    t: np.ndarray,
    max_weight: float | None,
    chk: np.ndarray,
    tlo: np.ndarray,
    thi: np.ndarray,
    codes: np.ndarray | None,
    n_groups: int,
    s: np.ndarray | None = None,
    plain: bool = True,
) -> Moments:
    """The statistics of one block: r (k,), p (k,), t (k, P) -> Moments of ``n_groups`` groups
    (one without ``codes``); with the sampling-weighted ones when ``s`` (k,) is given."""
    k, n_pol = t.shape
    r = r.astype(np.float64, copy=False)
    p = p.astype(np.float64, copy=False)
    ar = np.abs(r)
    rmax = float(ar.max())
    chk[1] = min(chk[1], float(r.min()))
    chk[2] = max(chk[2], float(r.max()))
    pmin = float(p.min())
    chk[3] = min(chk[3], pmin)
    chk[4] = max(chk[4], float(p.max()))
    er = int(_np_scale_exponents(np.array(rmax))) if math.isfinite(rmax) else 0
    kp = 0
    if 0.0 < pmin < _SAFE_LOW:
        kp = min(-math.frexp(pmin)[1], _P_SCALE_MAX)
    rs = r * math.ldexp(1.0, -er)
    c = float(np.add.reduce(rs)) / k
    rs = rs - c
    pb = p * math.ldexp(1.0, kp)
    tt = t.T
    tlo[:] = np.minimum(tlo, tt.min(axis=1))
    thi[:] = np.maximum(thi, tt.max(axis=1))
    w = np.divide(tt, pb, dtype=np.float64, order="C")  # (P, k), one policy per row
    mw = math.inf if max_weight is None else math.ldexp(max_weight, -kp)
    c_real = math.ldexp(c, er)
    if codes is None:
        return _np_stats(w, rs, mw, max_weight is not None, kp, er, c_real, chk, s, plain)
    out = empty(n_pol, n_groups, weighted=s is not None)
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=n_groups)
    ends = np.cumsum(counts)
    for g in np.flatnonzero(counts).tolist():  # a loop over groups, not rows
        idx = order[ends[g] - counts[g] : ends[g]]
        part = _np_stats(
            w[:, idx],
            rs[idx],
            mw,
            max_weight is not None,
            kp,
            er,
            c_real,
            chk,
            None if s is None else s[idx],
        )
        _np_assign(out, g, part)
    return out


def _np_assign(out: Moments, g: int, part: Moments) -> None:
    for name in MOMENT_FIELDS:
        getattr(out, name)[g] = getattr(part, name)[0]
    if out.weighted is not None and part.weighted is not None:
        for name in ("head", "mean", "com", "s_range"):
            getattr(out.weighted, name)[g] = getattr(part.weighted, name)[0]


def _np_weighted(
    w: np.ndarray, rs: np.ndarray, s: np.ndarray, mw: float, has_clip: bool, kp: int, er: int
) -> Weighted:
    """The sampling-weighted statistics (one group) of :func:`_nb_wstats`, vectorized."""
    n_pol, k = w.shape
    fr, fw = math.ldexp(1.0, er), math.ldexp(1.0, kp)
    su = s * (rs * fr)
    sr = su * fw
    ssw = s * fw
    m0, m1 = float(np.add.reduce(s)) / k, float(np.add.reduce(su)) / k
    d0, d1 = s - m0, su - m1
    head = np.array(
        [
            m0,
            m1,
            float(np.add.reduce(d0 * d0)),
            float(np.add.reduce(d0 * d1)),
            float(np.add.reduce(d1 * d1)),
        ]
    )
    mean = np.empty((2, 2, n_pol))
    com = np.empty((2, N_COMOMENTS, n_pol))

    def stats(wk: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a, b = wk * sr, wk * ssw
        ma, mb = _row_sums(a) / k, _row_sums(b) / k
        da, db = a - ma[:, None], b - mb[:, None]
        return (
            ma,
            mb,
            np.stack(
                [
                    _row_sums(da * da),
                    _row_sums(da * db),
                    _row_sums(db * db),
                    _row_sums(da * d0),
                    _row_sums(db * d0),
                ]
            ),
        )

    mean[0, 0], mean[0, 1], com[0] = stats(w)
    mean[1], com[1] = mean[0], com[0]
    if has_clip:
        over = np.flatnonzero(np.count_nonzero(w > mw, axis=1))
        if over.size:
            cma, cmb, ccom = stats(np.minimum(w[over], mw))
            mean[1, 0, over], mean[1, 1, over] = cma, cmb
            com[1][:, over] = ccom
    return Weighted(head[None], mean[None], com[None], np.array([[float(s.min()), float(s.max())]]))


def _np_centre(
    w: np.ndarray, rs: np.ndarray, dr: np.ndarray, ma: np.ndarray, mb: np.ndarray, scale: np.ndarray
) -> np.ndarray:
    """(5, P) centred sums aa, ab, bb, ar, br of (w rs, w) about (ma, mb), scaled per policy."""
    da = (w * rs - ma[:, None]) * scale[:, None]
    db = (w - mb[:, None]) * scale[:, None]
    # row reductions (pairwise sums of each policy's row): the same numbers whatever P is
    return np.stack(
        [
            _row_sums(da * da),
            _row_sums(da * db),
            _row_sums(db * db),
            _row_sums(da * dr),
            _row_sums(db * dr),
        ]
    )


def _row_sums(x: np.ndarray) -> np.ndarray:
    return np.add.reduce(x, axis=1)


def _np_stats(
    w: np.ndarray,
    rs: np.ndarray,
    mw: float,
    has_clip: bool,
    kp: int,
    er: int,
    c_real: float,
    chk: np.ndarray,
    s: np.ndarray | None = None,
    plain: bool = True,
) -> Moments:
    """Moments (one group) of the scaled weights ``w`` (P, k) and reward deviations ``rs``."""
    n_pol, k = w.shape
    rm = float(np.add.reduce(rs)) / k
    dr = rs - rm
    m2 = float(np.add.reduce(dr * dr))
    # row reductions, not BLAS or einsum: the same numbers whatever P is (and multithreaded
    # BLAS on many small products is slow on a busy machine)
    sa = _row_sums(w * rs)
    sb = np.add.reduce(w, axis=1)
    if not (
        np.all(np.abs(sa) <= _FLOAT_MAX)
        and np.all(np.abs(sb) <= _FLOAT_MAX)
        and abs(m2) <= _FLOAT_MAX
        and abs(c_real) <= _FLOAT_MAX
    ):
        chk[0] = 0.0
    mx = np.maximum.reduce(w, axis=1) if k else np.zeros(n_pol)
    mx = np.maximum(mx, 0.0)
    ma, mb = sa / k, sb / k
    e0 = _np_scale_exponents(mx)
    s0 = np.ldexp(1.0, -e0.astype(np.int64))
    mean = np.empty((2, 2, n_pol))
    com = np.empty((2, N_COMOMENTS, n_pol))
    wexp = np.empty((2, n_pol))
    mean[0, 0], mean[0, 1] = ma * s0, mb * s0
    com[0] = _np_centre(w, rs, dr, ma, mb, s0) if plain else 0.0
    wexp[0] = kp + e0
    mean[1], com[1], wexp[1] = mean[0], com[0], wexp[0]
    n_clip = np.zeros(n_pol)
    if has_clip:
        over = np.flatnonzero(mx > mw)
        if over.size and not plain:
            n_clip[over] = np.count_nonzero(w[over] > mw, axis=1)
        elif over.size:
            wc = w[over]
            n_clip[over] = np.count_nonzero(wc > mw, axis=1)
            wc = np.minimum(wc, mw)
            csa, csb = _row_sums(wc * rs), np.add.reduce(wc, axis=1)
            cma, cmb = csa / k, csb / k
            e1 = _np_scale_exponents(np.full(over.size, mw))
            s1 = np.ldexp(1.0, -e1.astype(np.int64))
            mean[1, 0, over], mean[1, 1, over] = cma * s1, cmb * s1
            com[1][:, over] = _np_centre(wc, rs, dr, cma, cmb, s1)
            wexp[1, over] = kp + e1
    with np.errstate(over="ignore"):
        max_w = np.ldexp(mx, kp)
    return Moments(
        np.array([float(k)]),
        np.array([c_real]),
        np.array([float(er)]),
        np.array([rm]),
        np.array([m2]),
        wexp[None],
        mean[None],
        com[None],
        max_w[None],
        n_clip[None],
        None if s is None else _np_weighted(w, rs, s, mw, has_clip, kp, er),
    )


def merge(a: Moments, b: Moments) -> Moments:
    """The statistics of the union of two disjoint sets of rows, group by group.

    Both sides are brought to the larger units (exact powers of two), ``b`` is re-expressed
    about ``a``'s shift (``a -> a + d b``: a linear map of the means and co-moments) and Chan et
    al.'s pairwise update adds the co-moments plus ``delta delta' n_a n_b / n``. Groups with no
    rows on one side are taken from the other.
    """
    na, nb = a.n, b.n
    n = na + nb
    e = np.maximum(a.r_exp, b.r_exp)
    fa = np.ldexp(1.0, (a.r_exp - e).astype(np.int64))
    fb = np.ldexp(1.0, (b.r_exp - e).astype(np.int64))
    ue = np.ldexp(1.0, (-e).astype(np.int64))
    d = b.shift * ue - a.shift * ue
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(n > 0, nb / np.where(n > 0, n, 1.0), 0.0)
    cross = np.where(n > 0, na * nb / np.where(n > 0, n, 1.0), 0.0)
    ra = a.r_mean * fa
    rb = b.r_mean * fb + d
    dr = rb - ra
    r_mean = ra + dr * frac
    r_m2 = a.r_m2 * fa * fa + b.r_m2 * fb * fb + dr * dr * cross
    w = np.maximum(a.w_exp, b.w_exp)  # (G, 2, P)
    ga = np.ldexp(1.0, (a.w_exp - w).astype(np.int64))
    gb = np.ldexp(1.0, (b.w_exp - w).astype(np.int64))
    fa3, fb3 = fa[:, None, None], fb[:, None, None]
    xa, xb = fa3 * ga, fb3 * gb
    ma_a, mb_a = a.mean[:, :, 0] * xa, a.mean[:, :, 1] * ga
    ma_b, mb_b = b.mean[:, :, 0] * xb, b.mean[:, :, 1] * gb
    ca = [
        a.com[:, :, 0] * xa * xa,
        a.com[:, :, 1] * xa * ga,
        a.com[:, :, 2] * ga * ga,
        a.com[:, :, 3] * xa * fa3,
        a.com[:, :, 4] * ga * fa3,
    ]
    cb = [
        b.com[:, :, 0] * xb * xb,
        b.com[:, :, 1] * xb * gb,
        b.com[:, :, 2] * gb * gb,
        b.com[:, :, 3] * xb * fb3,
        b.com[:, :, 4] * gb * fb3,
    ]
    d3 = d[:, None, None]
    ma_b = ma_b + d3 * mb_b
    cb[0] = cb[0] + 2.0 * d3 * cb[1] + d3 * d3 * cb[2]
    cb[1] = cb[1] + d3 * cb[2]
    cb[3] = cb[3] + d3 * cb[4]
    da, db = ma_b - ma_a, mb_b - mb_a
    frac3, cross3, dr3 = frac[:, None, None], cross[:, None, None], dr[:, None, None]
    mean = np.stack([ma_a + da * frac3, mb_a + db * frac3], axis=2)
    com = np.stack(
        [
            ca[0] + cb[0] + da * da * cross3,
            ca[1] + cb[1] + da * db * cross3,
            ca[2] + cb[2] + db * db * cross3,
            ca[3] + cb[3] + da * dr3 * cross3,
            ca[4] + cb[4] + db * dr3 * cross3,
        ],
        axis=2,
    )
    weighted = None
    if a.weighted is not None and b.weighted is not None:
        weighted = _merge_weighted(a.weighted, b.weighted, b.shift - a.shift, frac, cross)
    out = Moments(
        n,
        a.shift.copy(),
        e.astype(np.float64),
        r_mean,
        r_m2,
        w.astype(np.float64),
        mean,
        com,
        np.maximum(a.max_w, b.max_w),
        a.n_clipped + b.n_clipped,
        weighted,
    )
    # a group empty on one side is the other side's, exactly
    only_b, only_a = na == 0, nb == 0
    if only_b.any() or only_a.any():
        for src, mask in ((b, only_b), (a, only_a)):
            for name in MOMENT_FIELDS:
                getattr(out, name)[mask] = getattr(src, name)[mask]
            if weighted is not None:
                assert src.weighted is not None
                for name in ("head", "mean", "com", "s_range"):
                    getattr(weighted, name)[mask] = getattr(src.weighted, name)[mask]
    return out


def _merge_weighted(
    a: Weighted, b: Weighted, d: np.ndarray, frac: np.ndarray, cross: np.ndarray
) -> Weighted:
    """:func:`_nb_wmerge` for every group at once: ``b`` re-expressed about ``a``'s shift
    (``d`` = b's shift minus a's, real units), then Chan et al.'s update."""
    ha, hb = a.head, b.head
    m0 = hb[:, 0]
    m1 = hb[:, 1] + d * m0
    c00 = hb[:, 2]
    c01 = hb[:, 3] + d * c00
    c11 = hb[:, 4] + 2.0 * d * hb[:, 3] + d * d * c00
    d0, d1 = m0 - ha[:, 0], m1 - ha[:, 1]
    head = np.column_stack(
        [
            ha[:, 0] + d0 * frac,
            ha[:, 1] + d1 * frac,
            ha[:, 2] + (c00 + d0 * d0 * cross),
            ha[:, 3] + (c01 + d0 * d1 * cross),
            ha[:, 4] + (c11 + d1 * d1 * cross),
        ]
    )
    d3, f3, x3, e3 = d[:, None, None], frac[:, None, None], cross[:, None, None], d0[:, None, None]
    mb = b.mean[:, :, 1]
    ma = b.mean[:, :, 0] + d3 * mb
    cb = b.com
    caa = cb[:, :, 0] + 2.0 * d3 * cb[:, :, 1] + d3 * d3 * cb[:, :, 2]
    cab = cb[:, :, 1] + d3 * cb[:, :, 2]
    cas = cb[:, :, 3] + d3 * cb[:, :, 4]
    da, db = ma - a.mean[:, :, 0], mb - a.mean[:, :, 1]
    ca = a.com
    mean = np.stack([a.mean[:, :, 0] + da * f3, a.mean[:, :, 1] + db * f3], axis=2)
    com = np.stack(
        [
            ca[:, :, 0] + (caa + da * da * x3),
            ca[:, :, 1] + (cab + da * db * x3),
            ca[:, :, 2] + (cb[:, :, 2] + db * db * x3),
            ca[:, :, 3] + (cas + da * e3 * x3),
            ca[:, :, 4] + (cb[:, :, 4] + db * e3 * x3),
        ],
        axis=2,
    )
    s_range = np.column_stack(
        [np.minimum(a.s_range[:, 0], b.s_range[:, 0]), np.maximum(a.s_range[:, 1], b.s_range[:, 1])]
    )
    return Weighted(head, mean, com, s_range)


# ============================================================================================
# the entry point
# ============================================================================================
def _columns(
    target: np.ndarray | Sequence[np.ndarray],
) -> tuple[list[np.ndarray] | None, np.ndarray | None, int, int]:
    """``(columns, matrix, n, P)``: contiguous float64 columns when they can be had without
    copying the (n, P) block, else the matrix itself."""
    if isinstance(target, np.ndarray):
        if target.ndim == 1:
            target = target[:, None]
        n, n_pol = target.shape
        if n_pol == 1 or target.flags.f_contiguous:
            cols = [target[:, j] for j in range(n_pol)]
            if all(c.dtype == np.float64 and c.flags.c_contiguous for c in cols):
                return cols, None, n, n_pol
        return None, target, n, n_pol
    if not all(isinstance(c, np.ndarray) and c.ndim == 1 for c in target):
        return _columns(np.asarray(target, dtype=np.float64))
    cols = [np.ascontiguousarray(c, dtype=np.float64) for c in target]
    n = int(cols[0].shape[0]) if cols else 0
    return cols, None, n, len(cols)


def row_ranges(n: int, block: int, parts: int | None = None) -> list[tuple[int, int]]:
    """Contiguous row ranges covering ``[0, n)``, cut at multiples of ``block`` (so that every
    thread's blocks are the serial pass's blocks): ``parts`` of them, by default one per thread
    of a compiled pass over ``n`` rows (:func:`threads`, at least :data:`PARALLEL_MIN_ROWS` rows
    each, and one from any thread but the main one, whose caller already shares the cores)."""
    if parts is None:
        parts = _threads_for(n)
    n_blocks = -(-n // block)
    parts = max(1, min(parts, n_blocks))
    edges = [min(n, (n_blocks * i // parts) * block) for i in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:], strict=True) if hi > lo]


def _nb_accumulate(
    r: np.ndarray,
    p: np.ndarray,
    cols: list[np.ndarray] | None,
    mat: np.ndarray | None,
    codes: np.ndarray | None,
    g_count: int,
    mw: float,
    has_clip: bool,
    block: int,
    n: int,
    n_pol: int,
    s: np.ndarray | None,
    plain: bool,
) -> tuple[Moments, np.ndarray, np.ndarray, np.ndarray]:
    """The compiled pass over all rows: ``(moments, reward/propensity keys, target keys low,
    high)``, on :func:`threads` threads when the rows are many (each thread runs a contiguous
    range of whole blocks into its own accumulators; the results merge in row order by
    :func:`merge`, the update that merges record batches)."""
    fns = _compiled()
    keep = cols or []  # the columns stay referenced here while the pass reads their addresses
    addresses = column_addresses(keep)
    m_arg = np.empty((0, n_pol)) if mat is None else mat
    c_arg = codes if codes is not None else np.empty(0, dtype=np.int64)
    s_arg = np.empty(0) if s is None else s
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min

    def run(lo: int, hi: int) -> tuple[Moments, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        acc = empty(n_pol, g_count, weighted=s is not None)
        hdr = np.zeros((g_count, 4))  # [shift, r_exp, r_mean, r_m2] of no rows
        keys = np.array([big, small, big, small], dtype=np.int64)
        tlo_k = _filled((n_pol,), big, np.int64)
        thi_k = _filled((n_pol,), small, np.int64)
        wt = acc.weighted if acc.weighted is not None else _NO_WEIGHTED
        fns["_nb_run"](
            r,
            p,
            addresses,
            m_arg,
            mat is not None,
            c_arg,
            g_count,
            mw,
            has_clip,
            block,
            acc.n,
            hdr,
            acc.w_exp,
            acc.mean,
            acc.com,
            acc.max_w,
            acc.n_clipped,
            tlo_k,
            thi_k,
            keys,
            s_arg,
            wt.head,
            wt.mean,
            wt.com,
            wt.s_range,
            plain,
            lo,
            hi,
        )
        return acc, hdr, keys, tlo_k, thi_k

    def moments(acc: Moments, hdr: np.ndarray) -> Moments:
        """The accumulator with the header the pass filled ([shift, r_exp, r_mean, r_m2])."""
        return Moments(
            acc.n,
            hdr[:, 0].copy(),
            hdr[:, 1].copy(),
            hdr[:, 2].copy(),
            hdr[:, 3].copy(),
            acc.w_exp,
            acc.mean,
            acc.com,
            acc.max_w,
            acc.n_clipped,
            acc.weighted,
        )

    ranges = row_ranges(n, block)
    if len(ranges) == 1:
        acc, hdr, keys, tlo_k, thi_k = run(0, n)
        return moments(acc, hdr), keys, tlo_k, thi_k
    if not _loaded(fns["_nb_run"]):  # the first call loads (or compiles) it: on one thread
        parts = [run(lo, hi) for lo, hi in ranges]
    else:
        parts = run_threads(run, ranges)
    acc, hdr, keys, tlo_k, thi_k = parts[0]
    keys, tlo_k, thi_k = keys.copy(), tlo_k.copy(), thi_k.copy()
    out = None if acc.weighted is None else moments(acc, hdr)
    for part, phdr, pkeys, plo, phi in parts[1:]:
        if out is None:  # merged in place by the compiled update of the blocks, group by group
            fns["_nb_merge_parts"](
                acc.n, hdr, acc.w_exp, acc.mean, acc.com, acc.max_w, acc.n_clipped,
                part.n, phdr, part.w_exp, part.mean, part.com, part.max_w, part.n_clipped,
            )  # fmt: skip
        else:
            out = merge(out, moments(part, phdr))
        keys[0::2] = np.minimum(keys[0::2], pkeys[0::2])
        keys[1::2] = np.maximum(keys[1::2], pkeys[1::2])
        np.minimum(tlo_k, plo, out=tlo_k)
        np.maximum(thi_k, phi, out=thi_k)
    return (moments(acc, hdr) if out is None else out), keys, tlo_k, thi_k


#: The compiled functions known to be loaded (asking a dispatcher for its signatures hashes its
#: types: a tenth of a millisecond per call).
_LOADED: set[int] = set()


def _loaded(dispatcher: Any) -> bool:
    """Whether a compiled function has been loaded (or compiled) for some signature."""
    if id(dispatcher) in _LOADED:
        return True
    if dispatcher.signatures:
        _LOADED.add(id(dispatcher))
        return True
    return False


def run_threads(run: Callable[[int, int], Any], ranges: Sequence[tuple[int, int]]) -> list[Any]:
    """``run(lo, hi)`` of every range on this thread and the kernel's persistent worker threads
    (compiled loops release the GIL); results in the order of ``ranges``; the exception of the
    first range that raised is raised here, once every range has ended (an interrupt such as
    ``KeyboardInterrupt`` first, and in the calling thread at once).

    The ranges are taken in order by whichever thread is free, this one included: a worker
    that wakes late (on a virtual machine, waking an idle CPU can take a millisecond, longer
    than a whole pass over a million rows) finds its range done by this thread instead of
    making the call wait for it. Each range is run once, by one thread, so the results do not
    depend on which thread ran it.
    """
    if len(ranges) <= 1:  # no range (nothing to run) or one: on this thread
        return [run(*r) for r in ranges]
    count = len(ranges)
    results: list[Any] = [None] * count
    errors: list[BaseException | None] = [None] * count
    ended = [threading.Event() for _ in range(count)]
    taken = iter(range(count))
    lock = threading.Lock()

    def work(caller: bool) -> None:
        while True:
            with lock:
                k = next(taken, None)
            if k is None:
                return
            try:
                results[k] = run(*ranges[k])
            except BaseException as exc:  # raised in the calling thread, below
                errors[k] = exc
                if caller and not isinstance(exc, Exception):
                    raise  # an interrupt (Ctrl-C) stops the caller at once
            finally:
                ended[k].set()

    pool = _pool(count - 1)
    for _ in range(count - 1):
        pool.submit(work, False)
    work(True)
    for event in ended:  # only the ranges a worker took can still be running
        event.wait()
    # an interrupt or exit first, then the first range's error
    for error in sorted(
        (e for e in errors if e is not None), key=lambda e: isinstance(e, Exception)
    ):
        raise error
    return results


#: The worker threads of split passes: started on first use and kept (starting a thread per
#: call costs a quarter of a millisecond on small virtual machines), dropped in a forked child.
_POOL: dict[str, Any] = {"pool": None, "size": 0, "lock": threading.Lock()}


def _pool(size: int) -> Any:
    from concurrent.futures import ThreadPoolExecutor

    with _POOL["lock"]:
        if _POOL["pool"] is None or _POOL["size"] < size:
            old = _POOL["pool"]
            _POOL["pool"] = ThreadPoolExecutor(max_workers=size, thread_name_prefix="ope-kernel")
            _POOL["size"] = size
            if old is not None:
                old.shutdown(wait=False)
        return _POOL["pool"]


def _forget_pool() -> None:
    """In a forked child the parent's worker threads do not exist: start new ones on use."""
    _POOL.update(pool=None, size=0, lock=threading.Lock())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def accumulate(
    reward: np.ndarray,
    logging_propensity: np.ndarray,
    target: np.ndarray | Sequence[np.ndarray],
    *,
    max_weight: float | None,
    codes: np.ndarray | None = None,
    n_groups: int = 1,
    block_rows: int | None = None,
    sampling_weight: np.ndarray | None = None,
    plain: bool = True,
) -> tuple[Moments, Checks]:
    """One pass over the rows: the statistics of every candidate (and group).

    Parameters
    ----------
    reward, logging_propensity : numpy.ndarray, shape (n,)
        float64 (or float32) arrays, not yet checked: the returned :class:`Checks` say what the
        pass saw, for the caller's validation.
    target : numpy.ndarray of shape (n, P), or a sequence of P arrays of shape (n,)
        The target propensities; a sequence of contiguous float64 columns (e.g. zero-copy views
        of Arrow columns) is read as it is, without forming an (n, P) block. With sampling
        weights ``P`` may be 0 (an empty sequence): the pass then forms the reward statistics and
        the weighted head only (the logging value).
    max_weight : float or None
        Clip level of the clipped statistics (None: they equal the raw ones).
    codes : numpy.ndarray of int, shape (n,), optional
        Group of each row, in ``[0, n_groups)``: the statistics are then per group.
    n_groups : int, default 1
    block_rows : int, optional
        Largest number of rows per block (default :data:`BLOCK_ROWS` compiled,
        :data:`NUMPY_BLOCK_ROWS` with numpy); smaller blocks only change the rounding.
    sampling_weight : numpy.ndarray, shape (n,), optional
        The rows' sampling weights, already checked (finite, > 0): the same pass then also
        accumulates the sampling-weighted statistics (``Moments.weighted``, :class:`Weighted`),
        in the same blocks and merged by the same update, at the cost of a second set of
        per-policy sums over the block while it is in cache.
    plain : bool, default True
        False (with ``sampling_weight`` and without ``codes``): skip the unweighted means and
        co-moments, which are then NaN (the largest weights, clipped counts, reward statistics
        and checks are still formed): the pass of an estimate that reads only the weighted ones.

    Returns
    -------
    (Moments, Checks)
    """
    r = np.ascontiguousarray(reward, dtype=np.float64)
    p = np.ascontiguousarray(logging_propensity, dtype=np.float64)
    cols, mat, n, n_pol = _columns(target)
    if not n_pol:  # no policies: the rows are the rewards'
        n = int(r.shape[0])
    if codes is not None:
        codes = np.ascontiguousarray(codes, dtype=np.int64)
        n_groups = int(n_groups)
    g_count = n_groups if codes is not None else 1
    plain = bool(plain) or sampling_weight is None or codes is not None
    s = None if sampling_weight is None else np.ascontiguousarray(sampling_weight, dtype=np.float64)
    chk = np.array([1.0, np.inf, -np.inf, np.inf, -np.inf])
    if n and (n_pol or s is not None) and backend() == "numba":
        has_clip = max_weight is not None
        mw = float(max_weight) if max_weight is not None else 1.0
        if mat is not None and not (mat.dtype == np.float64 and mat.flags.c_contiguous):
            mat = np.ascontiguousarray(mat, dtype=np.float64)
        acc, keys, tlo_k, thi_k = _nb_accumulate(
            r,
            p,
            cols,
            mat,
            codes,
            g_count,
            mw,
            has_clip,
            int(min(BLOCK_ROWS, block_rows or BLOCK_ROWS)),
            n,
            n_pol,
            s,
            plain,
        )
        chk[1:] = _key_floats(keys)
        tlo, thi = _key_floats(tlo_k), _key_floats(thi_k)
    else:  # numpy, or nothing to pass over
        acc = empty(n_pol, g_count, weighted=s is not None)
        tlo, thi = _filled((n_pol,), np.inf), _filled((n_pol,), -np.inf)
        if n and (n_pol or s is not None):  # no policies: the sampling-weighted head alone
            has_clip = max_weight is not None
            step = int(min(NUMPY_BLOCK_ROWS, block_rows or NUMPY_BLOCK_ROWS))
            for start in range(0, n, step):  # a loop over blocks, not rows
                sl = slice(start, min(start + step, n))
                if cols is not None:
                    t_block = (
                        np.column_stack([c[sl] for c in cols])
                        if cols
                        else np.empty((sl.stop - sl.start, 0))
                    )
                else:
                    assert mat is not None  # _columns returns the columns or the matrix
                    t_block = mat[sl]
                with np.errstate(all="ignore"):
                    part = _np_block(
                        r[sl],
                        p[sl],
                        t_block,
                        max_weight if has_clip else None,
                        chk,
                        tlo,
                        thi,
                        None if codes is None else codes[sl],
                        g_count,
                        None if s is None else s[sl],
                        plain,
                    )
                    acc = merge(acc, part)
    if not plain:  # not formed: NaN, so that nothing reads them as statistics
        acc.mean[...] = np.nan
        acc.com[...] = np.nan
    finite = not (n and (n_pol or s is not None)) or (
        bool(chk[0] == 1.0)
        and math.isfinite(chk[1])
        and math.isfinite(chk[2])
        and _all_finite(acc, plain=plain)
    )
    checks = Checks(finite, float(chk[1]), float(chk[2]), float(chk[3]), float(chk[4]), tlo, thi)
    return acc, checks


def accumulate_outcomes(
    rewards: Sequence[np.ndarray],
    logging_propensity: np.ndarray,
    target: np.ndarray | Sequence[np.ndarray],
    *,
    max_weight: float | None,
    block_rows: int | None = None,
) -> list[tuple[Moments, Checks]]:
    """One pass over the rows for several outcomes on the same weights: the
    :func:`accumulate` result of each outcome (ungrouped, without sampling weights).

    The compiled pass forms each block's weights once (each target column is read once,
    whatever the number of outcomes) and then each outcome's statistics, in the blocks and
    order :func:`accumulate` uses for that outcome alone: the numbers are the same. The numpy
    backend runs :func:`accumulate` per outcome (the same numbers; one pass each).

    Parameters
    ----------
    rewards : sequence of numpy.ndarray, shape (n,) each
        The outcomes (at least one), not yet checked (see :class:`Checks`).
    logging_propensity, target, max_weight, block_rows
        As in :func:`accumulate`.
    """
    rs = [np.ascontiguousarray(r, dtype=np.float64) for r in rewards]
    if not rs:
        from ope.exceptions import ParameterError

        raise ParameterError("accumulate_outcomes needs at least one outcome, e.g. [reward, cost].")
    p = np.ascontiguousarray(logging_propensity, dtype=np.float64)
    cols, mat, n, n_pol = _columns(target)
    if len(rs) == 1 or backend() != "numba" or not (n and n_pol):
        return [accumulate(r, p, target, max_weight=max_weight, block_rows=block_rows) for r in rs]
    if any(r.shape[0] != n for r in rs) or p.shape[0] != n:
        from ope.exceptions import ValidationError

        lengths = [r.shape[0] for r in rs]
        raise ValidationError(
            f"every outcome needs one value per row ({n} rows of propensities); the outcomes "
            f"have {lengths} rows."
        )
    n_out = len(rs)
    # the outcomes as addresses (read where they are: no (L, n) copy), kept alive by ``rs``
    outcome_addresses = column_addresses(rs)
    if mat is not None and not (mat.dtype == np.float64 and mat.flags.c_contiguous):
        mat = np.ascontiguousarray(mat, dtype=np.float64)
    has_clip = max_weight is not None
    mw = float(max_weight) if max_weight is not None else 1.0
    block = int(min(BLOCK_ROWS, block_rows or BLOCK_ROWS))
    fns = _compiled()
    keep = cols or []  # referenced here while the pass reads their addresses
    addresses = column_addresses(keep)
    m_arg = np.empty((0, n_pol)) if mat is None else mat
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min

    def run(lo: int, hi: int) -> tuple[list[Moments], np.ndarray, np.ndarray, np.ndarray]:
        accs = [empty(n_pol) for _ in range(n_out)]
        an = np.stack([a.n for a in accs])
        hdr = np.stack([np.column_stack([a.shift, a.r_exp, a.r_mean, a.r_m2]) for a in accs])
        aexp = np.stack([a.w_exp for a in accs])
        am = np.stack([a.mean for a in accs])
        ac = np.stack([a.com for a in accs])
        amax = np.stack([a.max_w for a in accs])
        aclip = np.stack([a.n_clipped for a in accs])
        keys = np.tile(np.array([big, small, big, small], dtype=np.int64), (n_out, 1))
        tlo_k = np.full(n_pol, big, dtype=np.int64)
        thi_k = np.full(n_pol, small, dtype=np.int64)
        fns["_nb_run_outcomes"](
            outcome_addresses,
            n,
            p,
            addresses,
            m_arg,
            mat is not None,
            mw,
            has_clip,
            block,
            an,
            hdr,
            aexp,
            am,
            ac,
            amax,
            aclip,
            tlo_k,
            thi_k,
            keys,
            lo,
            hi,
        )
        out = [
            Moments(
                an[o],
                hdr[o, :, 0].copy(),
                hdr[o, :, 1].copy(),
                hdr[o, :, 2].copy(),
                hdr[o, :, 3].copy(),
                aexp[o],
                am[o],
                ac[o],
                amax[o],
                aclip[o],
            )
            for o in range(n_out)
        ]
        return out, keys, tlo_k, thi_k

    ranges = row_ranges(n, block)
    if len(ranges) == 1 or not _loaded(fns["_nb_run_outcomes"]):
        parts = [run(lo, hi) for lo, hi in ranges]  # the first call compiles: on one thread
    else:
        parts = run_threads(run, ranges)
    accs, keys, tlo_k, thi_k = parts[0]
    keys, tlo_k, thi_k = keys.copy(), tlo_k.copy(), thi_k.copy()
    for part, pkeys, plo, phi in parts[1:]:  # merged in row order, as accumulate merges
        accs = [merge(a, b) for a, b in zip(accs, part)]
        keys[:, 0::2] = np.minimum(keys[:, 0::2], pkeys[:, 0::2])
        keys[:, 1::2] = np.maximum(keys[:, 1::2], pkeys[:, 1::2])
        np.minimum(tlo_k, plo, out=tlo_k)
        np.maximum(thi_k, phi, out=thi_k)
    tlo, thi = _key_floats(tlo_k), _key_floats(thi_k)
    results = []
    for o, acc in enumerate(accs):  # a loop over outcomes
        chk = _key_floats(keys[o])
        finite = math.isfinite(chk[0]) and math.isfinite(chk[1]) and _all_finite(acc)
        checks = Checks(
            finite, float(chk[0]), float(chk[1]), float(chk[2]), float(chk[3]), tlo, thi
        )
        results.append((acc, checks))
    return results


def key_range(arr: np.ndarray) -> tuple[float, float] | None:
    """``(min, max)`` of a non-empty C-contiguous float64 array in one compiled read of its bit
    patterns' order keys (a NaN lies beyond the infinities: it shows as a NaN end); None when
    the array is of another kind, the backend is numpy, or the compiled kernel has not been
    loaded in this process (loading it imports numba, about half a second, which a validation
    alone never pays): the caller then reads ``min`` and ``max``. A range reaching zero from
    both signs starts at ``-0.0``.

    >>> import numpy as np
    >>> key_range(np.array([3.0, -1.5, 2.0])) in ((-1.5, 3.0), None)
    True
    """
    fns = _state["numba"]
    if fns is None or not (arr.dtype == np.float64 and arr.flags.c_contiguous and arr.size):
        return None
    if backend() != "numba":  # forced to numpy
        return None
    lo, hi = fns["_nb_key_range"](arr.reshape(-1).view(np.int64))
    low, high = _key_floats(np.array([lo, hi]))
    return float(low), float(high)


def _key_floats(keys: np.ndarray) -> np.ndarray:
    """The floats of order keys (the key map is its own inverse)."""
    k = np.asarray(keys, dtype=np.int64)
    return (k ^ ((k >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))).view(np.float64)


def _all_finite(m: Moments, *, plain: bool = True) -> bool:
    arrays = [m.r_mean, m.r_m2, m.shift]
    if plain:
        arrays += [m.mean, m.com]
    if m.weighted is not None:
        arrays += [m.weighted.head, m.weighted.mean, m.weighted.com]
    # the ufunc's own reduce: no Python wrapper (``.all()`` goes through one)
    return all(bool(_AND(np.isfinite(a), axis=None)) for a in arrays)


_AND: Final = np.logical_and.reduce
