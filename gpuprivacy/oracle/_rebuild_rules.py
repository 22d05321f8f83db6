"""The rules of the oracle rebuild: the allow-list of primitives, the limits and the refusal error.

Shared by the parser (:mod:`gpuprivacy.oracle._rebuild_parse`) and the rebuild
(:mod:`gpuprivacy.oracle._rebuild`); nothing here comes from the sandbox.
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
    """Public caps on what a sandboxed oracle may contain.

    Attributes:
      max_while_iterations: every ``while`` loop stops after this many iterations.
      max_const_elements: elements of one constant array (or literal).
      max_total_const_elements: elements of all constants together.
      max_shape_elements: elements of any intermediate value.
      max_depth: nesting depth of jaxprs (calls, branches, loop bodies).
      max_eqns: equations in the whole tree.
      max_scan_length: the length of one ``scan``.
      max_tree_nodes: JSON nodes in the tree.
      max_tree_nesting: nesting depth of the JSON structure itself.
    """

    max_while_iterations: int = 1_000_000
    max_const_elements: int = 65_536
    max_total_const_elements: int = 1_048_576
    max_shape_elements: int = 1 << 26
    max_depth: int = 32
    max_eqns: int = 100_000
    max_scan_length: int = 10_000_000
    max_tree_nodes: int = 5_000_000
    max_tree_nesting: int = 400


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
broadcast_in_dim reshape squeeze expand_dims transpose rev concatenate pad slice dynamic_slice
dynamic_update_slice gather iota split copy copy_p
""".split())
REDUCTIONS = frozenset("""
reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax argmin cumsum cumprod
cummax cummin cumlogsumexp sort top_k dot_general
""".split())
LINALG = frozenset("lu lu_pivots_to_permutation triangular_solve cholesky".split())
SCATTERS = {"scatter": lax.scatter, "scatter-add": lax.scatter_add, "scatter-mul": lax.scatter_mul,
            "scatter-min": lax.scatter_min, "scatter-max": lax.scatter_max, "scatter-sub": lax.scatter_sub}
# Calls inlined by the rebuild: primitive name -> parameter holding the body.
INLINED = {"jit": ("jaxpr",), "pjit": ("jaxpr",), "closed_call": ("call_jaxpr",), "core_call": ("call_jaxpr",),
           "remat2": ("jaxpr",), "checkpoint": ("jaxpr",), "custom_jvp_call": ("call_jaxpr",),
           "custom_vjp_call": ("call_jaxpr", "fun_jaxpr")}
CONTROL = frozenset({"cond", "while", "scan", "custom_linear_solve"})
BOUND = ELEMENTWISE | STRUCTURE | REDUCTIONS | LINALG
ALLOWED_PRIMITIVES = BOUND | frozenset(SCATTERS) | frozenset(INLINED) | CONTROL

# Parameters that may hold a dropped sharding / mesh / layout (bound as None where kept).
_SHARDING_KEYS = frozenset({"sharding", "out_sharding"})
# Parameters of inlined calls whose values are ignored (any plain or dropped value).
_IGNORED_KEYS = frozenset({"jvp_jaxpr_fun", "jvp_jaxpr_thunk", "fwd_jaxpr_thunk", "bwd", "out_trees", "policy",
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
