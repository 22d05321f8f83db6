"""The rules of the oracle rebuild: the allow-list of primitives, the limits and the refusal error.

Shared by the parser (:mod:`gpuprivacy.oracle._rebuild_parse`), the parameter
schema (:mod:`gpuprivacy.oracle._rebuild_params`) and the rebuild
(:mod:`gpuprivacy.oracle._rebuild`); nothing here comes from the sandbox.
A primitive off :data:`ALLOWED_PRIMITIVES` is refused by name; one on it is
still refused when a parameter name is not one JAX 0.10.2 gives it or a
value is not valid for its unbatched operands (see ``_rebuild_params``).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import jax
import numpy as np
from jax import lax


class OracleRefused(ValueError):
    """The engine refuses to run an oracle: it is not a pure function of its block it can prove."""


@dataclasses.dataclass(frozen=True)
class RebuildLimits:
    """Public caps on what a sandboxed oracle may contain and on how long one evaluation may run.

    The work budget is global: ``max_work`` bounds the loop iterations of ONE evaluation of the
    oracle (on one subset) across all its loops together, nested or not. Every ``while`` iteration
    and every ``scan`` iteration costs one unit: a scan of length ``n`` whose body costs ``w`` costs
    ``n * (1 + w)``, a ``cond`` costs the sum of its branches (under the engine's ``vmap``, subsets
    that disagree on the index run every branch), an inlined call costs its body. What the ``scan``
    loops cost whatever the data ("static work") is computed when the oracle is rebuilt; an oracle
    whose static work exceeds ``max_work`` is refused. ``while`` loops spend the rest at run time
    from one counter threaded through the whole oracle (loop bodies and tests, branches, inlined
    calls): a ``while`` loop ends before an iteration (which costs 1 plus the static work of its
    body and test) that would take the counter past ``max_work``, and that evaluation of the oracle
    is then NaN, a non-response (never the loop's cut state). Branches a subset does not take and
    loop bodies run for a subset whose loop has ended (both happen under ``vmap``) see an exhausted
    counter, so their loops do not iterate.
    Nested loops therefore cannot multiply the budget: one evaluation runs at most ``max_work``
    loop iterations, and a batched evaluation of ``B`` subsets at most ``B * max_work`` (a batched
    loop runs as many iterations as its longest subset), whatever the data. The budget bounds the
    data-dependent running time; it does not hide it. An honest oracle whose loops stay within the
    budget computes the same values as unrebuilt.

    Attributes:
      max_work: loop iterations of one evaluation, across all loops (default ``10**6``).
      max_const_elements: elements of one constant array (or literal).
      max_total_const_elements: elements of all constants together.
      max_shape_elements: elements of any intermediate value.
      max_depth: nesting depth of jaxprs (calls, branches, loop bodies).
      max_eqns: equations in the whole tree.
      max_scan_length: the length of one ``scan`` (``max_work`` bounds it too).
      max_tree_nodes: JSON nodes in the tree.
      max_tree_nesting: nesting depth of the JSON structure itself.
      max_while_iterations: deprecated alias of ``max_work``, kept for existing callers. It was a
        per-loop cap; when given it now sets the global budget ``max_work`` (which must then be left
        at its default).

    Raises:
      ValueError: a cap is not a positive Python int, ``max_work`` exceeds ``2**62`` (the work
        counter is an int64), or both ``max_work`` and ``max_while_iterations`` are given.
    """

    max_work: int = 1_000_000
    max_const_elements: int = 65_536
    max_total_const_elements: int = 1_048_576
    max_shape_elements: int = 1 << 26
    max_depth: int = 32
    max_eqns: int = 100_000
    max_scan_length: int = 10_000_000
    max_tree_nodes: int = 5_000_000
    max_tree_nesting: int = 400
    max_while_iterations: int | None = None

    def __post_init__(self):
        if self.max_while_iterations is not None:
            if self.max_work != RebuildLimits.max_work:
                raise ValueError(f"give max_work={self.max_work!r} or its deprecated alias "
                                 f"max_while_iterations={self.max_while_iterations!r}, not both.")
            # No DeprecationWarning: the test suite turns warnings into errors, and the alias only
            # tightens what it used to mean (one budget for all loops instead of one per loop).
            object.__setattr__(self, "max_work", self.max_while_iterations)
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name != "max_while_iterations" and (type(value) is not int or value < 1):
                raise ValueError(f"RebuildLimits.{field.name} must be a positive int, got {value!r}.")
        if self.max_work > 2**62:
            raise ValueError(f"RebuildLimits.max_work must be at most 2**62 (an int64 counter), "
                             f"got {self.max_work!r}.")


DEFAULT_LIMITS = RebuildLimits()

# --- the allow-list -------------------------------------------------------------------------------

ELEMENTWISE = frozenset("""
add add_any sub mul div rem neg abs sign floor ceil round exp exp2 log log1p expm1 sqrt rsqrt cbrt pow
integer_pow square tanh logistic sin cos tan asin acos atan atan2 sinh cosh asinh acosh atanh erf erfc erf_inv
lgamma digamma is_finite max min nextafter clamp select_n eq ne lt le gt ge and or not xor shift_left
shift_right_logical shift_right_arithmetic population_count clz convert_element_type bitcast_convert_type
reduce_precision stop_gradient
""".split())
STRUCTURE = frozenset("""
broadcast_in_dim reshape squeeze transpose rev concatenate pad slice dynamic_slice
dynamic_update_slice gather iota split copy
""".split())
REDUCTIONS = frozenset("""
reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax argmin cumsum cumprod
cummax cummin cumlogsumexp sort top_k dot_general
""".split())
LINALG = frozenset("lu lu_pivots_to_permutation triangular_solve cholesky".split())
SCATTERS = {"scatter": lax.scatter, "scatter-add": lax.scatter_add, "scatter-mul": lax.scatter_mul,
            "scatter-min": lax.scatter_min, "scatter-max": lax.scatter_max, "scatter-sub": lax.scatter_sub}
# Calls inlined by the rebuild: primitive name -> parameter holding the body. Only names JAX 0.10.2
# emits are listed (``jax.checkpoint`` is ``remat2``; there is no ``pjit``, ``core_call``, ``copy_p`` or
# ``expand_dims`` primitive): every name on the allow-list has a parameter schema in ``_rebuild_params``.
INLINED = {"jit": ("jaxpr",), "closed_call": ("call_jaxpr",), "remat2": ("jaxpr",),
           "custom_jvp_call": ("call_jaxpr",), "custom_vjp_call": ("call_jaxpr",)}
CONTROL = frozenset({"cond", "while", "scan", "custom_linear_solve"})
BOUND = ELEMENTWISE | STRUCTURE | REDUCTIONS | LINALG
ALLOWED_PRIMITIVES = BOUND | frozenset(SCATTERS) | frozenset(INLINED) | CONTROL

# Parameters that may hold a dropped sharding / mesh / layout (bound as None where kept).
_SHARDING_KEYS = frozenset({"sharding", "out_sharding"})
# Parameters of inlined calls whose values are ignored (any plain or dropped value).
_IGNORED_KEYS = frozenset({"jvp_jaxpr_fun", "fwd_jaxpr_thunk", "bwd", "out_trees", "policy",
                           "in_shardings", "out_shardings", "in_layouts", "out_layouts", "ctx_mesh",
                           "compiler_options_kvs", "donated_invars", "name", "keep_unused", "inline",
                           "num_consts", "symbolic_zeros", "prevent_cse", "differentiated"})

_DTYPES = {name: np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128")}
_DTYPES["bfloat16"] = np.dtype(jax.numpy.bfloat16)

_PRIMITIVE_MODULES = ("jax._src.lax.lax", "jax._src.lax.slicing", "jax._src.lax.special",
                      "jax._src.lax.control_flow.loops", "jax._src.lax.linalg", "jax._src.ad_util")


def _primitive_table() -> dict[str, Any]:
    from jax._src import core
    table = {}
    for module_name in _PRIMITIVE_MODULES:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if isinstance(value, core.Primitive) and value.name in BOUND:
                table.setdefault(value.name, value)
    return table


_PRIMITIVES = _primitive_table()


def _enum_table() -> dict[str, type]:
    from jax._src.lax import lax as lax_internal
    from jax._src.lax import slicing
    return {"RoundingMethod": lax_internal.RoundingMethod, "GatherScatterMode": slicing.GatherScatterMode,
            "Precision": lax_internal.Precision}


def _struct_table() -> dict[str, type]:
    from jax._src.lax import slicing
    return {"GatherDimensionNumbers": slicing.GatherDimensionNumbers,
            "ScatterDimensionNumbers": slicing.ScatterDimensionNumbers,
            "_LinearSolveTuple": tuple}


_ENUMS = _enum_table()
_STRUCTS = _struct_table()
_STRUCT_FIELDS = {
    "GatherDimensionNumbers": ("offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
                               "start_indices_batching_dims"),
    "ScatterDimensionNumbers": ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                                "operand_batching_dims", "scatter_indices_batching_dims"),
    "_LinearSolveTuple": ("matvec", "vecmat", "solve", "transpose_solve"),
}
